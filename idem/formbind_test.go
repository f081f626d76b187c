package idem_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/idem"
)

// The types below are declared as oapi-codegen declares a form body with
// unions: each union holds its JSON in an unexported field named union,
// with a From method per alternative, and an enum's type has Valid.

type metadata struct{ union json.RawMessage }

type metadata0 map[string]string

type metadata1 string

func (e metadata1) Valid() bool { return e == "" }

func (t *metadata) FromMetadata0(v metadata0) error { return t.from(v) }
func (t *metadata) FromMetadata1(v metadata1) error { return t.from(v) }
func (t *metadata) from(v any) (err error) {
	t.union, err = json.Marshal(v)
	return err
}
func (t metadata) MarshalJSON() ([]byte, error)     { return t.union.MarshalJSON() }
func (t *metadata) UnmarshalJSON(data []byte) error { return t.union.UnmarshalJSON(data) }

// delay is an enum value or an integer, in that order.
type delay struct{ union json.RawMessage }

type delay0 string

func (e delay0) Valid() bool { return e == "minimum" }

type delay1 = int

func (t *delay) FromDelay0(v delay0) error {
	var err error
	t.union, err = json.Marshal(v)
	return err
}
func (t *delay) FromDelay1(v delay1) error {
	var err error
	t.union, err = json.Marshal(v)
	return err
}
func (t delay) MarshalJSON() ([]byte, error)     { return t.union.MarshalJSON() }
func (t *delay) UnmarshalJSON(data []byte) error { return t.union.UnmarshalJSON(data) }

// lines is an array of objects, each with a union, or the empty string.
type lines struct{ union json.RawMessage }

type lines0 = []struct {
	Price    string    `json:"price"`
	Metadata *metadata `json:"metadata,omitempty"`
}

type lines1 string

func (e lines1) Valid() bool { return e == "" }

func (t *lines) FromLines0(v lines0) error {
	var err error
	t.union, err = json.Marshal(v)
	return err
}
func (t *lines) FromLines1(v lines1) error {
	var err error
	t.union, err = json.Marshal(v)
	return err
}
func (t lines) MarshalJSON() ([]byte, error)     { return t.union.MarshalJSON() }
func (t *lines) UnmarshalJSON(data []byte) error { return t.union.UnmarshalJSON(data) }

type formBody struct {
	Name     *string   `form:"name,omitempty" json:"name,omitempty"`
	Expand   *[]string `form:"expand,omitempty" json:"expand,omitempty"`
	Metadata *metadata `form:"metadata,omitempty" json:"metadata,omitempty"`
	Delay    *delay    `form:"delay,omitempty" json:"delay,omitempty"`
	Lines    *lines    `form:"lines,omitempty" json:"lines,omitempty"`
	Shipping *struct {
		Name     *string   `json:"name,omitempty"`
		Metadata *metadata `json:"metadata,omitempty"`
	} `form:"shipping,omitempty" json:"shipping,omitempty"`
	Items *[]struct {
		Price    *string   `json:"price,omitempty"`
		Metadata *metadata `json:"metadata,omitempty"`
	} `form:"items,omitempty" json:"items,omitempty"`
	ByTag map[string]metadata `form:"by_tag,omitempty" json:"by_tag,omitempty"`
}

// TestBindFormUnions binds forms into a body as oapi-codegen's binder
// leaves it (unions unset) and compares the body's JSON, or the problem.
func TestBindFormUnions(t *testing.T) {
	tests := []struct {
		name, form string
		want       string // the body's JSON after binding
		field      string // the field a 400 names instead
	}{
		{name: "no union in the form", form: "name=jo", want: `{}`},
		{name: "object", form: "metadata[a]=1&metadata[b]=", want: `{"metadata":{"a":"1","b":""}}`},
		{name: "empty string", form: "metadata=", want: `{"metadata":""}`},
		{name: "enum before integer", form: "delay=minimum", want: `{"delay":"minimum"}`},
		{name: "integer", form: "delay=7", want: `{"delay":7}`},
		{name: "array of objects", form: "lines[1][price]=p2&lines[0][price]=p1&lines[0][metadata][k]=v", want: `{"lines":[{"price":"p1","metadata":{"k":"v"}},{"price":"p2"}]}`},
		{name: "array cleared", form: "lines=", want: `{"lines":""}`},
		{name: "in an object", form: "shipping[metadata][k]=v", want: `{"shipping":{"metadata":{"k":"v"}}}`},
		{name: "in array items", form: "items[0][metadata][k]=v&items[1][metadata]=", want: `{"items":[{"metadata":{"k":"v"}},{"metadata":""}]}`},
		{name: "map values", form: "by_tag[x][k]=v&by_tag[y]=", want: `{"by_tag":{"x":{"k":"v"},"y":""}}`},
		{name: "no alternative takes the value", form: "metadata=x", field: "metadata"},
		{name: "neither the enum nor an integer", form: "delay=soon", field: "delay"},
		{name: "a value and nested fields", form: "metadata=&metadata[a]=1", field: "metadata"},
		{name: "nested, no alternative", form: "shipping[metadata]=x", field: "shipping[metadata]"},
		{name: "not array items", form: "lines[a][price]=p", field: "lines"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			form, err := url.ParseQuery(tt.form)
			if err != nil {
				t.Fatal(err)
			}
			r := &http.Request{Form: form}
			var body formBody
			if body.Items == nil && strings.Contains(tt.form, "items[") {
				// oapi-codegen's binder makes the items, leaving their
				// unions unset.
				body.Items = &[]struct {
					Price    *string   `json:"price,omitempty"`
					Metadata *metadata `json:"metadata,omitempty"`
				}{{}, {}}
			}
			err = idem.BindFormUnions(idem.WithRequest(context.Background(), r), &body)
			if tt.field != "" {
				var p *idem.Problem
				if !errors.As(err, &p) || p.Status != 400 || p.Type != idem.TypeInvalidRequest || !strings.Contains(p.Detail, "The form field "+tt.field+" could not be read: ") {
					t.Fatalf("BindFormUnions: %v; want a 400 naming %s", err, tt.field)
				}
				return
			}
			if err != nil {
				t.Fatalf("BindFormUnions: %v", err)
			}
			body.Name = nil // bound by oapi-codegen's binder, not here
			got, err := json.Marshal(body)
			if err != nil {
				t.Fatal(err)
			}
			if !jsonEqual(t, got, []byte(tt.want)) {
				t.Fatalf("bound %s, want %s", got, tt.want)
			}
		})
	}
}

func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	ca, err := idem.Canonical(a)
	if err != nil {
		t.Fatalf("%s: %v", a, err)
	}
	cb, err := idem.Canonical(b)
	if err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return string(ca) == string(cb)
}

// A body without unions, no request, or no form: nothing to do.
func TestBindFormUnionsNothing(t *testing.T) {
	var plain struct {
		Name *string `json:"name"`
	}
	r := &http.Request{Form: url.Values{"name": {"jo"}}}
	if err := idem.BindFormUnions(idem.WithRequest(context.Background(), r), &plain); err != nil || plain.Name != nil {
		t.Fatalf("a body without unions: %v %v", err, plain.Name)
	}
	var body formBody
	if err := idem.BindFormUnions(context.Background(), &body); err != nil || body.Metadata != nil {
		t.Fatalf("no request: %v", err)
	}
	if err := idem.BindFormUnions(idem.WithRequest(context.Background(), r), (*formBody)(nil)); err != nil {
		t.Fatalf("a nil body: %v", err)
	}
}

// FormHasUnions tells the bodies BindFormUnions has work on from the
// rest, from their type alone.
func TestFormHasUnions(t *testing.T) {
	type plain struct {
		Name *string `json:"name"`
		Tags []string
	}
	if !idem.FormHasUnions((*formBody)(nil)) {
		t.Error("a body with union fields: false")
	}
	if idem.FormHasUnions((*plain)(nil)) || idem.FormHasUnions(nil) || idem.FormHasUnions(plain{}) {
		t.Error("a body without union fields, nil or not a pointer: true")
	}
}

// TestJSONValue holds any JSON value and encodes as it, also through a
// type declared from it, as a response type is.
func TestJSONValue(t *testing.T) {
	type response idem.JSONValue
	for _, v := range []any{map[string]any{"a": []any{1.5, "x"}}, "s", nil, 3} {
		got, err := json.Marshal(response(idem.JSONOf(v)))
		if err != nil {
			t.Fatal(err)
		}
		want, _ := json.Marshal(v)
		if string(got) != string(want) {
			t.Errorf("%v encodes as %s, want %s", v, got, want)
		}
	}
	var back response
	if err := json.Unmarshal([]byte(`{"n":12345678901234567890}`), &back); err != nil {
		t.Fatal(err)
	}
	n := back.Value().(map[string]any)["n"].(json.Number)
	if n.String() != "12345678901234567890" {
		t.Errorf("decoded %v, want the number as written", n)
	}
}
