package idem

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"slices"
	"strings"
	"unicode/utf8"
)

type requestKey struct{}

// WithRequest returns ctx carrying r, for Serve. The generated handler
// adds it with a strict middleware, since the strict server interface
// passes handlers only a context.
func WithRequest(ctx context.Context, r *http.Request) context.Context {
	return context.WithValue(ctx, requestKey{}, r)
}

// RequestFrom returns the request WithRequest stored, or nil.
func RequestFrom(ctx context.Context) *http.Request {
	r, _ := ctx.Value(requestKey{}).(*http.Request)
	return r
}

// EndBody ends the body's part in the request once the strict handler has
// decoded it. A body ReadBody buffered is let go, so that a large body is
// not held twice, raw and decoded, while the request runs. Of a body
// BoundBody bounded, what the decoder left unread after the JSON value is
// read and discarded, so that a body over the limit is refused even when
// its value ends below it: EndBody returns the 413 *Problem then, or a
// 400 *Problem when the rest cannot be read. Anything but whitespace after
// the value (`{...}{...}`, `{...}garbage`) is a 400 *Problem too: the
// decoder stops at the end of the first value, and the fingerprint, made
// from it, would not cover the rest.
func EndBody(ctx context.Context) error {
	r := RequestFrom(ctx)
	if r == nil {
		return nil
	}
	body := r.Body
	r.Body = http.NoBody
	if b, ok := body.(*boundedBody); ok {
		// Up to the end, the limit, or the first byte past the value.
		var p *Problem
		if _, err := io.Copy(io.Discard, untilTrailing{b}); err != nil {
			p = bodyProblem(err)
		} else if b.end.done() {
			p = trailingData()
		}
		if p != nil {
			// The body is gone from r now, and with it the gate that
			// ErrorHandlers would find.
			b.gate.traceRefusal(ctx, p)
			return p
		}
	}
	return nil
}

// DefaultMaxJSONBodyBytes is what the generated handler bounds the bodies
// of annotated operations by, when neither their annotation's max-body
// nor the handler's option says: JSON, form and text bodies of an API
// rarely need more. Multipart bodies get DefaultMaxMultipartBytes.
const DefaultMaxJSONBodyBytes = 1 << 20

// DefaultMaxBodyBytes bounds request bodies when LimitBody is given 0. It
// is the multipart buffer's limit, so that any body the protocol can
// fingerprint gets through.
const DefaultMaxBodyBytes = DefaultMaxMultipartBytes

// LimitBody returns middleware that bounds request bodies to limit bytes
// (0: DefaultMaxBodyBytes; negative: no limit) and answers a larger one
// with 413, before anything else reads it. The body is read whole first:
// a decoder that stops at the end of the first JSON value would otherwise
// let an oversized body through.
func LimitBody(limit int64) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		if limit < 0 {
			return next
		}
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if ReadBody(w, r, limit) {
				next.ServeHTTP(w, r)
			}
		})
	}
}

// ReadBody does what LimitBody does, for routers whose middlewares are not
// http.Handler wrappers: it reads r's body whole, up to limit bytes (0:
// DefaultMaxBodyBytes; negative: no limit), and puts it back on r. When the
// body is too large or cannot be read it answers w with a problem and
// returns false: the request must go no further.
func ReadBody(w http.ResponseWriter, r *http.Request, limit int64) bool {
	return readWhole(w, r, limit, nil)
}

func readWhole(w http.ResponseWriter, r *http.Request, limit int64, g *Gate) bool {
	body, ok := bound(w, r, limit, g)
	if body == nil {
		return ok
	}
	data, err := readBody(body, r.ContentLength)
	if err != nil {
		g.refuse(w, r, bodyProblem(err))
		return false
	}
	r.Body = &bufferedBody{Reader: bytes.NewReader(data), data: data, gate: g}
	return true
}

// BoundBody bounds r's body to limit bytes as ReadBody does, without
// reading it, for a body that is decoded as it arrives and needs no buffer
// of its own: a JSON body, fingerprinted from its decoded value. A declared
// length over the limit is answered with 413 at once; a body that turns
// out longer fails its reads with *http.MaxBytesError, which RequestError
// answers with 413, and EndBody checks what follows the decoded value.
// With no limit (negative), the body is still watched for what follows
// its value.
func BoundBody(w http.ResponseWriter, r *http.Request, limit int64) bool {
	return boundStream(w, r, limit, nil)
}

func boundStream(w http.ResponseWriter, r *http.Request, limit int64, g *Gate) bool {
	body, ok := bound(w, r, limit, g)
	if !ok {
		return false
	}
	if body == nil && r.Body != nil && r.Body != http.NoBody {
		body = r.Body // not bounded, but watched all the same
	}
	if body != nil {
		r.Body = &boundedBody{ReadCloser: body, gate: g}
	}
	return true
}

// CheckContentType checks that r's body, if it has one, is of one of the
// media types accept lists, or answers w with a 415 problem naming them
// and returns false. The Content-Type is parsed as RFC 9110 says: type
// and subtype match case-insensitively and exactly (application/json5 is
// not application/json; a +json type passes only where accept lists it,
// or a range such as application/* covers it), and parameters stand
// apart. A body that passes has its Content-Type rewritten to the
// declared media type, parameters kept, since the generated strict
// handler tells the types apart by prefix. With no accept, any body
// passes: the operation takes none, and its handler never reads it. A
// request of declared length 0 has no body.
func CheckContentType(w http.ResponseWriter, r *http.Request, accept ...string) bool {
	return checkContentType(w, r, nil, accept)
}

func checkContentType(w http.ResponseWriter, r *http.Request, g *Gate, accept []string) bool {
	if len(accept) == 0 || r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		return true
	}
	ct := r.Header.Get("Content-Type")
	if slices.Contains(accept, ct) {
		return true // as declared: nothing to parse or rewrite
	}
	declared, params, ok := matchMediaType(ct, accept)
	if !ok {
		g.refuse(w, r, unsupportedMediaType(ct, accept))
		return false
	}
	if normal := mime.FormatMediaType(declared, params); normal != "" && normal != ct {
		r.Header.Set("Content-Type", normal)
	}
	return true
}

// matchMediaType returns the media type of accept that the Content-Type
// ct names, with ct's parameters: the declared spelling for an exact
// match, ct's own type, lowercased, for a range (type/* or */*).
func matchMediaType(ct string, accept []string) (string, map[string]string, bool) {
	mt, params, err := mime.ParseMediaType(ct)
	switch {
	case errors.Is(err, mime.ErrInvalidMediaParameter):
		params = nil // the type is sound; its malformed parameters are dropped
	case err != nil:
		return "", nil, false
	}
	typ, _, _ := strings.Cut(mt, "/")
	for _, a := range accept {
		if strings.IndexByte(a, ';') >= 0 {
			if am, _, err := mime.ParseMediaType(a); err == nil {
				a = am // a spec's media type with parameters
			}
		}
		switch a = strings.ToLower(a); {
		case a == mt:
			return a, params, true
		case a == "*/*", strings.HasSuffix(a, "/*") && strings.TrimSuffix(a, "/*") == typ:
			return mt, params, true
		}
	}
	return "", nil, false
}

// Gate is what the generated handler checks on an annotated operation's
// route before anything reads the request, the parameters' binder
// included: a declared, required Idempotency-Key, the body's media type
// and its size. Each refusal is answered in the API's error shape.
type Gate struct {
	// Operation names the operation in the answers.
	Operation string
	// KeyDeclared is set when the operation declares an Idempotency-Key
	// header parameter itself, and KeyRequired when that is required. The
	// parameters' binder would refuse a request without the key, or with
	// it twice, with a generic error before the protocol sees it, so the
	// gate answers with the protocol's missing-key and invalid-key
	// problems first.
	KeyDeclared, KeyRequired bool
	// Key are where the operation takes its key from when that is not
	// the Idempotency-Key header (see Operation.KeyFrom): their headers
	// and query parameters are checked as a declared Idempotency-Key
	// is, KeyRequired saying whether they must be there, and KeyDeclared
	// is then ignored.
	Key []KeySource
	// ScopeHeader names the header parameter that scopes the operation's
	// keys, when the spec says so. The parameters' binder would refuse a
	// request without it, or with it twice, with a generic error before
	// the protocol sees it, so the gate answers with the protocol's
	// invalid-scope problem first.
	ScopeHeader string
	// Accept are the media types of the operation's request bodies, and
	// JSON those of them that are JSON, decoded as they arrive; none when
	// it takes no body. Any other body is read whole first, for its
	// fingerprint.
	Accept, JSON []string
	// Limit bounds the body, in bytes: 0 is DefaultMaxBodyBytes, negative
	// no limit.
	Limit int64
	// Problems renders the refusals; nil is problem+json.
	Problems ProblemShape
	// Validate checks the request against the operation's declared
	// parameters and body before anything else reads it, and returns the
	// problem to answer with, or nil to let it through; body is the whole
	// body, read within Limit (nil when there is none). Nil checks
	// nothing. The generated layer sets it from package idemvalidate,
	// unless the operation is annotated validate: false.
	Validate func(r *http.Request, body []byte) *Problem
	// Tracer is told of each request the gate refuses, and of those whose
	// body the strict handler then fails to decode (ErrorHandlers tell
	// it), as a request of Operation with its outcome; nil tells nobody.
	// The generated handler sets it to what the engine reports to (see
	// Options.Observer).
	Tracer Tracer
}

// Pass lets r through, its body bounded, or answers w with a problem and
// returns false: the request must go no further.
func (g *Gate) Pass(w http.ResponseWriter, r *http.Request) bool {
	switch {
	case len(g.Key) > 0:
		if p := g.gateKey(r); p != nil {
			g.refuse(w, r, p)
			return false
		}
	case g.KeyDeclared || g.KeyRequired:
		switch values := r.Header.Values(HeaderKey); {
		case len(values) == 0 && g.KeyRequired:
			g.refuse(w, r, missingKeyProblem(g.Operation, nil))
			return false
		case len(values) > 1:
			_, err := ParseKey(values)
			g.refuse(w, r, invalidKeyProblem(err, nil, "a single key"))
			return false
		}
	}
	if !checkContentType(w, r, g, g.Accept) {
		return false
	}
	if g.ScopeHeader != "" {
		if detail := scopeHeaderInvalid(g.Operation, g.ScopeHeader, r.Header.Values(g.ScopeHeader)); detail != "" {
			g.refuse(w, r, invalidScopeProblem(detail))
			return false
		}
	}
	if g.Validate != nil {
		return g.validate(w, r)
	}
	if r.Body == nil || r.Body == http.NoBody {
		// Nothing to bound; the gate rides on an empty body all the same,
		// so that ErrorHandlers can tell the operation of a request whose
		// parameters then fail to bind.
		r.Body = &boundedBody{ReadCloser: http.NoBody, gate: g}
		return true
	}
	if g.streams(r) {
		return boundStream(w, r, g.Limit, g)
	}
	return readWhole(w, r, g.Limit, g)
}

// validate reads r's body whole, within the gate's limit, checks the
// request with Validate, and hands the body on as Pass would have: a JSON
// body watched for what follows its value, any other buffered.
func (g *Gate) validate(w http.ResponseWriter, r *http.Request) bool {
	var data []byte
	if r.Body != nil && r.Body != http.NoBody {
		body, ok := bound(w, r, g.Limit, g)
		if !ok {
			return false
		}
		if body == nil {
			body = r.Body // not bounded
		}
		var err error
		if data, err = readBody(body, r.ContentLength); err != nil {
			g.refuse(w, r, bodyProblem(err))
			return false
		}
	}
	if data != nil && g.streams(r) && !utf8.Valid(data) {
		g.refuse(w, r, notUTF8())
		return false
	}
	if p := g.Validate(r, data); p != nil {
		g.refuse(w, r, p)
		return false
	}
	switch {
	case data == nil:
		r.Body = &boundedBody{ReadCloser: http.NoBody, gate: g}
	case g.streams(r):
		r.Body = &boundedBody{ReadCloser: io.NopCloser(bytes.NewReader(data)), gate: g}
	default:
		r.Body = &bufferedBody{Reader: bytes.NewReader(data), data: data, gate: g}
	}
	return true
}

// refuse answers w with p, in the gate's shape, and tells its tracer. A
// nil gate answers in problem+json and tells nobody.
func (g *Gate) refuse(w http.ResponseWriter, r *http.Request, p *Problem) {
	var shape ProblemShape
	if g != nil {
		shape = g.Problems
	}
	g.traceRefusal(r.Context(), p)
	writeProblem(w, shape, p)
}

// traceRefusal tells the gate's tracer that a request of its operation
// ended refused with p, before the protocol took it.
func (g *Gate) traceRefusal(ctx context.Context, p *Problem) {
	if g == nil || g.Tracer == nil {
		return
	}
	ctx = g.Tracer.TraceRequestStart(ctx, TraceRequestStartData{Operation: g.Operation})
	g.Tracer.TraceRequestEnd(ctx, TraceRequestEndData{Operation: g.Operation, Outcome: outcomeOfRefusal(p), Status: p.Status})
}

// gateOf returns the gate that let r's body through, or nil.
func gateOf(r *http.Request) *Gate {
	switch b := r.Body.(type) {
	case *boundedBody:
		return b.gate
	case *bufferedBody:
		return b.gate
	}
	return nil
}

// streams reports whether r's body is JSON, which the strict handler
// decodes as it arrives.
func (g *Gate) streams(r *http.Request) bool {
	if len(g.JSON) == len(g.Accept) {
		return true
	}
	_, _, ok := matchMediaType(r.Header.Get("Content-Type"), g.JSON)
	return ok
}

func writeProblem(w http.ResponseWriter, shape ProblemShape, p *Problem) {
	_ = Render(shape, p).Write(w)
}

func unsupportedMediaType(ct string, accept []string) *Problem {
	sent := fmt.Sprintf("Content-Type %q", ct)
	if ct == "" {
		sent = "no Content-Type"
	}
	return &Problem{
		Type:   TypeUnsupportedMediaType,
		Title:  "Unsupported media type",
		Status: http.StatusUnsupportedMediaType,
		Detail: fmt.Sprintf("The request body was sent with %s, and this operation accepts %s. Send the body as one of them, with its Content-Type; the request was not run.", sent, strings.Join(accept, ", ")),
	}
}

// trailingData answers a JSON body with data after its value.
func trailingData() *Problem {
	return &Problem{
		Type:   TypeInvalidRequest,
		Title:  "Invalid request",
		Status: http.StatusBadRequest,
		Detail: "The request body has data after its JSON value. Send exactly one JSON value, with nothing but whitespace after it; the request was not run.",
	}
}

// bound returns r's body bounded to limit bytes, or nil when it has none
// or is not to be bounded. A declared length over the limit is answered
// with 413, and bound returns false.
func bound(w http.ResponseWriter, r *http.Request, limit int64, g *Gate) (io.ReadCloser, bool) {
	if limit == 0 {
		limit = DefaultMaxBodyBytes
	}
	if limit < 0 || r.Body == nil || r.Body == http.NoBody {
		return nil, true
	}
	if r.ContentLength > limit {
		g.refuse(w, r, bodyTooLarge(limit))
		return nil, false
	}
	return http.MaxBytesReader(w, r.Body, limit), true
}

// boundedBody is a body BoundBody bounded, for EndBody to tell. It follows
// the JSON text as the decoder reads it, to find what follows the value.
type boundedBody struct {
	io.ReadCloser
	end  valueEnd
	text utf8Check
	gate *Gate // that bounded it, if any
}

func (b *boundedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.end.scan(p[:n])
	if !b.text.scan(p[:n]) || (err == io.EOF && !b.text.end()) {
		// None of the bytes: the decoder would decode a value it holds
		// whole before it looks at the error.
		return 0, notUTF8()
	}
	if err == io.EOF {
		b.end.eof()
	}
	return n, err
}

// untilTrailing reads a boundedBody up to the first byte past its value.
type untilTrailing struct{ b *boundedBody }

func (u untilTrailing) Read(p []byte) (int, error) {
	if u.b.end.done() {
		return 0, io.EOF
	}
	return u.b.Read(p)
}

// valueEnd follows a JSON text as it is read and tells whether anything
// but whitespace follows its first value. It leaves checking the value to
// the decoder, which fails on one that is not JSON: it follows only
// strings, nesting, and where a top-level number or literal ends.
type valueEnd struct {
	state   uint8
	escaped bool   // in a string, the next byte is escaped
	depth   int    // of objects and arrays
	scalar  []byte // a top-level number or literal, so far
}

// The states of valueEnd.
const (
	beforeValue uint8 = iota
	inNested          // in an object or array, outside strings
	inString
	inScalar // a top-level number or literal
	afterValue
	trailing // something other than whitespace followed the value
)

// done reports whether data followed the value.
func (v *valueEnd) done() bool { return v.state == trailing }

// eof ends the text: a top-level number or literal ends with it.
func (v *valueEnd) eof() {
	if v.state == inScalar {
		v.endScalar()
	}
}

// endScalar ends a top-level number or literal: when it is not one JSON
// value, the decoder took a prefix of it (1 of 1x, true of truex) and the
// rest follows the value.
func (v *valueEnd) endScalar() {
	v.state = afterValue
	if !json.Valid(v.scalar) {
		v.state = trailing
	}
	v.scalar = nil
}

func (v *valueEnd) scan(p []byte) {
	for i := 0; i < len(p); {
		switch v.state {
		case trailing:
			return
		case beforeValue, afterValue:
			c := p[i]
			i++
			switch {
			case isSpace(c):
			case v.state == afterValue:
				v.state = trailing
				return
			case c == '{' || c == '[':
				v.state, v.depth = inNested, 1
			case c == '"':
				v.state = inString
			default:
				v.state = inScalar
				v.scalar = append(v.scalar, c)
			}
		case inNested:
			c := p[i]
			i++
			switch c {
			case '"':
				v.state = inString
			case '{', '[':
				v.depth++
			case '}', ']':
				v.depth--
				if v.depth == 0 {
					v.state = afterValue
				}
			}
		case inString:
			i = v.scanString(p, i)
		case inScalar:
			c := p[i]
			switch {
			case isSpace(c):
				v.endScalar()
			case strings.IndexByte(`{}[]",:`, c) >= 0:
				v.endScalar()
				v.state = trailing
				return
			default:
				v.scalar = append(v.scalar, c)
			}
			i++
		}
	}
}

// scanString follows a string from p[i] and returns where it stopped: past
// the closing quote, or at the end of p. It looks for quotes and
// backslashes with bytes.IndexByte, as strings are most of a large body.
func (v *valueEnd) scanString(p []byte, i int) int {
	quote := -1 // the first quote at or after i, or len(p) for none
	for i < len(p) {
		if v.escaped {
			v.escaped = false
			i++
			continue
		}
		if quote < i {
			quote = bytes.IndexByte(p[i:], '"')
			if quote < 0 {
				quote = len(p)
			} else {
				quote += i
			}
		}
		backslash := bytes.IndexByte(p[i:quote], '\\')
		if backslash >= 0 {
			i += backslash + 1
			v.escaped = true
			continue
		}
		if quote == len(p) {
			return len(p)
		}
		v.state = afterValue
		if v.depth > 0 {
			v.state = inNested
		}
		return quote + 1
	}
	return i
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// bufferedBody is a body ReadBody read whole: a reader over it, and the
// bytes, for ReadMultipartRequest.
type bufferedBody struct {
	*bytes.Reader
	data []byte
	gate *Gate // that read it, if any
}

func (*bufferedBody) Close() error { return nil }

// readBody reads a body of the declared length into a buffer of exactly
// that size, so that a large body costs its size once, not the doublings
// of a growing buffer; a body of unknown length is read as it comes.
func readBody(r io.Reader, length int64) ([]byte, error) {
	if length <= 0 {
		return io.ReadAll(r)
	}
	body := make([]byte, length)
	if _, err := io.ReadFull(r, body); err != nil {
		return nil, err
	}
	// The server stops a body at its Content-Length; anything past it is
	// another request's, never this one's.
	return body, nil
}

func bodyTooLarge(limit int64) *Problem {
	return &Problem{
		Type:   TypeBodyTooLarge,
		Title:  "Request body too large",
		Status: http.StatusRequestEntityTooLarge,
		Detail: fmt.Sprintf("The request body is over the limit of %d bytes, so it was not run. Send a smaller body.", limit),
	}
}

// bodyProblem answers a body that failed to read: 413 over the limit, else
// 400.
func bodyProblem(err error) *Problem {
	if tooLarge := (*http.MaxBytesError)(nil); errors.As(err, &tooLarge) {
		return bodyTooLarge(tooLarge.Limit)
	}
	if p := (*Problem)(nil); errors.As(err, &p) {
		return p
	}
	return &Problem{
		Type:   TypeInvalidRequest,
		Title:  "Invalid request",
		Status: http.StatusBadRequest,
		Detail: "The request body could not be read: " + err.Error() + ". Send the request again; it was not run.",
	}
}

// ErrorHandlers answer the errors of the generated server with problem
// details, in the API's error shape, so that every answer of an
// annotated API has one form.
type ErrorHandlers struct {
	// Logger receives handler errors; nil uses slog.Default().
	Logger *slog.Logger
	// Problems renders the answers; nil is problem+json.
	Problems ProblemShape
}

// RequestError answers a request that failed to decode with a 400, or a
// 413 when its body is over the limit of LimitBody.
func (h ErrorHandlers) RequestError(w http.ResponseWriter, r *http.Request, err error) {
	p := &Problem{
		Type:   TypeInvalidRequest,
		Title:  "Invalid request",
		Status: http.StatusBadRequest,
		Detail: "The request does not match the API's schema: " + err.Error() + ". Fix the request and send it again; it was not run.",
	}
	if tooLarge := (*http.MaxBytesError)(nil); errors.As(err, &tooLarge) {
		p = bodyTooLarge(tooLarge.Limit)
	}
	if refused := (*Problem)(nil); errors.As(err, &refused) {
		p = refused // such as a body that is not UTF-8
	}
	gateOf(r).traceRefusal(r.Context(), p)
	writeProblem(w, h.Problems, p)
}

// ResponseError answers a handler error with a 500. The error is logged,
// not sent: it may hold internals.
//
// A *Problem in err's chain is sent as it is, and not logged as an error:
// the 413 of an oversized multipart body, or a strict middleware's
// refusal, such as a 401 for a request without credentials (nothing was
// claimed or stored, so the client may send the same key again).
func (h ErrorHandlers) ResponseError(w http.ResponseWriter, r *http.Request, err error) {
	if p := (*Problem)(nil); errors.As(err, &p) {
		// Such as a multipart body's, read after the gate let it through.
		gateOf(r).traceRefusal(r.Context(), p)
		writeProblem(w, h.Problems, p)
		return
	}
	log := h.Logger
	if log == nil {
		log = slog.Default()
	}
	attrs := []any{"method", r.Method, "path", r.URL.Path, "error", err}
	if pe := (*PanicError)(nil); errors.As(err, &pe) {
		attrs = append(attrs, "stack", string(pe.Stack))
	}
	// The key as the operation's answers name it: the Idempotency-Key
	// header, or where its annotation's key: takes it from.
	key := HeaderKey
	if g := gateOf(r); g != nil && len(g.Key) > 0 {
		key = (&Operation{KeyFrom: g.Key}).keyNoun()
	}
	detail := "The server failed to handle the request. Nothing was stored for its " + key + ", so a retry with the same key runs it again."
	if pe := (*PhaseError)(nil); errors.As(err, &pe) {
		attrs = append(attrs, "recovery_point", pe.Point)
		if pe.Point != "" {
			detail = fmt.Sprintf("The server failed partway through the request. Its steps up to %q are done and kept, and nothing after them: a retry with the same %s resumes after them. Do not send a new key for this request, or the kept steps may be done twice.", pe.Point, key)
		} else {
			// A phased request's key is bound to it from its first step on.
			detail = fmt.Sprintf("The server failed before the request's first step was done; nothing of it is kept. Its %s stays bound to this request: a retry of the same request with the same key runs it again, and a different request needs a new key.", key)
		}
	}
	log.ErrorContext(r.Context(), "idem: handler failed", attrs...)
	writeProblem(w, h.Problems, &Problem{
		Type:   TypeInternal,
		Title:  "Internal error",
		Status: http.StatusInternalServerError,
		Detail: detail,
	})
}
