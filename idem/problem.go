package idem

import (
	"bytes"
	"encoding/json"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ProblemBase is the prefix of every problem type URI; the fragment names a
// section of docs/problems.md, which documents each type.
const ProblemBase = "https://github.com/idemgen/idemgen/blob/main/docs/problems.md#"

// Problem types answered by the runtime. They are stable: clients may
// switch on them.
const (
	TypeMissingKey           = ProblemBase + "missing-idempotency-key"
	TypeInvalidKey           = ProblemBase + "invalid-idempotency-key"
	TypeInvalidRequest       = ProblemBase + "invalid-request"
	TypeBodyTooLarge         = ProblemBase + "body-too-large"
	TypeUnsupportedMediaType = ProblemBase + "unsupported-media-type"
	TypeInvalidScope         = ProblemBase + "invalid-scope"
	TypeKeyInUse             = ProblemBase + "idempotency-key-in-use"
	TypeKeyReused            = ProblemBase + "idempotency-key-reused"
	TypeStoreUnavailable     = ProblemBase + "store-unavailable"
	TypeInternal             = ProblemBase + "internal-error"
	TypeAttemptAbandoned     = ProblemBase + "attempt-abandoned"
	TypeStoreMisconfigured   = ProblemBase + "store-misconfigured"
	TypeAsyncNotFound        = ProblemBase + "async-request-not-found"
	TypeAsyncFailed          = ProblemBase + "async-request-failed"
)

// ContentTypeProblem is the media type of RFC 9457 problem details.
const ContentTypeProblem = "application/problem+json"

// Problem is an RFC 9457 problem detail. A Scope function may return one
// to choose the answer to a request it rejects.
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
	// RetryAfter, when positive, is sent as the Retry-After header.
	RetryAfter time.Duration `json:"-"`
}

func (p *Problem) Error() string { return p.Title + ": " + p.Detail }

// Code is the problem's short name: the fragment of a type under
// ProblemBase, such as "idempotency-key-in-use", else the type itself.
func (p *Problem) Code() string {
	if code, ok := strings.CutPrefix(p.Type, ProblemBase); ok {
		return code
	}
	return p.Type
}

// Retryable reports whether sending the same request again with the same
// Idempotency-Key is right: yes when it may get another answer (409 while
// the first attempt runs, 503, an attempt undone by a failure), no for a
// mistake in the request (400, 413, 415, 422) or an answer a retry only
// repeats (an abandoned attempt, a misconfigured store). A problem of
// another type is judged by its status, as HTTP clients do.
func (p *Problem) Retryable() bool {
	switch p.Type {
	case TypeStoreMisconfigured, TypeAttemptAbandoned, TypeAsyncFailed:
		return false
	}
	switch {
	case p.Status == http.StatusConflict, p.Status == http.StatusTooManyRequests, p.Status == StatusClientClosed:
		return true
	case p.Status >= 500:
		return true
	}
	return false
}

// Response renders the problem as a response.
func (p *Problem) Response() *Response {
	body, err := json.Marshal(p)
	if err != nil {
		// A Problem holds only strings and an int: this cannot fail.
		panic(err)
	}
	h := http.Header{"Content-Type": {ContentTypeProblem}}
	if p.RetryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(retryAfterSeconds(p.RetryAfter)))
	}
	return &Response{Status: p.Status, Header: h, Body: body}
}

func retryAfterSeconds(d time.Duration) int {
	s := int((d + time.Second - 1) / time.Second)
	return max(s, 1)
}

// WriteProblem writes p to w as problem+json.
func WriteProblem(w http.ResponseWriter, p *Problem) {
	_ = p.Response().Write(w)
}

// A ProblemShape renders the answers the layer gives itself (400s about
// the key, scope or request, 409, 413, 415, 422, 500, 503) in an API's
// own error shape. Nil, in Options and elsewhere, is RFC 9457
// problem+json, as Problem.Response renders it.
type ProblemShape interface {
	Render(p *Problem) *Response
}

// Render renders p in shape, or as problem+json when shape is nil.
func Render(shape ProblemShape, p *Problem) *Response {
	var resp *Response
	if shape == nil {
		resp = p.Response()
	} else {
		resp = shape.Render(p)
	}
	if resp != nil {
		resp.outcome = outcomeOfProblem(p.Type)
	}
	return resp
}

// ErrorShape is a ProblemShape for an API whose errors are a JSON object,
// possibly inside an envelope, such as Stripe's
//
//	{"error": {"type": "idempotency_error", "code": "idempotency-key-reused", "message": "..."}}
//
// which is ErrorShape{Envelope: "error", Code: "code", Detail: "message",
// Fixed: map[string]string{"type": "idempotency_error"}, RetryHeader:
// "Stripe-Should-Retry"}. Each member field names the member that carries
// that part of the problem; an empty one leaves the part out.
type ErrorShape struct {
	// ContentType is the answers' media type; "" is application/json.
	ContentType string
	// Envelope, when set, is the one member of the body, holding the
	// error object.
	Envelope string
	// Type carries Problem.Type, the URI of the problem's section in
	// docs/problems.md; Code its short name (Problem.Code); Title,
	// Detail and Status the rest of the problem.
	Type, Code, Title, Detail, Status string
	// Fixed are members sent with the same string in every answer, such as
	// an error type the API's clients switch on. The problem's own
	// members win over them.
	Fixed map[string]string
	// RetryHeader, when set, is sent with every answer as "true" or
	// "false": whether a retry with the same key is right
	// (Problem.Retryable), as Stripe-Should-Retry is.
	RetryHeader string
	// RetryMember, when set, is a boolean member carrying the same.
	RetryMember string
}

// Render renders p in the shape, with its members in a fixed order: the
// Fixed ones by name, then type, code, title, status, detail and retry.
func (s *ErrorShape) Render(p *Problem) *Response {
	var obj bytes.Buffer
	obj.WriteByte('{')
	n := 0
	member := func(name string, value any) {
		if name == "" {
			return
		}
		if n > 0 {
			obj.WriteByte(',')
		}
		n++
		writeJSON(&obj, name)
		obj.WriteByte(':')
		writeJSON(&obj, value)
	}
	own := map[string]bool{s.Type: true, s.Code: true, s.Title: true, s.Status: true, s.Detail: true, s.RetryMember: true}
	for _, name := range slices.Sorted(maps.Keys(s.Fixed)) {
		if !own[name] {
			member(name, s.Fixed[name])
		}
	}
	member(s.Type, p.Type)
	member(s.Code, p.Code())
	member(s.Title, p.Title)
	if s.Status != "" {
		member(s.Status, p.Status)
	}
	member(s.Detail, p.Detail)
	if s.RetryMember != "" {
		member(s.RetryMember, p.Retryable())
	}
	obj.WriteByte('}')
	body := obj.Bytes()
	if s.Envelope != "" {
		var env bytes.Buffer
		env.WriteByte('{')
		writeJSON(&env, s.Envelope)
		env.WriteByte(':')
		env.Write(body)
		env.WriteByte('}')
		body = env.Bytes()
	}
	ct := s.ContentType
	if ct == "" {
		ct = "application/json"
	}
	h := http.Header{"Content-Type": {ct}}
	if p.RetryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(retryAfterSeconds(p.RetryAfter)))
	}
	if s.RetryHeader != "" {
		h.Set(s.RetryHeader, strconv.FormatBool(p.Retryable()))
	}
	return &Response{Status: p.Status, Header: h, Body: body}
}

// ProblemType reads the problem's type back from an answer in the shape:
// its Type member, else its Code member under ProblemBase. It returns ""
// for an answer that is not of the shape's media type or has neither.
func (s *ErrorShape) ProblemType(h http.Header, body []byte) string {
	ct := s.ContentType
	if ct == "" {
		ct = "application/json"
	}
	if !strings.HasPrefix(h.Get("Content-Type"), ct) {
		return ""
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(body, &obj) != nil {
		return ""
	}
	if s.Envelope != "" {
		if json.Unmarshal(obj[s.Envelope], &obj) != nil {
			return ""
		}
	}
	read := func(member string) string {
		var v string
		if member != "" {
			_ = json.Unmarshal(obj[member], &v)
		}
		return v
	}
	if t := read(s.Type); t != "" {
		return t
	}
	if c := read(s.Code); c != "" {
		return ProblemBase + c
	}
	return ""
}

// writeJSON writes v, a string, an int or a bool, as JSON.
func writeJSON(b *bytes.Buffer, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		panic(err) // strings, ints and bools always marshal
	}
	b.Write(data)
}
