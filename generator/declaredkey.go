package generator

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/idemgen/idemgen/generator/annotation"
	"github.com/idemgen/idemgen/idem"
	"github.com/oapi-codegen/oapi-codegen/v2/pkg/codegen"
)

// declaredKey honours an Idempotency-Key header parameter that the
// operation declares itself, as specs written for Stripe-style APIs do:
// its required flag says whether the key is required unless the
// annotation says so too, in which case they must agree, and its
// minLength, maxLength and pattern become the layer's limits.
func declaredKey(op *operation, a annotation.Operation, d codegen.OperationDefinition) error {
	var param *codegen.ParameterDefinition
	for i, p := range d.HeaderParams {
		if strings.EqualFold(p.ParamName, idem.HeaderKey) {
			param = &d.HeaderParams[i]
		}
	}
	if param == nil || param.Spec == nil {
		return nil
	}
	op.KeyDeclared = true
	fail := func(pos annotation.Position, format string, args ...any) error {
		return &annotation.Error{Pos: pos, Msg: fmt.Sprintf("x-idempotent on %s %s: ", op.Method, op.Path) + fmt.Sprintf(format, args...)}
	}
	switch {
	case a.RequiredAt == nil:
		op.KeyOptional = !param.Required
	case a.Required != param.Required:
		return fail(*a.RequiredAt, "required: %v contradicts the operation's own %s header parameter, which has required: %v; expected the same value in both, or required only on the parameter", a.Required, param.ParamName, param.Required)
	}
	if param.Spec.Schema == nil || param.Spec.Schema.Value == nil {
		return nil
	}
	s := param.Spec.Schema.Value
	if s.MaxLength != nil {
		if *s.MaxLength > idem.MaxKeyLen {
			return fail(a.Pos, "the operation's %s header parameter allows keys of %d characters, over the layer's limit of %d; expected a maxLength of at most %d", param.ParamName, *s.MaxLength, idem.MaxKeyLen, idem.MaxKeyLen)
		}
		op.KeyMaxLen = int(*s.MaxLength)
	}
	if s.MinLength > 1 {
		if op.KeyMaxLen > 0 && int(s.MinLength) > op.KeyMaxLen || s.MinLength > idem.MaxKeyLen {
			return fail(a.Pos, "the operation's %s header parameter has a minLength of %d, over its maxLength; expected a minLength no greater than the maxLength", param.ParamName, s.MinLength)
		}
		op.KeyMinLen = int(s.MinLength)
	}
	if s.Pattern != "" {
		if _, err := regexp.Compile(s.Pattern); err != nil {
			return fail(a.Pos, "the operation's %s header parameter has a pattern Go cannot compile (%v); expected a pattern in the syntax Go's regexp package shares with JSON Schema", param.ParamName, err)
		}
		op.KeyPattern = s.Pattern
	}
	return nil
}
