package idem_test

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/idemgen/idemgen/idem"
)

var stripeShape = &idem.ErrorShape{
	Envelope:    "error",
	Code:        "code",
	Detail:      "message",
	Fixed:       map[string]string{"type": "idempotency_error"},
	RetryHeader: "Stripe-Should-Retry",
}

// Each answer's retry hint: a retry with the same key is right where it
// may get another answer, and not for a mistake in the request or an
// answer a retry only repeats.
func TestProblemRetryable(t *testing.T) {
	for typ, want := range map[string]bool{
		idem.TypeMissingKey:           false,
		idem.TypeInvalidKey:           false,
		idem.TypeInvalidRequest:       false,
		idem.TypeInvalidScope:         false,
		idem.TypeBodyTooLarge:         false,
		idem.TypeUnsupportedMediaType: false,
		idem.TypeKeyReused:            false,
		idem.TypeKeyInUse:             true,
		idem.TypeStoreUnavailable:     true,
		idem.TypeStoreBusy:            true,
		idem.TypeInternal:             true,
		idem.TypeCommitFailed:         true,
		idem.TypeTransactionConflict:  true,
		idem.TypeLeaseOverrun:         true,
		idem.TypeStoreMisconfigured:   false,
		idem.TypeAttemptAbandoned:     false,
	} {
		status := map[string]int{
			idem.TypeMissingKey: 400, idem.TypeInvalidKey: 400, idem.TypeInvalidRequest: 400, idem.TypeInvalidScope: 400,
			idem.TypeBodyTooLarge: 413, idem.TypeUnsupportedMediaType: 415, idem.TypeKeyReused: 422, idem.TypeKeyInUse: 409,
			idem.TypeStoreUnavailable: 503, idem.TypeStoreBusy: 503,
		}[typ]
		if status == 0 {
			status = 500
		}
		p := &idem.Problem{Type: typ, Status: status}
		if got := p.Retryable(); got != want {
			t.Errorf("%s (%d): Retryable %v, want %v", p.Code(), status, got, want)
		}
	}
}

// ErrorShape renders a problem in the API's envelope, with its members in
// a fixed order, the retry header, and Retry-After; ProblemType reads the
// type back.
func TestErrorShapeRender(t *testing.T) {
	p := &idem.Problem{Type: idem.TypeKeyInUse, Title: "Idempotency-Key in use", Status: 409, Detail: `Retry "later".`, RetryAfter: 1500 * time.Millisecond}
	r := stripeShape.Render(p)
	want := `{"error":{"type":"idempotency_error","code":"idempotency-key-in-use","message":"Retry \"later\"."}}`
	if string(r.Body) != want {
		t.Errorf("body %s, want %s", r.Body, want)
	}
	if r.Status != 409 || r.Header.Get("Content-Type") != "application/json" || r.Header.Get("Retry-After") != "2" || r.Header.Get("Stripe-Should-Retry") != "true" {
		t.Errorf("answer %d %v", r.Status, r.Header)
	}
	if got := stripeShape.ProblemType(r.Header, r.Body); got != idem.TypeKeyInUse {
		t.Errorf("ProblemType %q, want %q", got, idem.TypeKeyInUse)
	}

	flat := &idem.ErrorShape{ContentType: "application/vnd.api+json", Type: "type", Title: "title", Status: "status", Detail: "detail", RetryMember: "retryable"}
	r = flat.Render(&idem.Problem{Type: idem.TypeKeyReused, Title: "Idempotency-Key reused", Status: 422, Detail: "d"})
	var got map[string]any
	if err := json.Unmarshal(r.Body, &got); err != nil {
		t.Fatal(err)
	}
	if got["type"] != idem.TypeKeyReused || got["title"] != "Idempotency-Key reused" || got["status"] != 422.0 || got["detail"] != "d" || got["retryable"] != false || len(got) != 5 {
		t.Errorf("flat shape: %s", r.Body)
	}
	if r.Header.Get("Content-Type") != "application/vnd.api+json" || flat.ProblemType(r.Header, r.Body) != idem.TypeKeyReused {
		t.Errorf("flat shape: %v, type %q", r.Header, flat.ProblemType(r.Header, r.Body))
	}
	if idem.Render(nil, p).Header.Get("Content-Type") != idem.ContentTypeProblem {
		t.Error("Render with no shape is not problem+json")
	}
}

// The gate answers in the shape: a missing declared key, a media type the
// operation does not take and a body over the limit, before the handler.
func TestGateAnswersInShape(t *testing.T) {
	gate := &idem.Gate{Operation: "createCharge", KeyRequired: true, Accept: []string{"application/json"}, JSON: []string{"application/json"}, Limit: 10, Problems: stripeShape}
	for _, tc := range []struct {
		name, key, contentType, body string
		status                       int
		typ                          string
	}{
		{"no key", "", "application/json", "{}", 400, idem.TypeMissingKey},
		{"media type", "k", "text/plain", "x", 415, idem.TypeUnsupportedMediaType},
		{"too large", "k", "application/json", strings.Repeat(" ", 11), 413, idem.TypeBodyTooLarge},
	} {
		req := httptest.NewRequest("POST", "/v1/charges", strings.NewReader(tc.body))
		req.Header.Set("Content-Type", tc.contentType)
		if tc.key != "" {
			req.Header.Set(idem.HeaderKey, tc.key)
		}
		rec := httptest.NewRecorder()
		if gate.Pass(rec, req) {
			t.Errorf("%s: passed", tc.name)
			continue
		}
		if rec.Code != tc.status || stripeShape.ProblemType(rec.Header(), rec.Body.Bytes()) != tc.typ || rec.Header().Get("Stripe-Should-Retry") != "false" {
			t.Errorf("%s: %d %v %s; want %d %s", tc.name, rec.Code, rec.Header(), rec.Body, tc.status, tc.typ)
		}
	}
	req := httptest.NewRequest("POST", "/v1/charges", strings.NewReader("{}"))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(idem.HeaderKey, "k")
	if !gate.Pass(httptest.NewRecorder(), req) {
		t.Error("a valid request did not pass")
	}

	// A declared key, optional, sent twice: the protocol's invalid-key
	// problem, not the binder's; sent not at all, through to the handler.
	optional := &idem.Gate{Operation: "createCharge", KeyDeclared: true, Problems: stripeShape}
	req = httptest.NewRequest("POST", "/v1/charges", nil)
	req.Header.Add(idem.HeaderKey, "a")
	req.Header.Add(idem.HeaderKey, "b")
	rec := httptest.NewRecorder()
	if optional.Pass(rec, req) || rec.Code != 400 || stripeShape.ProblemType(rec.Header(), rec.Body.Bytes()) != idem.TypeInvalidKey {
		t.Errorf("a declared key sent twice: %d %s; want 400 %s", rec.Code, rec.Body, idem.TypeInvalidKey)
	}
	if !optional.Pass(httptest.NewRecorder(), httptest.NewRequest("POST", "/v1/charges", nil)) {
		t.Error("an optional declared key left out did not pass")
	}
}
