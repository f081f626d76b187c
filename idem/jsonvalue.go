package idem

import (
	"bytes"
	"encoding/json"
)

// JSONValue is a JSON value of any shape. idemgen makes it the Go type of
// a JSON response body whose schema says nothing of its shape (no schema,
// or one without a type): oapi-codegen would make that interface{}, on
// which the strict server's methods cannot be declared. The response type
// is then declared from it (type GetThing200JSONResponse idem.JSONValue),
// and a handler returns GetThing200JSONResponse(idem.JSONOf(v)).
//
// Its methods come with an embedded field, so that the types declared
// from it keep them: a response is encoded as the value it holds, not as
// a struct.
type JSONValue struct{ jsonValue }

type jsonValue struct{ v any }

// JSONOf returns a JSONValue holding v, which encoding/json encodes as the
// body.
func JSONOf(v any) JSONValue { return JSONValue{jsonValue{v}} }

// Value returns the value held: what JSONOf was given, or what
// UnmarshalJSON decoded (numbers as json.Number, so that none loses
// precision).
func (j jsonValue) Value() any { return j.v }

// MarshalJSON encodes the value held; nil is null.
func (j jsonValue) MarshalJSON() ([]byte, error) { return json.Marshal(j.v) }

// UnmarshalJSON decodes any JSON value.
func (j *jsonValue) UnmarshalJSON(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return err
	}
	j.v = v
	return nil
}
