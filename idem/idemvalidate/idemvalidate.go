// Package idemvalidate checks requests against the parameters and bodies
// their OpenAPI operations declare, with kin-openapi's openapi3filter (the
// validator oapi-codegen's request-validation middlewares use), before
// the Idempotency-Key protocol claims a key. A request that breaks its
// schema is a client's mistake: it is answered 400 in the API's error
// shape, naming what failed and where, and its key stays unused.
//
// The generated layer links this package for the operations it checks,
// from a document the generator writes: the annotated operations'
// parameters and bodies, and the schemas they refer to.
package idemvalidate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/idemgen/idemgen/idem"
)

// Validator checks requests against the operations of one document.
type Validator struct {
	routes map[string]*route // by operationId
}

// route is one operation, as openapi3filter takes it.
type route struct {
	routers.Route
	params   []*openapi3.Parameter // the path item's and the operation's, the operation's winning
	segments []string              // the path template's, for reading path parameters
	options  openapi3filter.Options
}

// New loads the document doc, in JSON or YAML, and indexes its operations
// by operationId.
func New(doc []byte) (*Validator, error) {
	spec, err := openapi3.NewLoader().LoadFromData(doc)
	if err != nil {
		return nil, fmt.Errorf("idemvalidate: load the request schemas: %w", err)
	}
	v := &Validator{routes: map[string]*route{}}
	for path, item := range spec.Paths.Map() {
		for method, op := range item.Operations() {
			if op.OperationID == "" {
				return nil, fmt.Errorf("idemvalidate: %s %s has no operationId", method, path)
			}
			v.routes[op.OperationID] = newRoute(spec, path, item, method, op)
		}
	}
	return v, nil
}

func newRoute(spec *openapi3.T, path string, item *openapi3.PathItem, method string, op *openapi3.Operation) *route {
	r := &route{
		Route:    routers.Route{Spec: spec, Path: path, PathItem: item, Method: method, Operation: op},
		segments: strings.Split(strings.Trim(path, "/"), "/"),
		// A check must not change the request: defaults are the handler's
		// business, and the fingerprint is of what the client sent.
		options: openapi3filter.Options{SkipSettingDefaults: true},
	}
	for _, p := range item.Parameters {
		if op.Parameters.GetByInAndName(p.Value.In, p.Value.Name) == nil {
			r.params = append(r.params, p.Value)
		}
	}
	for _, p := range op.Parameters {
		r.params = append(r.params, p.Value)
	}
	return r
}

// Operation returns the check of the operation with the given
// operationId, for idem.Gate's Validate; nil when the document does not
// have it (an operation annotated validate: false).
func (v *Validator) Operation(operationID string) func(r *http.Request, body []byte) *idem.Problem {
	rt, ok := v.routes[operationID]
	if !ok {
		return nil
	}
	return rt.check
}

// check validates r's parameters and body, which the gate has read whole.
// Path parameters are read from the end of r's path, which the route's
// template matches whatever prefix the API is mounted under; a template
// segment that mixes a parameter with text is left to the router's binder.
func (rt *route) check(r *http.Request, body []byte) *idem.Problem {
	ctx := r.Context()
	in := &openapi3filter.RequestValidationInput{
		Request:    r,
		PathParams: rt.pathParams(r),
		Route:      &rt.Route,
		Options:    &rt.options,
	}
	for _, p := range rt.params {
		if p.In == openapi3.ParameterInPath {
			if _, ok := in.PathParams[p.Name]; !ok {
				continue
			}
		}
		if err := openapi3filter.ValidateParameter(ctx, in, p); err != nil {
			return problem(err)
		}
	}
	if rb := rt.Operation.RequestBody; rb != nil && rb.Value != nil {
		if err := rt.checkBody(ctx, in, rb.Value, body); err != nil {
			return problem(err)
		}
	}
	return nil
}

// checkBody validates body against requestBody, on a copy of the request
// whose body the validator may read. An empty form is a form with no
// fields, as the binder takes it, not a missing body.
func (rt *route) checkBody(ctx context.Context, in *openapi3filter.RequestValidationInput, requestBody *openapi3.RequestBody, body []byte) error {
	if len(body) == 0 {
		if mt := emptyForm(in.Request, requestBody.Content); mt != nil {
			return rt.visit(in, requestBody, mt, map[string]any{})
		}
	}
	if mt := jsonContent(in.Request, requestBody.Content); mt != nil && len(body) > 0 {
		// Decoded in place: openapi3filter would read the body whole
		// again and copy it into its decoder's buffer, several times a
		// large body's size at once. A body that is not exactly one JSON
		// value goes its way, which reads the first value and leaves what
		// follows to the gate's clearer refusal of trailing data.
		var v any
		if json.Unmarshal(body, &v) == nil {
			return rt.visit(in, requestBody, mt, v)
		}
	}
	// A shallow copy: the validator sets the body of the request it is
	// given, and only reads the rest.
	r := new(http.Request)
	*r = *in.Request
	r.Body, r.GetBody, r.ContentLength = http.NoBody, nil, int64(len(body))
	if len(body) > 0 {
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	bodyIn := *in
	bodyIn.Request = r
	return openapi3filter.ValidateRequestBody(ctx, &bodyIn, requestBody)
}

// visit checks a decoded body against mt's schema, as openapi3filter
// does: as a request (readOnly members refused), in the document's
// dialect.
func (rt *route) visit(in *openapi3filter.RequestValidationInput, requestBody *openapi3.RequestBody, mt *openapi3.MediaType, v any) error {
	if mt.Schema == nil || mt.Schema.Value == nil {
		return nil
	}
	opts := []openapi3.SchemaValidationOption{openapi3.VisitAsRequest()}
	if rt.Spec.IsOpenAPI31OrLater() {
		opts = append(opts, openapi3.EnableJSONSchema2020())
	}
	if err := mt.Schema.Value.VisitJSON(v, opts...); err != nil {
		return &openapi3filter.RequestError{Input: in, RequestBody: requestBody, Reason: "doesn't match schema", Err: err}
	}
	return nil
}

// jsonContent returns the JSON media type of content the request's
// Content-Type names; nil when it is not JSON.
func jsonContent(r *http.Request, content openapi3.Content) *openapi3.MediaType {
	ct := r.Header.Get("Content-Type")
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
		return nil
	}
	return content.Get(ct)
}

// pathParams reads the path parameters of whole segments from the end of
// r's path; none when the path is shorter than the template or a literal
// segment differs (a router that cleaned the path, say).
func (rt *route) pathParams(r *http.Request) map[string]string {
	path := strings.Split(strings.Trim(r.URL.EscapedPath(), "/"), "/")
	if len(path) < len(rt.segments) {
		return nil
	}
	path = path[len(path)-len(rt.segments):]
	var params map[string]string
	for i, seg := range rt.segments {
		name, isParam := strings.CutPrefix(seg, "{")
		name, closed := strings.CutSuffix(name, "}")
		switch {
		case isParam && closed && !strings.ContainsAny(name, "{}"):
			if params == nil {
				params = map[string]string{}
			}
			// openapi3filter decodes the value by the parameter's style;
			// it takes it as the router would, unescaped.
			value, err := url.PathUnescape(path[i])
			if err != nil {
				value = path[i]
			}
			params[name] = value
		case strings.Contains(seg, "{"):
			// A parameter within text: the binder reads it.
		case seg != path[i]:
			return nil
		}
	}
	return params
}

// problem is the answer to a request that breaks its schema.
func problem(err error) *idem.Problem {
	return &idem.Problem{
		Type:   idem.TypeInvalidRequest,
		Title:  "Invalid request",
		Status: http.StatusBadRequest,
		Detail: describe(err) + ". Correct the request and send it again; it was not run, and its Idempotency-Key was not used.",
	}
}

// describe says what failed and where: the parameter, or the JSON pointer
// into the body, and the schema's reason. The value is never repeated: it
// may be long, or secret.
func describe(err error) string {
	var reqErr *openapi3filter.RequestError
	if !errors.As(err, &reqErr) {
		return "The request does not match the operation's schema: " + err.Error()
	}
	reason := reqErr.Reason
	var schemaErr *openapi3.SchemaError
	if errors.As(err, &schemaErr) {
		reason = schemaErr.Reason
		if reason == "" {
			reason = fmt.Sprintf("it does not match the schema's %q", schemaErr.SchemaField)
		}
	} else if reqErr.Err != nil {
		reason = reqErr.Err.Error()
	}
	switch {
	case reqErr.Parameter != nil:
		return fmt.Sprintf("The %s parameter %q is invalid: %s", reqErr.Parameter.In, reqErr.Parameter.Name, reason)
	case schemaErr != nil && len(schemaErr.JSONPointer()) > 0:
		return fmt.Sprintf("The request body is invalid at %s: %s", pointer(schemaErr.JSONPointer()), reason)
	default:
		return "The request body is invalid: " + reason
	}
}

// pointer is the RFC 6901 JSON pointer of path.
func pointer(path []string) string {
	var b strings.Builder
	escape := strings.NewReplacer("~", "~0", "/", "~1")
	for _, p := range path {
		b.WriteByte('/')
		b.WriteString(escape.Replace(p))
	}
	return b.String()
}

// emptyForm returns the form media type an empty body is sent as: the
// request's Content-Type, or with none the body's form type; nil when the
// body is not a form.
func emptyForm(r *http.Request, content openapi3.Content) *openapi3.MediaType {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err == nil && isForm(mt) {
			return content.Get(ct)
		}
		return nil
	}
	for name, mt := range content {
		if isForm(name) {
			return mt
		}
	}
	return nil
}

func isForm(mediaType string) bool {
	return mediaType == "application/x-www-form-urlencoded" || mediaType == "multipart/form-data"
}
