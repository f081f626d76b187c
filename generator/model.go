package generator

import (
	"cmp"
	"errors"
	"fmt"
	"mime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/idemgen/idemgen/generator/annotation"
	"github.com/oapi-codegen/oapi-codegen/v2/pkg/codegen"
)

// model is what idempotency.go.tmpl renders.
type model struct {
	Spec       string // the spec's path relative to the output directory
	Package    string
	Idempotent bool   // whether any operation is annotated
	Phased     bool   // whether any operation is annotated with mode: phased
	Regexp     bool   // whether any operation's declared key has a pattern
	Client     bool   // whether to write IdempotentClient
	Server     string // the server kind: std-http, chi, echo, gin
	Operations []operation
	// Tests asks for the conformance helpers, in package KitPackage; Import
	// is the generated package's import path, which they import.
	Tests      bool
	KitPackage string
	Import     string
	// Mount is the server kind's code that builds the http.Handler,
	// rendered from mount-<kind>.go.tmpl.
	Mount string
	// Fingerprints is the source of the fingerprint writers.
	Fingerprints string
	// Contract is the comment that records how the annotated operations'
	// keys are scoped and fingerprinted (see contract.go); contracts
	// holds what it records, one per annotated operation, in order.
	Contract  string
	contracts []opContract
	// ScopePanic is the message NewIdempotentStrictServer panics with
	// when an operation's spec says idem.Options.Scope scopes its keys
	// and it is nil; "" when no operation says so.
	ScopePanic string
	// Warnings are for Result.Warnings.
	Warnings []string
	// ErrorShape is the API's own error shape, from the config; nil
	// answers with problem+json.
	ErrorShape *Errors
	// RequestSchemas is the Go literal of the document the gates check
	// requests against; "" when no operation validates.
	RequestSchemas string
}

// operation is one operation of the spec, as the layer sees it.
type operation struct {
	GoName     string // oapi-codegen's name: CreateOrder
	Name       string // the key namespace: the spec's operationId
	Method     string
	Path       string
	Field      string // the adapter's field for its idem.Operation
	Answer     string // the type of the responses the protocol produces
	Idempotent bool

	KeyOptional bool
	// The limits of an Idempotency-Key parameter the operation declares
	// itself; zero values when it declares none.
	KeyDeclared          bool
	KeyMinLen, KeyMaxLen int
	KeyPattern           string
	TTL, Lease           time.Duration
	MaxBody              int64 // the annotation's max-body; 0 for the handler's option
	// Validate is whether the gate checks requests against the spec
	// (see requestschemas.go).
	Validate bool
	// ScopeHeader is the header parameter that scopes keys, as the spec
	// spells it; "" when there is none.
	ScopeHeader string
	// ScopeDoc describes the scope for the interface's comment; "" when
	// the spec sets none.
	ScopeDoc string
	// Fingerprint is what the operation's fingerprint is made of, and
	// FingerprintCall the call of its writer (see canonical.go).
	Fingerprint     fingerprintSource
	FingerprintCall string
	// Multipart is the request field holding a multipart body, read
	// before the fingerprint; "" when there is none.
	Multipart string
	// Accept are the media types of the operation's request bodies, as the
	// spec spells them and the strict handler tells them apart, and
	// AcceptJSON those of them that are JSON: decoded as they arrive and
	// fingerprinted from the decoded value, with no buffer of the raw body.
	Accept, AcceptJSON []string
	// Route is the operation's path as oapi-codegen registers it on the
	// server kind's router, after the BaseURL: /orders/:id on echo and
	// gin, /orders/{id} on chi and std-http.
	Route string

	// Example is the request the conformance helpers send by default,
	// built from the spec's examples.
	Example kitExample

	// ClientMethods are the client methods IdempotentClient wraps, when
	// the config asks for the client.
	ClientMethods []clientMethod

	// Points are the recovery points of a phased operation, in order;
	// nil for an atomic one.
	Points []recoveryPoint

	// Abandoned is what the completer does with an attempt of a phased
	// operation whose lease has passed and whose client has not come back
	// for CompleteAfter: "complete" resumes it at its recovery point and
	// stores the final response, "fail" stores the attempt-abandoned
	// problem; "" leaves it for a retry and the sweeper.
	Abandoned string
	// CompleteAfter is zero when Abandoned is "".
	CompleteAfter time.Duration

	pos annotation.Position         // the x-idempotent key, for errors
	def codegen.OperationDefinition // oapi-codegen's, for the request schemas

	// What the operation's contract records besides the fields above
	// (see contract.go): whether idem.Options.Scope scopes its keys, the
	// parameters fingerprint.exclude leaves out, as location and name,
	// and its JSON pointers into the body, as written.
	scopeFunction   bool
	excludedParams  [][2]string
	excludePointers []string
}

// recoveryPoint is one recovery point of a phased operation.
type recoveryPoint struct {
	Name  string // as written in the spec: payment_created
	Const string // its constant: CreatePaymentPaymentCreated
	Phase string // the method of the phase after it: CreatePaymentAfterPaymentCreated
}

// routePath is path as oapi-codegen registers it on the router of the
// server kind: its own conversion, so that the two never differ.
func routePath(server, path string) string {
	switch server {
	case "echo":
		return codegen.SwaggerUriToEchoUri(path)
	case "gin":
		return codegen.SwaggerUriToGinUri(path)
	case "chi":
		return codegen.SwaggerUriToChiUri(path)
	}
	return codegen.SwaggerUriToStdHttpUri(path)
}

// Phased reports whether the operation runs in phases.
func (op operation) Phased() bool { return len(op.Points) > 0 }

// The names of a phased operation's declarations; see idempotency.go.tmpl.
func (op operation) PointType() string { return op.GoName + "Point" }
func (op operation) Step() string      { return op.GoName + "Step" }
func (op operation) Next() string      { return op.GoName + "Next" }
func (op operation) Respond() string   { return op.GoName + "Respond" }
func (op operation) Phases() string    { return op.GoName + "Phases" }

// Last is the last recovery point, whose phase responds.
func (op operation) Last() recoveryPoint { return op.Points[len(op.Points)-1] }

func buildModel(cfg *Config, annotated []annotation.Operation, defs []codegen.OperationDefinition, security openapi3.SecurityRequirements) (*model, error) {
	m := &model{Spec: cfg.specFromOutput(), Package: cfg.Output.Package, Client: cfg.Client, Server: cfg.Server, Tests: cfg.Tests, ErrorShape: cfg.Errors}
	byRoute := make(map[string]annotation.Operation, len(annotated))
	for _, a := range annotated {
		byRoute[a.Method+" "+a.Path] = a
	}
	matched := make(map[string]bool, len(annotated))
	var errs []error
	var warnings []warning
	var scopedByGo []string
	for _, d := range defs {
		if d.IsAlias {
			continue
		}
		op := operation{
			GoName: d.OperationId,
			Name:   d.SpecOperationId,
			Method: strings.ToUpper(d.Method),
			Path:   d.Path,
			Route:  routePath(cfg.Server, d.Path),
		}
		if op.Name == "" && d.Spec != nil {
			op.Name = d.Spec.OperationID
		}
		if op.Name == "" {
			op.Name = op.GoName
		}
		a, ok := byRoute[op.Method+" "+op.Path]
		if ok {
			matched[op.Method+" "+op.Path] = true
			if err := annotate(&op, a, d); err != nil {
				errs = append(errs, err)
			}
			if cfg.Tests {
				op.Example = requestExample(d)
			}
			if w := scopeWarning(a, d, security); w != "" {
				warnings = append(warnings, warning{a.Pos, w})
			}
			if a.Scope.Function {
				scopedByGo = append(scopedByGo, op.Name)
			}
			m.Idempotent = true
			m.Phased = m.Phased || op.Phased()
			m.Regexp = m.Regexp || op.KeyPattern != ""
		}
		m.Operations = append(m.Operations, op)
	}
	for _, a := range annotated { // in the spec's order, unlike byRoute
		if matched[a.Method+" "+a.Path] {
			continue
		}
		errs = append(errs, &annotation.Error{Pos: a.Pos, Msg: fmt.Sprintf("x-idempotent on %s %s: oapi-codegen generated no handler for this operation (is it excluded by output-options?)", a.Method, a.Path)})
	}
	errs = append(errs, checkPhaseNames(m.Operations)...)
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if len(scopedByGo) > 0 {
		m.ScopePanic = scopePanic(m.Package, scopedByGo)
	}
	// In the order of the spec's text, like the annotation errors.
	slices.SortStableFunc(warnings, func(a, b warning) int {
		return cmp.Or(cmp.Compare(a.pos.Line, b.pos.Line), cmp.Compare(a.pos.Column, b.pos.Column))
	})
	for _, w := range warnings {
		m.Warnings = append(m.Warnings, w.text)
	}
	return m, nil
}

func annotate(op *operation, a annotation.Operation, d codegen.OperationDefinition) error {
	fail := func(pos annotation.Position, format string, args ...any) error {
		return &annotation.Error{Pos: pos, Msg: fmt.Sprintf("x-idempotent on %s %s: ", op.Method, op.Path) + fmt.Sprintf(format, args...)}
	}
	op.Idempotent = true
	op.pos = a.Pos
	if a.OperationID != "" {
		op.Name = a.OperationID // oapi-codegen may have normalised its copy
	}
	op.Field = lowerFirst(op.GoName) + "Op"
	op.Answer = lowerFirst(op.GoName) + "Answer"
	op.KeyOptional = !a.Required
	op.ClientMethods = clientMethods(d)
	if err := declaredKey(op, a, d); err != nil {
		return err
	}
	op.TTL, op.Lease = a.TTL, a.Lease
	op.MaxBody = a.MaxBody
	op.Validate = a.Validate
	op.def = d
	if a.Scope.Header != "" {
		header, err := scopeHeader(d, a)
		if err != nil {
			return err
		}
		op.ScopeHeader = header
	}
	op.ScopeDoc = scopeDoc(a.Scope, op.ScopeHeader)
	op.scopeFunction = a.Scope.Function
	if a.Mode == annotation.ModePhased {
		for _, p := range a.RecoveryPoints {
			goName := annotation.GoName(p)
			op.Points = append(op.Points, recoveryPoint{Name: p, Const: op.GoName + goName, Phase: op.GoName + "After" + goName})
		}
	}
	if a.Abandoned != "" {
		op.Abandoned = a.Abandoned
		op.CompleteAfter = a.CompleteAfter
	}

	excluded, err := excludedParams(d, a.FingerprintExclude)
	if err != nil {
		return err
	}
	for _, params := range [][]codegen.ParameterDefinition{d.PathParams, d.QueryParams, d.HeaderParams} {
		for i, p := range params {
			if excluded[&params[i]] {
				op.excludedParams = append(op.excludedParams, [2]string{p.In, p.ParamName})
			}
		}
	}
	for _, p := range a.FingerprintExclude {
		if strings.HasPrefix(p.Value, "/") {
			op.excludePointers = append(op.excludePointers, p.Value)
		}
	}
	op.Fingerprint.Path = paramParts(d.PathParams, "request.", excluded)
	op.Fingerprint.Query = paramParts(d.QueryParams, "request.Params.", excluded)
	op.Fingerprint.Header = paramParts(d.HeaderParams, "request.Params.", excluded)

	jsonSchema, body, tags, err := requestBody(d)
	var multipart string // the media type of the multipart body
	for _, b := range d.Bodies {
		op.Accept = append(op.Accept, b.ContentType)
		if b.IsJSON() {
			op.AcceptJSON = append(op.AcceptJSON, b.ContentType)
		}
		if b.NameTag == "Multipart" {
			multipart = b.ContentType
			op.Multipart = "Body"
			if len(d.Bodies) > 1 {
				op.Multipart = "MultipartBody"
			}
		}
	}
	if err != nil {
		return fail(a.Pos, "%v", err)
	}
	if a.Abandoned == annotation.AbandonedComplete && multipart != "" {
		// The completer resumes an attempt with the request stored as
		// JSON when the handler first received it; a multipart body is
		// a stream, read once.
		pos := a.Pos
		if a.AbandonedAt != nil {
			pos = *a.AbandonedAt
		}
		return fail(pos, "abandoned: complete: request body %s is a stream, which the completer cannot store to resume the attempt with; expected abandoned: fail, or a JSON request body", multipart)
	}
	op.Fingerprint.Body = body
	if err := replayable(d); err != nil {
		return fail(a.Pos, "%v", err)
	}
	for _, p := range a.FingerprintExclude {
		if !strings.HasPrefix(p.Value, "/") {
			continue // a parameter, left out by paramParts
		}
		if jsonSchema == nil {
			return fail(p.Pos, "fingerprint.exclude %s: the operation has no JSON request body to exclude from", p.Value)
		}
		if err := checkPointer(jsonSchema, p.Value); err != nil {
			return fail(p.Pos, "fingerprint.exclude %s: %v", p.Value, err)
		}
		if len(tags) == 0 {
			op.Fingerprint.Exclude = append(op.Fingerprint.Exclude, p.Value)
			continue
		}
		// With several media types the fingerprinted body is an
		// idem.Params of the bodies by tag: the pointer applies under each.
		for i, tag := range tags {
			if isForm(d.Bodies[i].ContentType) {
				op.Fingerprint.Exclude = append(op.Fingerprint.Exclude, "/"+tag+"/"+formKey(p.Value))
				continue
			}
			op.Fingerprint.Exclude = append(op.Fingerprint.Exclude, "/"+tag+p.Value)
		}
	}
	return nil
}

// paramParts are the parameters that count in the fingerprint, by their
// names in the spec. The Idempotency-Key header is the key, not part of
// the request, and excluded parameters do not count.
func paramParts(params []codegen.ParameterDefinition, prefix string, excluded map[*codegen.ParameterDefinition]bool) []fingerprintPart {
	var parts []fingerprintPart
	for i, p := range params {
		if excluded[&params[i]] || (p.In == "header" && strings.EqualFold(p.ParamName, "Idempotency-Key")) {
			continue
		}
		parts = append(parts, fingerprintPart{Name: p.ParamName, Expr: prefix + p.GoName()})
	}
	return parts
}

// excludedParams finds the parameters that fingerprint.exclude names (its
// entries that are not JSON pointers). A header's name matches in any
// case, as HTTP compares them; a name the operation does not declare is
// an error that lists the ones it does.
func excludedParams(d codegen.OperationDefinition, exclude []annotation.Pointer) (map[*codegen.ParameterDefinition]bool, error) {
	excluded := make(map[*codegen.ParameterDefinition]bool)
	for _, x := range exclude {
		if strings.HasPrefix(x.Value, "/") {
			continue
		}
		found := false
		var names []string
		for _, params := range [][]codegen.ParameterDefinition{d.PathParams, d.QueryParams, d.HeaderParams} {
			for i, p := range params {
				if p.In == "header" && strings.EqualFold(p.ParamName, "Idempotency-Key") {
					continue
				}
				names = append(names, p.ParamName)
				if p.ParamName == x.Value || (p.In == "header" && strings.EqualFold(p.ParamName, x.Value)) {
					excluded[&params[i]] = true
					found = true
				}
			}
		}
		if found {
			continue
		}
		msg := fmt.Sprintf("x-idempotent on %s %s: fingerprint.exclude %s: the operation has no parameter %q", strings.ToUpper(d.Method), d.Path, x.Value, x.Value)
		if len(names) > 0 {
			slices.Sort(names)
			msg += "; expected one of " + strings.Join(names, ", ") + ", or a JSON pointer into the body starting with /"
		} else {
			msg += "; expected a JSON pointer into the body starting with /"
		}
		return nil, &annotation.Error{Pos: x.Pos, Msg: msg}
	}
	return excluded, nil
}

// requestBody checks that every request body can be fingerprinted and
// returns the JSON body's schema and what the fingerprint holds of the
// body: nothing, one unnamed part, or, when the operation has several
// request media types, the bodies by tag, which tags lists.
func requestBody(d codegen.OperationDefinition) (jsonSchema *openapi3.Schema, body []fingerprintPart, tags []string, err error) {
	if d.Spec == nil || d.Spec.RequestBody == nil || d.Spec.RequestBody.Value == nil {
		return nil, nil, nil, nil
	}
	for _, ct := range sortedKeys(d.Spec.RequestBody.Value.Content) {
		if why := unreplayable(ct); why != "" {
			return nil, nil, nil, fmt.Errorf("request body %s %s; expected a JSON, form-encoded or text body", ct, why)
		}
		if mt := d.Spec.RequestBody.Value.Content[ct]; isJSON(ct) && mt.Schema != nil && jsonSchema == nil {
			jsonSchema = mt.Schema.Value
		}
	}
	for _, b := range d.Bodies {
		// oapi-codegen hands bodies of media types it does not decode
		// (application/xml, text/plain with parameters, ...) to the handler
		// as an io.Reader, which has nothing to fingerprint.
		if b.NameTag == "" {
			return nil, nil, nil, fmt.Errorf("request body %s reaches the handler undecoded, as an io.Reader, and cannot be fingerprinted; expected a JSON, form-encoded or text/plain body", b.ContentType)
		}
	}
	// A multipart body is a stream: the generated code reads it into
	// multipartParts first (see idem.ReadMultipart).
	field := func(b codegen.RequestBodyDefinition, name string) string {
		switch {
		case b.NameTag == "Multipart":
			return multipartBody
		case isForm(b.ContentType):
			// The form the typed body was bound from: it drops unknown
			// fields, and takes the query's too.
			return formBody(name)
		}
		return "request." + name
	}
	switch len(d.Bodies) {
	case 0:
		return jsonSchema, nil, nil, nil
	case 1:
		return jsonSchema, []fingerprintPart{{Expr: field(d.Bodies[0], "Body")}}, nil, nil
	}
	for _, b := range d.Bodies {
		body = append(body, fingerprintPart{Name: b.NameTag, Expr: field(b, b.NameTag+"Body")})
		tags = append(tags, b.NameTag)
	}
	return jsonSchema, body, tags, nil
}

// replayable checks that every declared response can be captured and
// replayed from the store.
func replayable(d codegen.OperationDefinition) error {
	if d.Spec == nil || d.Spec.Responses == nil {
		return nil
	}
	responses := d.Spec.Responses.Map()
	for _, status := range sortedKeys(responses) {
		r := responses[status]
		if r == nil || r.Value == nil {
			continue
		}
		for _, ct := range sortedKeys(r.Value.Content) {
			why := unreplayable(ct)
			if why == "" && strings.HasPrefix(ct, "multipart/") {
				why = "is a multipart stream"
			}
			if s := r.Value.Content[ct].Schema; why == "" && s != nil && s.Value != nil && s.Value.Format == "binary" {
				why = "is a binary download"
			}
			if why != "" {
				return fmt.Errorf("response %s %s %s and cannot be stored for replay; expected JSON, text or other bounded bodies", status, ct, why)
			}
		}
	}
	return nil
}

// unreplayable says why a media type cannot be fingerprinted or replayed,
// or returns "".
func unreplayable(ct string) string {
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		mt = strings.ToLower(ct)
	}
	switch {
	case mt == "text/event-stream":
		return "is a server-sent event stream"
	case mt == "application/x-ndjson", mt == "application/ndjson", mt == "application/jsonl", mt == "application/x-jsonlines", mt == "application/json-seq":
		return "is a stream of JSON values"
	case mt == "application/octet-stream", strings.HasPrefix(mt, "image/"), strings.HasPrefix(mt, "audio/"), strings.HasPrefix(mt, "video/"):
		return "is binary"
	case strings.Contains(mt, "*"):
		return "is a wildcard type whose bytes could be anything"
	}
	return ""
}

func isForm(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == "application/x-www-form-urlencoded"
}

// formKey is the form field a JSON pointer into the body names, as
// deepObject style spells nested members: /metadata/trace_id is
// metadata[trace_id], escaped as a pointer token.
func formKey(pointer string) string {
	tokens := strings.Split(pointer[1:], "/")
	for i, t := range tokens {
		t = strings.NewReplacer("~1", "/", "~0", "~").Replace(t)
		if i > 0 {
			t = "[" + t + "]"
		}
		tokens[i] = t
	}
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(strings.Join(tokens, ""))
}

func isJSON(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return false
	}
	return mt == "application/json" || strings.HasSuffix(mt, "+json")
}

// checkPointer checks that a JSON pointer names something the schema can
// hold.
func checkPointer(s *openapi3.Schema, pointer string) error {
	if pointer == "" || pointer[0] != '/' {
		return errors.New("a JSON pointer starts with /")
	}
	at := ""
	for _, tok := range strings.Split(pointer[1:], "/") {
		tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
		next, known, open := step(s, tok)
		if open {
			return nil // free-form below this point: anything may be there
		}
		if next == nil {
			if len(known) == 0 {
				return fmt.Errorf("the request body schema has nothing under %q", or(at, "/"))
			}
			return fmt.Errorf("the request body schema has no %q under %q; expected one of %s", tok, or(at, "/"), strings.Join(known, ", "))
		}
		s = next
		at += "/" + tok
	}
	return nil
}

// step descends one pointer token into s, looking through allOf, oneOf
// and anyOf. open is true when s accepts members it does not list.
func step(s *openapi3.Schema, tok string) (next *openapi3.Schema, known []string, open bool) {
	for _, c := range flatten(s, nil) {
		if p, ok := c.Properties[tok]; ok && p.Value != nil {
			return p.Value, nil, false
		}
		known = append(known, sortedKeys(c.Properties)...)
	}
	for _, c := range flatten(s, nil) {
		if c.Items != nil && c.Items.Value != nil {
			if _, err := strconv.Atoi(tok); err == nil {
				return c.Items.Value, nil, false
			}
		}
		if ap := c.AdditionalProperties; ap.Schema != nil && ap.Schema.Value != nil {
			return ap.Schema.Value, nil, false
		}
		if ap := c.AdditionalProperties; ap.Has != nil && *ap.Has {
			return nil, nil, true
		}
		if c.Type == nil && len(c.Properties) == 0 && c.Items == nil && len(c.AllOf)+len(c.OneOf)+len(c.AnyOf) == 0 {
			return nil, nil, true
		}
	}
	slices.Sort(known)
	return nil, slices.Compact(known), false
}

func flatten(s *openapi3.Schema, out []*openapi3.Schema) []*openapi3.Schema {
	if s == nil {
		return out
	}
	out = append(out, s)
	for _, refs := range []openapi3.SchemaRefs{s.AllOf, s.OneOf, s.AnyOf} {
		for _, r := range refs {
			if r != nil {
				out = flatten(r.Value, out)
			}
		}
	}
	return out
}

// durationExpr is d as a Go expression: 24 * time.Hour. Templates call
// it goDuration.
func durationExpr(d time.Duration) string {
	for _, u := range []struct {
		unit time.Duration
		name string
	}{{time.Hour, "time.Hour"}, {time.Minute, "time.Minute"}, {time.Second, "time.Second"}, {time.Millisecond, "time.Millisecond"}} {
		if d%u.unit == 0 {
			if d == u.unit {
				return u.name
			}
			return fmt.Sprintf("%d * %s", d/u.unit, u.name)
		}
	}
	return fmt.Sprintf("time.Duration(%d)", d)
}

// durationText is d as the docs and annotations write it: 24h, 7d.
func durationText(d time.Duration) string {
	const day = 24 * time.Hour
	if d >= 2*day && d%day == 0 {
		return fmt.Sprintf("%dd", d/day)
	}
	// Drop time.Duration's zero tails: 24h0m0s is 24h, 1h30m0s is 1h30m.
	// A bare "0s" suffix is not one of them: 10s and 20m0s keep their 0.
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

func lowerFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToLower(s[:1]) + s[1:]
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
