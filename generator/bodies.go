package generator

import (
	"fmt"
	"mime"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/oapi-codegen/oapi-codegen/v2/pkg/codegen"
)

// Which request and response bodies the protocol can fingerprint and
// replay from the store.

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

func isJSON(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return false
	}
	return mt == "application/json" || strings.HasSuffix(mt, "+json")
}
