package idem_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/idemgen/idemgen/idem"
)

// chunked returns a request whose body's length is not declared, as a
// chunked body arrives.
func chunked(body string) *http.Request {
	r := httptest.NewRequest("POST", "/orders", io.MultiReader(strings.NewReader(body)))
	r.ContentLength = -1
	return r
}

// BoundBody bounds a JSON body without reading it: a declared length over
// the limit is a 413 at once; a value that runs past the limit fails the
// decoder with what RequestError answers as a 413; what follows a value
// that fits is checked by EndBody.
func TestBoundBody(t *testing.T) {
	const limit = 32
	decode := func(r *http.Request) error {
		var v map[string]any
		return json.NewDecoder(r.Body).Decode(&v)
	}

	t.Run("declared length over the limit", func(t *testing.T) {
		r := httptest.NewRequest("POST", "/orders", strings.NewReader(`{"a": "`+strings.Repeat("x", limit)+`"}`))
		w := httptest.NewRecorder()
		if idem.BoundBody(w, r, limit) {
			t.Fatal("BoundBody let a body over the limit through")
		}
		if w.Code != 413 || !strings.Contains(w.Body.String(), idem.TypeBodyTooLarge) {
			t.Errorf("answered %d %s, want a 413 problem", w.Code, w.Body)
		}
	})

	t.Run("value over the limit", func(t *testing.T) {
		r := chunked(`{"a": "` + strings.Repeat("x", limit) + `"}`)
		w := httptest.NewRecorder()
		if !idem.BoundBody(w, r, limit) {
			t.Fatalf("BoundBody refused a body of unknown length: %d %s", w.Code, w.Body)
		}
		err := decode(r)
		if target := (*http.MaxBytesError)(nil); !errors.As(err, &target) {
			t.Fatalf("decoding: %v, want *http.MaxBytesError", err)
		}
		(idem.ErrorHandlers{}).RequestError(w, r, err)
		if w.Code != 413 {
			t.Errorf("RequestError answered %d %s, want 413", w.Code, w.Body)
		}
	})

	t.Run("value within the limit, the body past it", func(t *testing.T) {
		r := chunked(`{"a": 1}` + strings.Repeat(" ", limit))
		if !idem.BoundBody(httptest.NewRecorder(), r, limit) {
			t.Fatal("BoundBody refused a body of unknown length")
		}
		if err := decode(r); err != nil {
			t.Fatal(err)
		}
		err := idem.EndBody(idem.WithRequest(context.Background(), r))
		if p := (*idem.Problem)(nil); !errors.As(err, &p) || p.Status != 413 || p.Type != idem.TypeBodyTooLarge {
			t.Fatalf("EndBody: %v, want a 413 problem", err)
		}
	})

	t.Run("within the limit", func(t *testing.T) {
		r := chunked(`{"a": 1}` + "\n")
		if !idem.BoundBody(httptest.NewRecorder(), r, limit) {
			t.Fatal("BoundBody refused a body within the limit")
		}
		if err := decode(r); err != nil {
			t.Fatal(err)
		}
		if err := idem.EndBody(idem.WithRequest(context.Background(), r)); err != nil {
			t.Fatalf("EndBody: %v", err)
		}
		if r.Body != http.NoBody {
			t.Error("EndBody kept the body on the request")
		}
	})

	t.Run("body that breaks off", func(t *testing.T) {
		r := httptest.NewRequest("POST", "/orders", io.MultiReader(strings.NewReader(`{"a": 1} `), failingReader{}))
		r.ContentLength = -1
		if !idem.BoundBody(httptest.NewRecorder(), r, limit) {
			t.Fatal("BoundBody refused a body within the limit")
		}
		if err := decode(r); err != nil {
			t.Fatal(err)
		}
		err := idem.EndBody(idem.WithRequest(context.Background(), r))
		if p := (*idem.Problem)(nil); !errors.As(err, &p) || p.Status != 400 || !strings.Contains(p.Detail, "could not be read") {
			t.Fatalf("EndBody: %v, want a 400 problem", err)
		}
	})

	t.Run("no limit", func(t *testing.T) {
		r := chunked(`{"a": 1}` + strings.Repeat(" ", idem.DefaultMaxBodyBytes+1))
		if !idem.BoundBody(httptest.NewRecorder(), r, -1) {
			t.Fatal("BoundBody with no limit refused a body")
		}
		if err := decode(r); err != nil {
			t.Fatal(err)
		}
		if err := idem.EndBody(idem.WithRequest(context.Background(), r)); err != nil {
			t.Fatalf("EndBody: %v", err)
		}
	})
}

// EndBody refuses a JSON body with anything but whitespace after its
// value, a 400 that says so, however the body arrives: whole, a byte at a
// time (so that every state of the scan ends a read), with or without a
// limit. Whitespace after the value is fine.
func TestEndBodyTrailingData(t *testing.T) {
	for _, tc := range []struct {
		body     string
		trailing bool
	}{
		{`{"a": 1}`, false},
		{`{"a": 1}` + " \t\r\n", false},
		{` {"a": "}{\"]", "b": ["\\", {"c": null}]} `, false},
		{`[1, [2, {"x": "]"}]]`, false},
		{`"a\"}b\\"`, false},
		{`123`, false},
		{`-1.5e+3 `, false},
		{`true`, false},
		{`null` + "\n", false},
		{`{"a": 1}x`, true},
		{`{"a": 1}{}`, true},
		{`{"a": 1} {"a": 1}`, true},
		{`{"a": 1}` + "\n" + `garbage`, true},
		{`[1]]`, true},
		{`{"a": "\\"}"`, true},
		{`"s"x`, true},
		{`"s" "t"`, true},
		{`123x`, true},
		{`1 2`, true},
		{`1e5e5`, true},
		{`1.5.5`, true},
		{`0123`, true},
		{`truex`, true},
		{`true false`, true},
		{`nullnull`, true},
		{`1{}`, true},
		{`1"s"`, true},
	} {
		for _, split := range []string{"whole", "byte by byte"} {
			for _, limit := range []int64{64, -1} {
				var body io.Reader = strings.NewReader(tc.body)
				if split == "byte by byte" {
					body = iotest.OneByteReader(body)
				}
				r := httptest.NewRequest("POST", "/orders", body)
				r.ContentLength = -1
				if !idem.BoundBody(httptest.NewRecorder(), r, limit) {
					t.Fatalf("%q: BoundBody refused it", tc.body)
				}
				var v any
				if err := json.NewDecoder(r.Body).Decode(&v); err != nil {
					t.Fatalf("%q (%s, limit %d): the decoder failed: %v", tc.body, split, limit, err)
				}
				err := idem.EndBody(idem.WithRequest(context.Background(), r))
				if !tc.trailing {
					if err != nil {
						t.Errorf("%q (%s, limit %d): EndBody: %v, want nil", tc.body, split, limit, err)
					}
					continue
				}
				var p *idem.Problem
				ok := errors.As(err, &p)
				if !ok || p.Status != 400 || p.Type != idem.TypeInvalidRequest || !strings.Contains(p.Detail, "data after its JSON value") {
					t.Errorf("%q (%s, limit %d): EndBody: %v, want the 400 problem of data after the value", tc.body, split, limit, err)
				}
			}
		}
	}
}

// The data after a value is found at once: EndBody does not read a long
// tail to the end, not even without a limit.
func TestEndBodyStopsAtTrailingData(t *testing.T) {
	tail := &countingReader{r: strings.NewReader(strings.Repeat("x", 1<<20))}
	r := httptest.NewRequest("POST", "/orders", io.MultiReader(strings.NewReader(`{"a": 1}`), tail))
	r.ContentLength = -1
	if !idem.BoundBody(httptest.NewRecorder(), r, -1) {
		t.Fatal("BoundBody refused the body")
	}
	var v any
	if err := json.NewDecoder(r.Body).Decode(&v); err != nil {
		t.Fatal(err)
	}
	if err := idem.EndBody(idem.WithRequest(context.Background(), r)); err == nil {
		t.Fatal("EndBody: nil, want the 400 problem")
	}
	if tail.n > 64<<10 {
		t.Errorf("EndBody read %d bytes of the tail", tail.n)
	}
}

type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// CheckContentType lets a body of a declared media type through, with
// parameters; answers any other, or none, with a 415 naming the declared
// ones; and checks nothing of a request without a body or an operation
// that takes none.
func TestCheckContentType(t *testing.T) {
	accept := []string{"application/json", "application/x-www-form-urlencoded"}
	for _, tc := range []struct {
		ct     string
		body   string
		accept []string
		pass   bool
	}{
		{"application/json", "{}", accept, true},
		{"application/json; charset=utf-8", "{}", accept, true},
		{"application/x-www-form-urlencoded", "a=1", accept, true},
		{"text/plain", "{}", accept, false},
		{"", "{}", accept, false},
		{"", "", accept, true},
		{"text/plain", "x", nil, true},
	} {
		r := httptest.NewRequest("POST", "/orders", strings.NewReader(tc.body))
		if tc.ct != "" {
			r.Header.Set("Content-Type", tc.ct)
		}
		w := httptest.NewRecorder()
		if got := idem.CheckContentType(w, r, tc.accept...); got != tc.pass {
			t.Errorf("Content-Type %q, body %q, accept %q: %v, want %v", tc.ct, tc.body, tc.accept, got, tc.pass)
		}
		if tc.pass {
			continue
		}
		var p idem.Problem
		if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil || w.Code != 415 || p.Type != idem.TypeUnsupportedMediaType || w.Header().Get("Content-Type") != idem.ContentTypeProblem {
			t.Errorf("Content-Type %q: answered %d %s, want a 415 problem", tc.ct, w.Code, w.Body)
		}
		for _, a := range tc.accept {
			if !strings.Contains(p.Detail, a) {
				t.Errorf("Content-Type %q: the problem does not name %s: %q", tc.ct, a, p.Detail)
			}
		}
	}
}

// Media types are parsed, not compared as prefixes (RFC 9110): type and
// subtype match case-insensitively and exactly, parameters stand apart,
// a +json type passes only where it is declared or a range covers it.
// A body that passes reaches the handler under the declared spelling,
// its parameters kept, since the strict handler picks a decoder by
// prefix.
func TestMediaTypeMatching(t *testing.T) {
	json := []string{"application/json"}
	for _, tc := range []struct {
		ct     string
		accept []string
		pass   bool
		sent   string // the Content-Type the handler sees
	}{
		{"application/json", json, true, "application/json"},
		{"APPLICATION/JSON", json, true, "application/json"},
		{"application/JSON; charset=utf-8", json, true, "application/json; charset=utf-8"},
		{"Application/Json ; Charset=UTF-8", json, true, "application/json; charset=UTF-8"},
		{"application/jsonfoo", json, false, ""},
		{"application/json5", json, false, ""},
		{"application/json-patch+json", json, false, ""},
		{"application/merge-patch+json", []string{"application/merge-patch+json"}, true, "application/merge-patch+json"},
		{"application/vnd.api+json", []string{"application/*"}, true, "application/vnd.api+json"},
		{"text/plain", []string{"*/*"}, true, "text/plain"},
		{"text/plain", []string{"application/*"}, false, ""},
		{"application/", json, false, ""},                                  // malformed
		{"application/json; charset=\xff", json, true, "application/json"}, // its parameters malformed: dropped
		{"multipart/form-data; boundary=XyZ", []string{"multipart/form-data"}, true, "multipart/form-data; boundary=XyZ"},
		{"application/json", []string{"Application/JSON; charset=utf-8"}, true, "application/json"},
	} {
		r := httptest.NewRequest("POST", "/orders", strings.NewReader("{}"))
		r.Header.Set("Content-Type", tc.ct)
		w := httptest.NewRecorder()
		if got := idem.CheckContentType(w, r, tc.accept...); got != tc.pass {
			t.Errorf("Content-Type %q, accept %q: %v, want %v", tc.ct, tc.accept, got, tc.pass)
			continue
		}
		if !tc.pass {
			if w.Code != 415 {
				t.Errorf("Content-Type %q: answered %d, want 415", tc.ct, w.Code)
			}
			continue
		}
		if got := r.Header.Get("Content-Type"); got != tc.sent {
			t.Errorf("Content-Type %q, accept %q: the handler sees %q, want %q", tc.ct, tc.accept, got, tc.sent)
		}
	}
}

// A body ReadBody buffered is let go by EndBody, whatever follows its value.
func TestEndBodyReleasesTheBuffer(t *testing.T) {
	r := httptest.NewRequest("POST", "/orders", strings.NewReader(`{"a": 1}`+strings.Repeat(" ", 100)))
	if !idem.ReadBody(httptest.NewRecorder(), r, 200) {
		t.Fatal("ReadBody refused a body within the limit")
	}
	if err := idem.EndBody(idem.WithRequest(context.Background(), r)); err != nil || r.Body != http.NoBody {
		t.Fatalf("EndBody: %v, body %T", err, r.Body)
	}
	if err := idem.EndBody(context.Background()); err != nil {
		t.Fatalf("EndBody without a request: %v", err)
	}
}

type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, errors.New("connection reset") }

// endTracer keeps the ends of the requests it is told of.
type endTracer struct{ ends []idem.TraceRequestEndData }

func (e *endTracer) TraceRequestStart(ctx context.Context, _ idem.TraceRequestStartData) context.Context {
	return ctx
}
func (e *endTracer) TraceRequestEnd(_ context.Context, d idem.TraceRequestEndData) {
	e.ends = append(e.ends, d)
}

// TestGateTellsRequestErrors: a request the gate let through whose
// parameters or body then fail to bind is told to the gate's tracer as a
// 400 of its operation, with a body or without one.
func TestGateTellsRequestErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		body io.Reader
		gate idem.Gate
	}{
		{"no body, an operation that takes none", nil, idem.Gate{Operation: "cancelOrder"}},
		{"no body, an operation that takes JSON", nil, idem.Gate{Operation: "createOrder", Accept: []string{"application/json"}, JSON: []string{"application/json"}}},
		{"a JSON body", strings.NewReader(`{"a":1}`), idem.Gate{Operation: "createOrder", Accept: []string{"application/json"}, JSON: []string{"application/json"}}},
		{"a form body", strings.NewReader(`a=1`), idem.Gate{Operation: "createForm", Accept: []string{"application/x-www-form-urlencoded"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tracer := &endTracer{}
			g := tc.gate
			g.Tracer = tracer
			r := httptest.NewRequest(http.MethodPost, "/orders/x?limit=ten", tc.body)
			if tc.body != nil {
				r.Header.Set("Content-Type", g.Accept[0])
			}
			w := httptest.NewRecorder()
			if !g.Pass(w, r) {
				t.Fatalf("the gate refused: %d %s", w.Code, w.Body)
			}
			(idem.ErrorHandlers{}).RequestError(w, r, errors.New("invalid format for parameter limit"))
			if w.Code != http.StatusBadRequest {
				t.Fatalf("RequestError answered %d", w.Code)
			}
			if len(tracer.ends) != 1 || tracer.ends[0].Operation != g.Operation || tracer.ends[0].Outcome != idem.OutcomeInvalidRequest || tracer.ends[0].Status != 400 {
				t.Fatalf("the tracer was told %+v; want one 400 invalid_request of %s", tracer.ends, g.Operation)
			}
			if data, err := io.ReadAll(r.Body); err != nil || (tc.body == nil && len(data) != 0) {
				t.Errorf("the body reads %q, %v", data, err)
			}
		})
	}
}

// A gate with Validate reads the body whole within its limit, hands it to
// Validate, answers its problem in the gate's shape, and otherwise hands
// the body on as it would have: a JSON body still watched for data after
// its value, any other buffered.
func TestGateValidate(t *testing.T) {
	var seen []string
	gate := &idem.Gate{
		Operation: "createOrder",
		Accept:    []string{"application/json", "text/plain"},
		JSON:      []string{"application/json"},
		Limit:     64,
		Validate: func(r *http.Request, body []byte) *idem.Problem {
			seen = append(seen, string(body))
			if strings.Contains(string(body), "bad") {
				return &idem.Problem{Type: idem.TypeInvalidRequest, Title: "Invalid request", Status: 400, Detail: "bad"}
			}
			return nil
		},
	}
	pass := func(ct, body string, declared bool) (*http.Request, *httptest.ResponseRecorder, bool) {
		r := httptest.NewRequest("POST", "/orders", strings.NewReader(body))
		if !declared {
			r = chunked(body)
		}
		r.Header.Set("Content-Type", ct)
		w := httptest.NewRecorder()
		return r, w, gate.Pass(w, r)
	}

	_, w, ok := pass("application/json", `{"a": "bad"}`, true)
	if ok || w.Code != 400 || !strings.Contains(w.Body.String(), `"detail":"bad"`) {
		t.Fatalf("a refused body: passed %v, %d %s", ok, w.Code, w.Body)
	}

	for _, declared := range []bool{true, false} {
		r, _, ok := pass("application/json", `{"a": 1} {}`, declared)
		if !ok {
			t.Fatalf("a body Validate lets through was refused")
		}
		var v any
		if err := json.NewDecoder(r.Body).Decode(&v); err != nil {
			t.Fatal(err)
		}
		var p *idem.Problem
		if err := idem.EndBody(idem.WithRequest(context.Background(), r)); !errors.As(err, &p) || !strings.Contains(p.Detail, "data after its JSON value") {
			t.Errorf("data after the value, declared length %v: EndBody %v, want its problem", declared, err)
		}
	}

	r, _, ok := pass("text/plain", "plain text", true)
	if b, err := io.ReadAll(r.Body); !ok || err != nil || string(b) != "plain text" {
		t.Errorf("a text body: passed %v, read %q, %v", ok, b, err)
	}

	_, w, ok = pass("application/json", `{"a": "`+strings.Repeat("x", 64)+`"}`, false)
	if ok || w.Code != 413 {
		t.Errorf("a body over the limit: passed %v, %d, want 413 before Validate", ok, w.Code)
	}
	if want := []string{`{"a": "bad"}`, `{"a": 1} {}`, `{"a": 1} {}`, "plain text"}; strings.Join(seen, "|") != strings.Join(want, "|") {
		t.Errorf("Validate saw %q, want %q", seen, want)
	}
}

// A handler's failure on an operation that takes its key from elsewhere
// is answered naming that key, as the layer's other answers do.
func TestHandlerErrorNamesTheKeyPlacement(t *testing.T) {
	g := &idem.Gate{Operation: "receiveEvent", KeyRequired: true, Accept: []string{"application/json"}, JSON: []string{"application/json"},
		Key: []idem.KeySource{{In: idem.KeyInHeader, Name: "Webhook-Id"}}}
	for _, err := range []error{
		errors.New("the handler failed"),
		&idem.PhaseError{Operation: "receiveEvent", Point: "stored", Err: errors.New("the second phase failed")},
		&idem.PhaseError{Operation: "receiveEvent", Err: errors.New("the first phase failed")},
	} {
		r := httptest.NewRequest("POST", "/webhooks", strings.NewReader(`{}`))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Webhook-Id", "evt_1")
		if !g.Pass(httptest.NewRecorder(), r) {
			t.Fatal("the gate refused the request")
		}
		w := httptest.NewRecorder()
		idem.ErrorHandlers{Logger: slog.New(slog.DiscardHandler)}.ResponseError(w, r, err)
		if body := w.Body.String(); w.Code != http.StatusInternalServerError || !strings.Contains(body, "Webhook-Id") || strings.Contains(body, idem.HeaderKey) {
			t.Errorf("%v: %d %s, want a 500 naming the Webhook-Id and no %s", err, w.Code, body, idem.HeaderKey)
		}
		// A phased request's key is bound to it from its first step on:
		// the answer may not say nothing was stored for it.
		if pe := (*idem.PhaseError)(nil); errors.As(err, &pe) && pe.Point == "" && (!strings.Contains(w.Body.String(), "stays bound to this request") || strings.Contains(w.Body.String(), "Nothing was stored")) {
			t.Errorf("a first phase's failure: %s, want it to say the key stays bound to the request", w.Body)
		}
	}
}

// A JSON body that is not UTF-8 is refused with a 400 before it is
// decoded: encoding/json would read it as U+FFFD, and two requests that
// differ there would fingerprint alike. The gate refuses it when it
// validates (the body read whole); when the body streams to the decoder,
// its read fails, and RequestError answers the same 400. A body that is
// UTF-8 goes through either way.
func TestJSONBodyNotUTF8(t *testing.T) {
	latin1 := "{\"name\": \"caf\xe9\"}"
	for _, validate := range []bool{true, false} {
		g := &idem.Gate{Operation: "createOrder", Accept: []string{"application/json"}, JSON: []string{"application/json"}}
		validated := 0
		if validate {
			g.Validate = func(*http.Request, []byte) *idem.Problem { validated++; return nil }
		}
		for _, body := range []string{latin1, `{"name": "café"}`} {
			r := httptest.NewRequest("POST", "/orders", strings.NewReader(body))
			r.Header.Set("Content-Type", "application/json; charset=iso-8859-1")
			w := httptest.NewRecorder()
			if g.Pass(w, r) {
				var v any
				if err := json.NewDecoder(r.Body).Decode(&v); err != nil {
					(idem.ErrorHandlers{}).RequestError(w, r, fmt.Errorf("can't decode JSON body: %w", err))
				}
			}
			utf8 := body != latin1
			if refused := w.Code == http.StatusBadRequest && strings.Contains(w.Body.String(), "not valid UTF-8"); refused == utf8 {
				t.Errorf("validate %v, body %q: %d %s; want refused: %v", validate, body, w.Code, w.Body, !utf8)
			}
		}
		if validate && validated != 1 {
			t.Errorf("Validate ran %d times, want once: for the UTF-8 body only", validated)
		}
	}
}
