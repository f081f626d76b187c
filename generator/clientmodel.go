package generator

import (
	"slices"
	"strconv"
	"strings"

	"github.com/oapi-codegen/oapi-codegen/v2/pkg/codegen"
)

// clientMethod is a method of oapi-codegen's client for an annotated
// operation that IdempotentClient wraps: one per body it can encode again
// for a retry, or one for an operation without a body.
type clientMethod struct {
	Name   string        // CreateOrder, UpdateCustomerWithFormdataBody
	Params []clientParam // the parameters after ctx
}

// clientParam is a parameter of a client method: params
// *CreateOrderParams. Type is a type of oapi-codegen's output.
type clientParam struct {
	Name, Type string
}

// clientMethodNames are the names client.go.tmpl's methods use in their
// bodies besides their path parameters: receiver, parameters, locals and
// packages.
var clientMethodNames = []string{"c", "ctx", "params", "body", "reqEditors", "opts", "key", "editors", "context", "http", "idemclient"}

// clientMethods lists the methods of oapi-codegen's client that send the
// operation: the io.Reader variant (WithBody) is left out, since a reader
// cannot be sent again on a retry.
func clientMethods(d codegen.OperationDefinition) []clientMethod {
	var params []clientParam
	taken := map[string]bool{}
	for _, name := range clientMethodNames {
		taken[name] = true
	}
	for _, p := range d.PathParams {
		name := p.GoVariableName()
		if taken[name] {
			// Renamed, as oapi-codegen renames a parameter named like a
			// keyword, so that it neither shadows a name the method uses
			// nor is shadowed by it: a path parameter named key would
			// otherwise be sent the Idempotency-Key.
			base := "p" + strings.ToUpper(name[:1]) + name[1:]
			name = base
			for i := 2; taken[name]; i++ {
				name = base + strconv.Itoa(i)
			}
		}
		taken[name] = true
		params = append(params, clientParam{name, p.TypeDef()})
	}
	if d.RequiresParamObject() {
		params = append(params, clientParam{"params", "*" + d.OperationId + "Params"})
	}
	if !d.HasBody() {
		return []clientMethod{{Name: d.OperationId, Params: params}}
	}
	var methods []clientMethod
	for _, b := range d.Bodies {
		if !b.IsSupportedByClient() {
			continue
		}
		methods = append(methods, clientMethod{
			Name:   d.OperationId + b.Suffix(),
			Params: append(slices.Clip(params), clientParam{"body", d.OperationId + b.NameTag + "RequestBody"}),
		})
	}
	return methods
}
