package generator

import (
	"strings"

	"github.com/oapi-codegen/oapi-codegen/v2/pkg/codegen"
)

// clientMethod is a method of oapi-codegen's client for an annotated
// operation that IdempotentClient wraps: one per body it can encode again
// for a retry, or one for an operation without a body.
type clientMethod struct {
	Name   string // CreateOrder, UpdateCustomerWithFormdataBody
	Params string // the parameters after ctx: ", params *CreateOrderParams, body CreateOrderJSONRequestBody"
	Args   string // the arguments after ctx: ", params, body"
}

// clientMethods lists the methods of oapi-codegen's client that send the
// operation: the io.Reader variant (WithBody) is left out, since a reader
// cannot be sent again on a retry.
func clientMethods(d codegen.OperationDefinition) []clientMethod {
	var params, args strings.Builder
	for _, p := range d.PathParams {
		params.WriteString(", " + p.GoVariableName() + " " + p.TypeDef())
		args.WriteString(", " + p.GoVariableName())
	}
	if d.RequiresParamObject() {
		params.WriteString(", params *" + d.OperationId + "Params")
		args.WriteString(", params")
	}
	if !d.HasBody() {
		return []clientMethod{{Name: d.OperationId, Params: params.String(), Args: args.String()}}
	}
	var methods []clientMethod
	for _, b := range d.Bodies {
		if !b.IsSupportedByClient() {
			continue
		}
		methods = append(methods, clientMethod{
			Name:   d.OperationId + b.Suffix(),
			Params: params.String() + ", body " + d.OperationId + b.NameTag + "RequestBody",
			Args:   args.String() + ", body",
		})
	}
	return methods
}
