package generator

import (
	"fmt"
	"slices"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/idemgen/idemgen/generator/annotation"
	"github.com/oapi-codegen/oapi-codegen/v2/pkg/codegen"
)

// scopeHeader finds the header parameter that the operation's
// scope: {header: NAME} names and returns its name as the spec spells
// it. A header the operation does not declare is an error here, at the
// annotation, instead of a 400 on every request at run time.
func scopeHeader(d codegen.OperationDefinition, a annotation.Operation) (string, error) {
	sc := a.Scope
	var names []string
	for _, p := range d.HeaderParams {
		if strings.EqualFold(p.ParamName, "Idempotency-Key") {
			continue // the key cannot be its own scope; annotation refuses it
		}
		if strings.EqualFold(p.ParamName, sc.Header) {
			return p.ParamName, nil
		}
		names = append(names, p.ParamName)
	}
	field, other := "scope.header", ""
	if sc.Default {
		// The default may not suit every operation: say how to override it.
		field, other = "x-idempotency.scope.header", ", or a scope of its own in x-idempotent"
	}
	expected := "a header parameter declared on the operation"
	if len(names) > 0 {
		slices.Sort(names)
		expected = "one of " + strings.Join(names, ", ")
	}
	return "", &annotation.Error{Pos: sc.HeaderPos, Msg: fmt.Sprintf(
		"x-idempotent on %s %s: %s %s: the operation declares no header parameter %q; expected %s%s",
		a.Method, a.Path, field, sc.Header, sc.Header, expected, other)}
}

// warning is a Result.Warnings line and where in the spec it points, to
// sort by.
type warning struct {
	pos  annotation.Position
	text string
}

// scopeWarning warns about an annotated operation whose spec sets no
// scope although its callers can be told apart, by a header that looks
// like a tenant's or by the security it requires: all of them share its
// keys unless idem.Options.Scope separates them, and nothing in the spec
// says it does. It returns "" when there is nothing to say.
func scopeWarning(a annotation.Operation, d codegen.OperationDefinition, docSecurity openapi3.SecurityRequirements) string {
	if a.Scope.Set {
		return ""
	}
	headers := tenantHeaders(d.HeaderParams)
	schemes := securitySchemes(d, docSecurity)
	var why []string
	if len(headers) > 0 {
		why = append(why, "declares "+plural("header", len(headers))+" "+strings.Join(headers, ", "))
	}
	if len(schemes) > 0 {
		why = append(why, "requires "+plural("security scheme", len(schemes))+" "+strings.Join(schemes, ", "))
	}
	if len(why) == 0 {
		return ""
	}
	fix := "set scope: {function: true} in x-idempotent or x-idempotency and scope keys by the authenticated principal in idem.Options.Scope, or scope: none if callers may share keys"
	if len(headers) > 0 {
		fix = fmt.Sprintf("set scope: {header: %s} in x-idempotent or x-idempotency, scope: {function: true} if idem.Options.Scope scopes keys in Go, or scope: none if callers may share keys", headers[0])
	}
	return fmt.Sprintf("%s: warning: x-idempotent on %s %s: keys are shared by every caller, but the operation %s; %s",
		a.Pos, a.Method, a.Path, strings.Join(why, " and "), fix)
}

func plural(thing string, n int) string {
	if n == 1 {
		return thing
	}
	return thing + "s"
}

// securitySchemes names the security schemes that apply to the
// operation: those of its own security, or of the document's when it has
// none. An empty security list on the operation overrides the document's.
func securitySchemes(d codegen.OperationDefinition, docSecurity openapi3.SecurityRequirements) []string {
	reqs := docSecurity
	if d.Spec != nil && d.Spec.Security != nil {
		reqs = *d.Spec.Security
	}
	var names []string
	for _, req := range reqs {
		for name := range req { // an empty requirement, {}, allows anonymous callers and names nothing
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// tenantHeaders returns the header parameters whose names look like they
// identify whom a request acts for, in the spec's order.
func tenantHeaders(params []codegen.ParameterDefinition) []string {
	var names []string
	for _, p := range params {
		if slices.ContainsFunc(nameWords(p.ParamName), tenantWord) {
			names = append(names, p.ParamName)
		}
	}
	return names
}

// tenantWord reports whether w, a lower-case word of a header's name,
// names a tenant, account or the like; an "id" suffix is allowed
// (X-Accountid). This is the one list of such words.
func tenantWord(w string) bool {
	switch strings.TrimSuffix(w, "id") {
	case "tenant", "account", "org", "organization", "organisation", "workspace",
		"team", "company", "merchant", "customer", "project":
		return true
	}
	return false
}

// nameWords splits a header's name into lower-case words at punctuation
// and at case changes, so that whole words are compared, never parts of
// them ("org" is not in X-Original-Url): X-AccountID gives x, account,
// id.
func nameWords(name string) []string {
	var words []string
	start := -1
	flush := func(end int) {
		if start >= 0 {
			words = append(words, strings.ToLower(name[start:end]))
		}
		start = -1
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !isAlnum(c) {
			flush(i)
			continue
		}
		if start >= 0 && isUpper(c) {
			prev := name[i-1]
			nextLower := i+1 < len(name) && isLower(name[i+1])
			// aB starts a word at B, and so does ABc (the end of an acronym)
			if isLower(prev) || isDigit(prev) || (isUpper(prev) && nextLower) {
				flush(i)
			}
		}
		if start < 0 {
			start = i
		}
	}
	flush(len(name))
	return words
}

func isUpper(c byte) bool { return 'A' <= c && c <= 'Z' }
func isLower(c byte) bool { return 'a' <= c && c <= 'z' }
func isDigit(c byte) bool { return '0' <= c && c <= '9' }
func isAlnum(c byte) bool { return isUpper(c) || isLower(c) || isDigit(c) }

// scopeDoc describes an operation's scope for the interface's comment,
// or returns "" when the spec sets none.
func scopeDoc(a annotation.Scope, header string) string {
	switch {
	case a.None:
		return "keys unscoped (scope: none)"
	case a.Function && header != "":
		return "keys scoped by idem.Options.Scope and header " + header
	case a.Function:
		return "keys scoped by idem.Options.Scope"
	case header != "":
		return "keys scoped by header " + header
	}
	return ""
}

// scopePanic is the message NewIdempotentStrictServer panics with when
// the spec says Go scopes the keys of ops (their names) and
// idem.Options.Scope is nil: without it every caller would share their
// keys, which the spec says must not happen.
func scopePanic(pkg string, ops []string) string {
	names := ops[0]
	if n := len(ops); n > 1 {
		names = strings.Join(ops[:n-1], ", ") + " and " + ops[n-1]
	}
	return fmt.Sprintf("%s: NewIdempotentStrictServer: opts.Scope is nil, but the spec scopes the keys of %s by idem.Options.Scope (scope: {function: true}); "+
		"set Options.Scope to a function that returns the caller's tenant or principal", pkg, names)
}
