package generator

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/idemgen/idemgen/generator/annotation"
	"github.com/idemgen/idemgen/idem"
	"github.com/oapi-codegen/oapi-codegen/v2/pkg/codegen"
)

// kitExample is an annotated operation's request built from the spec's
// examples, for the generated conformance helpers; Missing says what the
// spec lacks when it cannot be built.
type kitExample struct {
	Path        string            // the path with its parameters filled in
	Headers     map[string]string // required header parameters
	ContentType string            // the body's media type, "" when none
	Body        string            // the JSON or form body, "" when none
	Missing     string            // why there is no example; "" when there is
	headers     []string          // Headers' names, sorted
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
// and each required parameter's example but those of key, the places
// the key is read from, where the checks put keys of their own.
func requestExample(d codegen.OperationDefinition, key []keySource) kitExample {
	ex := kitExample{Path: d.Path, Headers: map[string]string{}}
	keyed := func(in, name string) bool {
		return slices.ContainsFunc(key, func(k keySource) bool {
			return k.In == in && (k.Name == name || in == annotation.KeyInHeader && strings.EqualFold(k.Name, name))
		})
	}
	for _, p := range d.PathParams {
		v, ok := paramExample(p)
		if !ok {
			return kitExample{Missing: fmt.Sprintf("path parameter %s has no example", p.ParamName)}
		}
		ex.Path = strings.ReplaceAll(ex.Path, "{"+p.ParamName+"}", v)
	}
	for _, p := range d.HeaderParams {
		if !p.Required || strings.EqualFold(p.ParamName, idem.HeaderKey) || keyed(annotation.KeyInHeader, p.ParamName) {
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
		if p.Required && !keyed(annotation.KeyInQuery, p.ParamName) {
			return kitExample{Missing: fmt.Sprintf("query parameter %s is required; supply the request", p.ParamName)}
		}
	}
	if d.Spec == nil || d.Spec.RequestBody == nil || d.Spec.RequestBody.Value == nil {
		return ex
	}
	var missing string
	ex.ContentType, ex.Body, missing = bodyExample(d.Spec.RequestBody.Value.Content)
	if missing != "" {
		return kitExample{Missing: missing}
	}
	return ex
}

// bodyExample is the example body of a JSON or, failing that, a form
// media type, with its media type; missing says why there is none.
func bodyExample(content openapi3.Content) (contentType, body, missing string) {
	if mt := content.Get("application/json"); mt != nil {
		value, ok := mediaExample(mt)
		if !ok {
			return "", "", "the JSON request body has no example"
		}
		b, err := json.Marshal(value)
		if err != nil {
			return "", "", fmt.Sprintf("the body's example does not encode: %v", err)
		}
		return "application/json", string(b), ""
	}
	if mt := content.Get(formMediaType); mt != nil {
		value, ok := mediaExample(mt)
		if !ok {
			return "", "", "the form request body has no example"
		}
		body, err := formExample(value)
		if err != nil {
			return "", "", err.Error()
		}
		return formMediaType, body, ""
	}
	return "", "", "the request body is neither JSON nor a URL-encoded form; supply the request"
}

const formMediaType = "application/x-www-form-urlencoded"

// formExample encodes a form body's example, an object whose members are
// scalars or arrays of them (a field repeated).
func formExample(v any) (string, error) {
	obj, ok := v.(map[string]any)
	if !ok {
		return "", errors.New("the form request body's example is not an object; supply the request")
	}
	values := url.Values{}
	for name, v := range obj {
		items, isArray := v.([]any)
		if !isArray {
			items = []any{v}
		}
		for _, item := range items {
			text, ok := formValue(item)
			if !ok {
				return "", fmt.Errorf("the form request body's example has a nested value in %s, which the helpers cannot encode; supply the request", name)
			}
			values.Add(name, text)
		}
	}
	return values.Encode(), nil
}

// formValue is a scalar example value as form text.
func formValue(v any) (string, bool) {
	switch v := v.(type) {
	case string:
		return v, true
	case bool:
		return strconv.FormatBool(v), true
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64), true
	case int, int64, uint64, json.Number:
		return fmt.Sprint(v), true
	}
	return "", false
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
