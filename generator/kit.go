package generator

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/oapi-codegen/oapi-codegen/v2/pkg/codegen"
)

// kitExample is an annotated operation's request built from the spec's
// examples, for the generated conformance helpers; Missing says what the
// spec lacks when it cannot be built.
type kitExample struct {
	Path    string            // the path with its parameters filled in
	Headers map[string]string // required header parameters
	Body    string            // the JSON body, "" when none
	Missing string            // why there is no example; "" when there is
	headers []string          // Headers' names, sorted
}

// BodyLiteral is Body as a Go string literal, raw where it can be.
func (e kitExample) BodyLiteral() string {
	if strings.ContainsAny(e.Body, "`\r") {
		return strconv.Quote(e.Body)
	}
	return "`" + e.Body + "`"
}

// HeaderNames are the example's header names in order, for a
// deterministic template.
func (e kitExample) HeaderNames() []string { return e.headers }

// requestExample builds the operation's example request from the spec:
// the media type's example (or first named example, or the schema's),
// and each required parameter's example.
func requestExample(d codegen.OperationDefinition) kitExample {
	ex := kitExample{Path: d.Path, Headers: map[string]string{}}
	for _, p := range d.PathParams {
		v, ok := paramExample(p)
		if !ok {
			return kitExample{Missing: fmt.Sprintf("path parameter %s has no example", p.ParamName)}
		}
		ex.Path = strings.ReplaceAll(ex.Path, "{"+p.ParamName+"}", v)
	}
	for _, p := range d.HeaderParams {
		if !p.Required || strings.EqualFold(p.ParamName, "Idempotency-Key") {
			continue
		}
		v, ok := paramExample(p)
		if !ok {
			return kitExample{Missing: fmt.Sprintf("header parameter %s has no example", p.ParamName)}
		}
		ex.Headers[p.ParamName] = v
		ex.headers = append(ex.headers, p.ParamName)
	}
	slices.Sort(ex.headers)
	for _, p := range d.QueryParams {
		if p.Required {
			return kitExample{Missing: fmt.Sprintf("query parameter %s is required; supply the request", p.ParamName)}
		}
	}
	if d.Spec == nil || d.Spec.RequestBody == nil || d.Spec.RequestBody.Value == nil {
		return ex
	}
	mt := d.Spec.RequestBody.Value.Content.Get("application/json")
	if mt == nil {
		return kitExample{Missing: "the request body is not JSON; supply the request"}
	}
	value, ok := mediaExample(mt)
	if !ok {
		return kitExample{Missing: "the JSON request body has no example"}
	}
	b, err := json.Marshal(value)
	if err != nil {
		return kitExample{Missing: fmt.Sprintf("the body's example does not encode: %v", err)}
	}
	ex.Body = string(b)
	return ex
}

func mediaExample(mt *openapi3.MediaType) (any, bool) {
	if mt.Example != nil {
		return mt.Example, true
	}
	names := make([]string, 0, len(mt.Examples))
	for name, e := range mt.Examples {
		if e != nil && e.Value != nil && e.Value.Value != nil {
			names = append(names, name)
		}
	}
	if len(names) > 0 {
		slices.Sort(names)
		return mt.Examples[names[0]].Value.Value, true
	}
	if mt.Schema != nil && mt.Schema.Value != nil && mt.Schema.Value.Example != nil {
		return mt.Schema.Value.Example, true
	}
	return nil, false
}

func paramExample(p codegen.ParameterDefinition) (string, bool) {
	var v any
	switch {
	case p.Spec == nil:
		return "", false
	case p.Spec.Example != nil:
		v = p.Spec.Example
	case p.Spec.Schema != nil && p.Spec.Schema.Value != nil && p.Spec.Schema.Value.Example != nil:
		v = p.Spec.Schema.Value.Example
	default:
		return "", false
	}
	if s, ok := v.(string); ok {
		return s, true
	}
	b, err := json.Marshal(v)
	return string(b), err == nil
}

// kitPackage is where the conformance helpers go: a package beside the
// generated one, named after it.
func kitPackage(cfg *Config) (dir, name string) {
	name = cfg.Output.Package + "test"
	return filepath.Join(cfg.Output.Dir, name), name
}
