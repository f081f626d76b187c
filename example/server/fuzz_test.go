package server_test

// FuzzGeneratedHandler sends arbitrary requests to the generated handler,
// behind the example's account check, over the in-memory key store, so it
// needs no database, and checks the protocol's invariants and the
// account check's on every answer.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/http/httptest"
	"path"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idemgen/idemgen/example/gen"
	"github.com/idemgen/idemgen/example/server"
	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/memstore"
)

// Bits of the fuzz input's flags: what a string argument alone cannot say.
const (
	fuzzNoKey         = 1 << iota // send no Idempotency-Key header
	fuzzNoAccount                 // send no X-Account-Id header
	fuzzNoContentType             // send no Content-Type header
	fuzzTwoKeys                   // send the Idempotency-Key header twice
	fuzzChunked                   // send the body without a length
	fuzzRaiseLimit                // raise MaxBodyBytes, so that deep JSON reaches the decoder
	fuzzNoToken                   // send no Authorization header
	fuzzOtherToken                // send the token of another account than the one sent
)

// fuzzSecret is the secret of the fuzzed handler's tokens. A request
// carries the token of the account it sends, or of the account string
// when it sends none, unless its flags say otherwise.
const fuzzSecret = "fuzz-secret"

const (
	fuzzLimit = 4096
	// paymentMaxBody is createPayment's max-body in openapi.yaml.
	paymentMaxBody = 64 << 10
	fuzzBigLimit   = 1 << 20
)

// fuzzStatuses are the statuses each route may answer: the spec's for its
// operation plus the protocol's, and the account check's 401 and 403,
// which the spec does not list. The fake service never fails, so 500 is
// never right.
var fuzzStatuses = func() map[string][]int {
	protocol := []int{400, 401, 403, 409, 413, 415, 422, 503}
	m := map[string][]int{
		"POST /orders":          {201, 400},
		"GET /orders":           {200},
		"GET /orders/{id}":      {200, 404},
		"POST /baseline/orders": {201, 400},
		"POST /payments":        {201, 400, 402, 404},
	}
	for k, v := range m {
		m[k] = append(v, protocol...)
	}
	return m
}()

// fuzzAnnotated maps the routes of annotated operations to their names.
var fuzzAnnotated = map[string]string{
	"POST /orders":   "createOrder",
	"POST /payments": "createPayment",
}

func FuzzGeneratedHandler(f *testing.F) {
	const (
		order   = `{"amount_cents": 1250, "currency": "EUR", "customer_id": "cus_1"}`
		payment = `{"order_id": "ord_1", "amount_cents": 1250}`
		ctJSON  = "application/json"
	)
	add := func(method, target, key, account, contentType string, flags uint8, body string) {
		f.Add(method, target, key, account, contentType, flags, []byte(body))
	}
	add("POST", "/orders", "k1", "acct_1", ctJSON, 0, order)
	add("POST", "/payments", "p1", "acct_1", ctJSON, 0, payment)
	add("POST", "/orders", "k1", "acct_1", ctJSON, 0, `{"amount_cents": 0, "currency": "EUR", "customer_id": "c"}`)
	add("POST", "/payments", "p1", "acct_1", ctJSON, 0, `{"order_id": "ord_1", "amount_cents": -5}`)
	add("POST", "/baseline/orders", "", "acct_1", ctJSON, fuzzNoKey, order)

	// Keys.
	add("POST", "/orders", "", "acct_1", ctJSON, fuzzNoKey, order)
	add("POST", "/orders", "", "acct_1", ctJSON, 0, order)
	add("POST", "/payments", "k1", "acct_1", ctJSON, fuzzTwoKeys, payment)
	add("POST", "/orders", strings.Repeat("k", 300), "acct_1", ctJSON, 0, order)
	add("POST", "/orders", strings.Repeat("k", 255), "acct_1", ctJSON, 0, order)
	add("POST", "/orders", "k\xff\xfe\x80", "acct_1", ctJSON, 0, order)
	add("POST", "/payments", "clé", "acct_1", ctJSON, 0, payment)
	add("POST", "/orders", `"a \"quoted\" key\\"`, "acct_1", ctJSON, 0, order)
	add("POST", "/payments", `"unterminated`, "acct_1", ctJSON, 0, payment)
	add("POST", "/orders", `""`, "acct_1", ctJSON, 0, order)
	add("POST", "/orders", " \t k1 \t ", "acct_1", ctJSON, 0, order)

	// Accounts and their tokens. Without an account the request carries
	// the token of the empty one: well formed, and no account's.
	add("POST", "/orders", "k1", "", ctJSON, fuzzNoAccount, order)
	add("POST", "/payments", "k1", "", ctJSON, 0, payment)
	add("GET", "/orders?customer_id=cus_1", "", "", "", fuzzNoKey|fuzzNoContentType, "")
	add("GET", "/orders/ord_1", "", "acct_1", "", fuzzNoAccount|fuzzNoKey|fuzzNoContentType, "")
	add("POST", "/orders", "k1", "acct_1", ctJSON, fuzzNoToken, order)
	add("POST", "/orders", "k1", "acct_1", ctJSON, fuzzOtherToken, order)
	add("POST", "/payments", "p1", "acct_1", ctJSON, fuzzOtherToken, payment)
	add("POST", "/payments", "p1", "acct_1", ctJSON, fuzzNoToken, `{"order_id": "ord_1", "amount_cents": -5}`)
	add("POST", "/orders", "clé", "acct_1", ctJSON, fuzzOtherToken, order)
	add("POST", "/baseline/orders", "", "acct_1", ctJSON, fuzzNoKey|fuzzOtherToken, order)
	add("GET", "/orders/ord_1", "", "acct_1", "", fuzzNoKey|fuzzNoContentType|fuzzOtherToken, "")
	add("GET", "/orders?customer_id=cus_1", "", "acct_1", "", fuzzNoKey|fuzzNoContentType|fuzzNoToken, "")

	// Bodies.
	add("POST", "/orders", "k1", "acct_1", ctJSON, 0, "{\"amount_cents\": 1, \"currency\": \"\xff\xfe\", \"customer_id\": \"c\x80\"}")
	add("POST", "/payments", "k1", "acct_1", ctJSON, 0, "{\"order_id\": \"\xed\xa0\x80\", \"amount_cents\": 1}\xff")
	add("POST", "/orders", "k1", "acct_1", ctJSON, 0, `{"amount_cents": 1, "currency": "EUR", "customer_id": "c", "amount_cents": 2}`)
	add("POST", "/orders", "k1", "acct_1", ctJSON, 0, `{"amount_cents": `)
	add("POST", "/orders", "k1", "acct_1", ctJSON, 0, `{"amount_cents": 12.5, "currency": "EUR", "customer_id": "c"}`)
	add("POST", "/payments", "k1", "acct_1", ctJSON, 0, `null`)
	add("POST", "/payments", "k1", "acct_1", ctJSON, 0, ``)
	over := `{"amount_cents": 1, "currency": "EUR", "customer_id": "` + strings.Repeat("c", fuzzLimit) + `"}`
	add("POST", "/orders", "k1", "acct_1", ctJSON, 0, over)
	add("POST", "/payments", "k1", "acct_1", ctJSON, fuzzChunked, `{"order_id": "`+strings.Repeat("o", fuzzLimit)+`"}`)
	add("POST", "/orders", "k1", "acct_1", ctJSON, fuzzRaiseLimit, over)
	// Exactly at the limit: the JSON value, then spaces up to it.
	add("POST", "/orders", "k1", "acct_1", ctJSON, 0, order+strings.Repeat(" ", fuzzLimit-len(order)))
	add("POST", "/orders", "k1", "acct_1", ctJSON, fuzzRaiseLimit, strings.Repeat("[", 10000)+strings.Repeat("]", 10000))
	add("POST", "/payments", "k1", "acct_1", ctJSON, fuzzRaiseLimit, strings.Repeat(`{"a":`, 10000)+"1"+strings.Repeat("}", 10000))
	add("POST", "/orders", "k1", "acct_1", ctJSON, 0, strings.Repeat("[", 10000))
	add("POST", "/orders", "k1", "acct_1", ctJSON, fuzzRaiseLimit, strings.Repeat("[", 100000))

	// Content types.
	add("POST", "/orders", "k1", "acct_1", "text/plain", 0, order)
	add("POST", "/payments", "k1", "acct_1", "", fuzzNoContentType, payment)
	add("POST", "/orders", "k1", "acct_1", "multipart/form-data; boundary=x", 0, "--x\r\n\r\n--x--\r\n")
	add("POST", "/orders", "k1", "acct_1", "application/json; charset=\xff", 0, order)

	// Methods and paths.
	add("GET", "/orders?customer_id=cus_1", "", "acct_1", "", fuzzNoKey|fuzzNoContentType, "")
	add("GET", "/orders", "", "acct_1", "", fuzzNoKey|fuzzNoContentType, "")
	add("GET", "/orders/ord_1", "k1", "acct_1", "", fuzzNoContentType, "")
	add("GET", "/orders/nope%2Fnope", "", "acct_1", "", fuzzNoKey, order)
	add("PUT", "/orders", "k1", "acct_1", ctJSON, 0, order)
	add("DELETE", "/payments", "k1", "acct_1", "", 0, "")
	add("PATCH", "/orders/ord_1", "k1", "acct_1", ctJSON, 0, order)
	add("FROB", "/orders", "k1", "acct_1", ctJSON, 0, order)
	add("OPTIONS", "*", "", "", "", fuzzNoKey|fuzzNoAccount|fuzzNoContentType, "")
	add("POST", "/nope", "k1", "acct_1", ctJSON, 0, order)
	add("POST", "/payments/", "k1", "acct_1", ctJSON, 0, payment)
	add("POST", "/orders/../payments", "k1", "acct_1", ctJSON, 0, payment)
	add("POST", "/orders?x=%zz", "k1", "acct_1", ctJSON, 0, order)
	add("POST", "http://other.example/orders", "k1", "acct_1", ctJSON, 0, order)

	// Control characters, which the map of http.Header holds even where
	// the wire cannot carry them.
	add("POST", "/orders", "k\r\n1", "acct_1", ctJSON, 0, order)
	add("POST", "/orders", "k\x00", "acct_1", ctJSON, 0, order)
	add("POST", "/payments", "k1", "acct\n1", ctJSON, 0, payment)
	add("POST", "/orders", "k1", "\t acct \x7f", ctJSON, 0, order)
	add("POST", "/orders", "k1", "acct_1", "application/json\r\nX-Evil: 1", 0, order)

	f.Fuzz(func(t *testing.T, method, target, key, account, contentType string, flags uint8, body []byte) {
		// The request line goes through the server's own parser, so that
		// the handler sees only methods and targets a server accepts.
		if strings.ContainsAny(method+target, " \r\n") {
			t.Skip("not one request line")
		}
		line := method + " " + target + " HTTP/1.1\r\nHost: example.com\r\n\r\n"
		if _, err := http.ReadRequest(bufio.NewReader(strings.NewReader(line))); err != nil {
			t.Skip("a server rejects this request line")
		}
		own := "Bearer " + server.Token(fuzzSecret, account)
		auth := own
		switch {
		case flags&fuzzNoToken != 0:
			auth = ""
		case flags&fuzzOtherToken != 0:
			auth = "Bearer " + server.Token(fuzzSecret, "other:"+account)
		}
		newRequest := func(auth string) *http.Request {
			r, err := http.ReadRequest(bufio.NewReader(strings.NewReader(line)))
			if err != nil {
				t.Fatal(err)
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			r.ContentLength = int64(len(body))
			if flags&fuzzChunked != 0 {
				r.ContentLength = -1
			}
			if flags&fuzzNoKey == 0 {
				r.Header[idem.HeaderKey] = []string{key}
				if flags&fuzzTwoKeys != 0 {
					r.Header[idem.HeaderKey] = []string{key, key}
				}
			}
			if flags&fuzzNoAccount == 0 {
				r.Header["X-Account-Id"] = []string{account}
			}
			if flags&fuzzNoContentType == 0 {
				r.Header["Content-Type"] = []string{contentType}
			}
			if auth != "" {
				r.Header["Authorization"] = []string{auth}
			}
			return r
		}
		limit := int64(fuzzLimit)
		if flags&fuzzRaiseLimit != 0 {
			limit = fuzzBigLimit
		}
		input := fmt.Sprintf("%s %q key=%q account=%q content-type=%q flags=%06b body(%d)=%q",
			method, target, key, account, contentType, flags, len(body), abbrev(body))

		store := memstore.New(memstore.Options{})
		svc := &fakeService{store: store, runs: map[idem.ID]int{}}
		h := gen.NewIdempotentHandler(svc, store, gen.IdempotentHandlerOptions{
			Options:           idem.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))},
			MaxBodyBytes:      limit,
			StrictMiddlewares: []gen.StrictMiddlewareFunc{server.Authenticate(fuzzSecret)},
		})

		if auth != own {
			// The account's own request first, so that its key holds the
			// account's answer: what follows, without its token, must
			// never get it.
			serveFuzz(t, h, newRequest(own), input)
		}
		// The same request twice: the second is a retry.
		var first fuzzAnswer
		for try := range 2 {
			r := newRequest(auth)
			before := svc.calls
			svc.attempts = nil
			a := serveFuzz(t, h, r, input)
			a.ran = svc.calls > before
			a.attempts = svc.attempts
			for _, v := range svc.violations {
				t.Errorf("%s\n  %s", v, input)
			}
			svc.violations = nil
			checkFuzzAnswer(t, r, a, limit, body, input)
			if try == 0 {
				first = a
				if a.header.Get(idem.HeaderReplayed) != "" {
					t.Errorf("a fresh store replayed: %d %s\n  %s", a.status, a.body, input)
				}
				continue
			}
			checkFuzzRetry(t, first, a, input)
		}
		for id, n := range svc.runs {
			if n > 1 {
				t.Errorf("%+v ran %d times\n  %s", id, n, input)
			}
		}
	})
}

// fuzzAnswer is what the handler answered one request.
type fuzzAnswer struct {
	route  string // the matched pattern; "" when the router answered
	status int
	header http.Header
	body   []byte
	ran    bool // the service ran for this request
	// attempts are the IDs the annotated methods ran under.
	attempts []idem.ID
}

// serveFuzz serves r and turns a panic into a failure that names the input.
func serveFuzz(t *testing.T, h http.Handler, r *http.Request, input string) (a fuzzAnswer) {
	t.Helper()
	defer func() {
		if p := recover(); p != nil {
			t.Fatalf("panic: %v\n%s\n  %s", p, debug.Stack(), input)
		}
	}()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	// ServeMux records the pattern it matched in the request it was given.
	return fuzzAnswer{route: r.Pattern, status: w.Code, header: w.Header(), body: w.Body.Bytes()}
}

// isJSON reports a Content-Type of application/json as RFC 9110 reads it:
// type and subtype case-insensitive, parameters apart (and malformed ones
// ignored).
func isJSON(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return (err == nil || errors.Is(err, mime.ErrInvalidMediaParameter)) && mt == "application/json"
}

func checkFuzzAnswer(t *testing.T, r *http.Request, a fuzzAnswer, limit int64, body []byte, input string) {
	t.Helper()
	if slices.Contains([]int{301, 307, 308}, a.status) {
		// ServeMux redirects a path that is not clean to the clean one,
		// even when the clean one has a route; nothing else redirects.
		if a.ran || a.header.Get("Location") == "" || path.Clean(r.URL.Path) == r.URL.Path {
			t.Errorf("redirect %d to %q (ran %v)\n  %s", a.status, a.header.Get("Location"), a.ran, input)
		}
		return
	}
	if a.route == "" {
		// The router's own answers: no route for the path or the method,
		// or a 400 for the target "*".
		if !slices.Contains([]int{404, 405}, a.status) && !(r.RequestURI == "*" && a.status == 400) {
			t.Errorf("router answered %d %s\n  %s", a.status, a.body, input)
		}
		if a.ran {
			t.Errorf("the service ran without a route\n  %s", input)
		}
		return
	}
	if !slices.Contains(fuzzStatuses[a.route], a.status) {
		t.Errorf("%s answered %d, which the spec does not document: %s\n  %s", a.route, a.status, a.body, input)
	}
	if a.status >= 400 {
		checkFuzzProblem(t, a, input)
	}
	authorized := checkFuzzAuth(t, r, a, input)
	op, annotated := fuzzAnnotated[a.route]
	if !annotated {
		return
	}
	key, keyOK := specKey(r.Header.Values(idem.HeaderKey))
	if !keyOK && a.ran {
		t.Errorf("%s ran with a missing or invalid key\n  %s", op, input)
	}
	// A body of a media type the operation does not declare is a 415,
	// before anything else of the request is looked at; any other is not.
	undeclared := r.ContentLength != 0 && !isJSON(r.Header.Get("Content-Type"))
	if undeclared != (a.status == 415) {
		t.Errorf("%s answered %d %s to a body with Content-Type %q\n  %s", op, a.status, a.body, r.Header.Get("Content-Type"), input)
	}
	if undeclared && a.ran {
		t.Errorf("%s ran a body with Content-Type %q\n  %s", op, r.Header.Get("Content-Type"), input)
	}
	// The route gate refuses a missing or repeated key before the account
	// check, and the protocol an invalid one after it.
	if !keyOK && a.status != 400 && a.status != 413 && a.status != 415 && (authorized || a.status != 401 && a.status != 403) {
		t.Errorf("%s answered a missing or invalid key with %d %s\n  %s", op, a.status, a.body, input)
	}
	if keyOK && a.ran && a.status >= 200 && a.status < 300 && !strings.HasPrefix(a.header.Get("Content-Type"), "application/json") {
		t.Errorf("%s answered %d with Content-Type %q\n  %s", op, a.status, a.header.Get("Content-Type"), input)
	}
	for _, id := range a.attempts {
		if want := (idem.ID{Scope: r.Header.Get("X-Account-Id"), Operation: op, Key: key}); id != want {
			t.Errorf("%s ran as %+v, want %+v\n  %s", op, id, want, input)
		}
	}
	if op == "createPayment" {
		// Its annotation's max-body (openapi.yaml) is its bound, whatever
		// the option says.
		limit = paymentMaxBody
	}
	if int64(len(body)) > limit {
		if a.ran {
			t.Errorf("%s ran a body of %d bytes, over the limit of %d\n  %s", op, len(body), limit, input)
		}
		// A 400 is right too when the request is bad before the decoder
		// reaches the limit: in its parameters or its first bytes; a 401 or
		// 403 when the body's end is found past the account check.
		if a.status != 413 && a.status != 400 && a.status != 415 && (authorized || a.status != 401 && a.status != 403) {
			t.Errorf("%s answered a body over the limit with %d %s\n  %s", op, a.status, a.body, input)
		}
	}
	// Nothing runs concurrently and every request is sent twice at most:
	// no key is ever in use, reused for another request or unreachable.
	if a.status == 409 || a.status == 422 || a.status == 503 {
		t.Errorf("%s answered %d %s\n  %s", op, a.status, a.body, input)
	}
}

// checkFuzzAuth checks the account check's part of an answer from a route,
// and reports whether r carried the token of the one account it names. A
// request that did not is never run, never answered 2xx and never a
// replay, whatever its account, key and body; one that did is never
// refused by the check. A 401 is for a request without a token (the
// others carry one of the right form), a 403 for one with the token of
// another account than the one it names, or of none.
func checkFuzzAuth(t *testing.T, r *http.Request, a fuzzAnswer, input string) bool {
	t.Helper()
	accounts := r.Header.Values("X-Account-Id")
	authorized := len(accounts) == 1 && accounts[0] != "" &&
		r.Header.Get("Authorization") == "Bearer "+server.Token(fuzzSecret, accounts[0])
	if authorized {
		if a.status == 401 || a.status == 403 {
			t.Errorf("%s refused its account's token: %d %s\n  %s", a.route, a.status, a.body, input)
		}
		return true
	}
	if a.ran || a.status < 400 || a.header.Get(idem.HeaderReplayed) != "" {
		t.Errorf("%s served a request without its account's token: %d %v %s (ran %v)\n  %s", a.route, a.status, a.header, a.body, a.ran, input)
	}
	if a.status == 401 && r.Header.Get("Authorization") != "" {
		t.Errorf("%s answered a bearer token of the right form with 401: %s\n  %s", a.route, a.body, input)
	}
	return false
}

// checkFuzzProblem checks that an error answer is a problem with a detail.
func checkFuzzProblem(t *testing.T, a fuzzAnswer, input string) {
	t.Helper()
	if ct := a.header.Get("Content-Type"); ct != idem.ContentTypeProblem {
		t.Errorf("%s answered %d with Content-Type %q: %s\n  %s", a.route, a.status, ct, a.body, input)
		return
	}
	var p idem.Problem
	if err := json.Unmarshal(a.body, &p); err != nil {
		t.Errorf("%s answered %d with a problem that does not decode: %v: %s\n  %s", a.route, a.status, err, a.body, input)
		return
	}
	if p.Status != a.status || p.Type == "" || p.Detail == "" {
		t.Errorf("%s answered %d with problem %s\n  %s", a.route, a.status, a.body, input)
	}
}

// checkFuzzRetry checks the second of two identical requests: a replay of
// what the service answered the first, or the first answer again.
func checkFuzzRetry(t *testing.T, first, second fuzzAnswer, input string) {
	t.Helper()
	_, annotated := fuzzAnnotated[first.route]
	if !annotated {
		return
	}
	if !first.ran {
		if second.ran || second.status != first.status {
			t.Errorf("retry of an answer the service did not give: first %d, then %d (ran %v)\n  %s", first.status, second.status, second.ran, input)
		}
		return
	}
	if second.ran {
		t.Errorf("%s ran again on a retry\n  %s", first.route, input)
	}
	if second.header.Get(idem.HeaderReplayed) != "true" {
		t.Errorf("retry is no replay: %d %v %s\n  %s", second.status, second.header, second.body, input)
	}
	if second.status != first.status || !bytes.Equal(second.body, first.body) {
		t.Errorf("replay %d %q differs from the first answer %d %q\n  %s", second.status, second.body, first.status, first.body, input)
	}
	for _, h := range []string{"Content-Type", "Location"} {
		if second.header.Get(h) != first.header.Get(h) {
			t.Errorf("replayed %s = %q, want %q\n  %s", h, second.header.Get(h), first.header.Get(h), input)
		}
	}
}

// specKey validates an Idempotency-Key header as DESIGN.md describes it,
// independently of idem.ParseKey, so that the two check each other: sent
// once; 1 to 255 printable ASCII characters; an RFC 8941 sf-string is
// unquoted first.
func specKey(values []string) (string, bool) {
	if len(values) != 1 {
		return "", false
	}
	v := strings.Trim(values[0], " \t") // optional whitespace around a header value
	if strings.HasPrefix(v, `"`) {
		if len(v) < 2 || !strings.HasSuffix(v, `"`) {
			return "", false
		}
		var b strings.Builder
		escaped := false
		for _, c := range []byte(v[1 : len(v)-1]) {
			switch {
			case escaped && c != '"' && c != '\\':
				return "", false
			case escaped:
				escaped = false
				b.WriteByte(c)
			case c == '\\':
				escaped = true
			case c == '"':
				return "", false
			default:
				b.WriteByte(c)
			}
		}
		if escaped {
			return "", false
		}
		v = b.String()
	}
	if len(v) < 1 || len(v) > 255 {
		return "", false
	}
	for _, c := range []byte(v) {
		if c < 0x20 || c > 0x7e {
			return "", false
		}
	}
	return v, true
}

func abbrev(b []byte) []byte {
	if len(b) > 200 {
		return append(slices.Clip(b[:200]), "..."...)
	}
	return b
}

// fakeService answers every operation without failing, and checks inside
// each annotated method that the request's key is claimed.
type fakeService struct {
	store      *memstore.Store
	calls      int             // methods run, phases included
	runs       map[idem.ID]int // first runs of an annotated operation, per key
	attempts   []idem.ID       // the IDs of the annotated methods run, for the current request
	violations []string
}

var _ gen.IdempotentServer[memstore.NoTx] = (*fakeService)(nil)

var fuzzCreated = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

// claimed records a violation unless at holds its key in the store: no
// handler may run unclaimed, and both annotated operations require a key.
func (s *fakeService) claimed(ctx context.Context, at *idem.Attempt[memstore.NoTx], op string) {
	s.calls++
	s.attempts = append(s.attempts, idem.ID{Scope: at.Scope(), Operation: op, Key: at.Key()})
	if at.Key() == "" {
		s.violations = append(s.violations, op+" ran without a key")
		return
	}
	id := idem.ID{Scope: at.Scope(), Operation: op, Key: at.Key()}
	rec, err := s.store.Lookup(ctx, id)
	if err != nil || !rec.Held {
		s.violations = append(s.violations, fmt.Sprintf("%s ran while its key %+v was %+v (%v), not held", op, id, rec, err))
	}
	if at.Scope() == "" && op != "receivePaymentEvent" { // the webhook's keys are unscoped (scope: none)
		s.violations = append(s.violations, op+" ran without a scope")
	}
	if at.RecoveryPoint() == "" {
		s.runs[id]++
	}
}

func (s *fakeService) CreateOrder(ctx context.Context, at *idem.Attempt[memstore.NoTx], req gen.CreateOrderRequestObject) (gen.CreateOrderResponseObject, error) {
	s.claimed(ctx, at, "createOrder")
	if req.Body.AmountCents <= 0 {
		return gen.CreateOrder400ApplicationProblemPlusJSONResponse(invalidAmount(req.Body.AmountCents)), nil
	}
	o := gen.Order{Id: "ord_1", AccountId: req.Params.XAccountId, AmountCents: req.Body.AmountCents, Currency: req.Body.Currency, CustomerId: req.Body.CustomerId, CreatedAt: fuzzCreated}
	return gen.CreateOrder201JSONResponse{Body: o, Headers: gen.CreateOrder201ResponseHeaders{Location: "/orders/" + o.Id}}, nil
}

func (s *fakeService) CreateOrderBaseline(_ context.Context, req gen.CreateOrderBaselineRequestObject) (gen.CreateOrderBaselineResponseObject, error) {
	s.calls++
	o := gen.Order{Id: "ord_1", AccountId: req.Params.XAccountId, AmountCents: req.Body.AmountCents, Currency: req.Body.Currency, CustomerId: req.Body.CustomerId, CreatedAt: fuzzCreated}
	return gen.CreateOrderBaseline201JSONResponse{Body: o, Headers: gen.CreateOrderBaseline201ResponseHeaders{Location: "/orders/" + o.Id}}, nil
}

func (s *fakeService) CreateExport(context.Context, *idem.Attempt[memstore.NoTx], gen.CreateExportRequestObject) (gen.CreateExportResponseObject, error) {
	s.calls++
	return gen.CreateExport201JSONResponse{Id: "exp_1", Csv: "id\n"}, nil
}

func (s *fakeService) GetOrder(_ context.Context, req gen.GetOrderRequestObject) (gen.GetOrderResponseObject, error) {
	s.calls++
	if req.Id != "ord_1" {
		detail := "No order " + req.Id + " in this account."
		return gen.GetOrder404ApplicationProblemPlusJSONResponse{Type: "https://example.com/problems/no-order", Title: "No such order", Status: 404, Detail: &detail}, nil
	}
	return gen.GetOrder200JSONResponse{Id: "ord_1", AccountId: req.Params.XAccountId, AmountCents: 1250, Currency: "EUR", CustomerId: "cus_1", CreatedAt: fuzzCreated}, nil
}

func (s *fakeService) ListOrders(context.Context, gen.ListOrdersRequestObject) (gen.ListOrdersResponseObject, error) {
	s.calls++
	return gen.ListOrders200JSONResponse{Orders: []gen.Order{}}, nil
}

func (s *fakeService) CreatePayment(ctx context.Context, at *idem.Attempt[memstore.NoTx], req gen.CreatePaymentRequestObject) (gen.CreatePaymentStep, error) {
	s.claimed(ctx, at, "createPayment")
	if req.Body.AmountCents <= 0 {
		// A typed 4xx from a phase is stored and replayed like a success.
		return gen.CreatePaymentRespond(gen.CreatePayment400ApplicationProblemPlusJSONResponse(invalidAmount(req.Body.AmountCents))), nil
	}
	return gen.CreatePaymentNext(gen.CreatePaymentPaymentCreated), nil
}

func (s *fakeService) CreatePaymentAfterPaymentCreated(ctx context.Context, at *idem.Attempt[memstore.NoTx], _ gen.CreatePaymentRequestObject) (gen.CreatePaymentStep, error) {
	s.claimed(ctx, at, "createPayment")
	return gen.CreatePaymentNext(gen.CreatePaymentChargeCreated), nil
}

func (s *fakeService) CreatePaymentAfterChargeCreated(ctx context.Context, at *idem.Attempt[memstore.NoTx], req gen.CreatePaymentRequestObject) (gen.CreatePaymentResponseObject, error) {
	s.claimed(ctx, at, "createPayment")
	p := gen.Payment{Id: "pay_1", OrderId: req.Body.OrderId, AmountCents: req.Body.AmountCents, ChargeId: "ch_1", Status: "succeeded"}
	return gen.CreatePayment201JSONResponse{Body: p, Headers: gen.CreatePayment201ResponseHeaders{Location: "/payments/" + p.Id}}, nil
}

func (s *fakeService) ImportOrders(ctx context.Context, at *idem.Attempt[memstore.NoTx], req gen.ImportOrdersRequestObject) (gen.ImportOrdersResponseObject, error) {
	s.claimed(ctx, at, "importOrders")
	return gen.ImportOrders201JSONResponse{PoNumber: req.Body.PoNumber, Orders: []gen.Order{}}, nil
}

func (s *fakeService) ReceivePaymentEvent(ctx context.Context, at *idem.Attempt[memstore.NoTx], req gen.ReceivePaymentEventRequestObject) (gen.ReceivePaymentEventResponseObject, error) {
	s.claimed(ctx, at, "receivePaymentEvent")
	return gen.ReceivePaymentEvent200JSONResponse{Type: req.Body.Type}, nil
}

func invalidAmount(amount int64) gen.Problem {
	detail := fmt.Sprintf("amount_cents must be positive, got %d", amount)
	return gen.Problem{Type: "https://example.com/problems/invalid-amount", Title: "Invalid amount", Status: 400, Detail: &detail}
}
