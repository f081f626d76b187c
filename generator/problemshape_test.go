package generator_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/generator"
)

// stripeStyleBinary is the test binary of testdata/stripestyle, whose
// errors are {"error": {"type", "code", "message"}}, with, in package
// client, oapi-codegen's client of its augmented spec: what the API's own
// SDK would be generated from.
func stripeStyleBinary(t *testing.T) string {
	return buildTestBinary(t, "stripestyle", func(t *testing.T) string {
		cfg := loadConfig(t, filepath.Join("testdata", "stripestyle", "idemgen.yaml"))
		res := generate(t, cfg)
		client, err := generator.ClientCode(augmented(t, res, cfg.Output.Spec), "client")
		if err != nil {
			t.Fatalf("client from the augmented spec: %v", err)
		}
		pkg := writeGoPackage(t, res, nil)
		writeFile(t, filepath.Join(pkg, "client", "client.gen.go"), client)
		test := strings.ReplaceAll(stripeStyleTest, "CLIENT", "github.com/idemgen/idemgen/generator/"+strings.TrimPrefix(pkg, "./")+"/client")
		writeFile(t, filepath.Join(pkg, "shape_test.go"), []byte(test))
		return pkg
	})
}

// Every answer the layer gives itself (the 400 kinds, 409, 413, 415, 422,
// 500, 503) reaches a Stripe-style API's client in the API's own error
// envelope, decoded by the client generated from the augmented spec, with
// Stripe-Should-Retry saying whether a retry with the same key is right.
func TestProblemShape(t *testing.T) {
	t.Parallel()
	runTestBinary(t, stripeStyleBinary(t), "^TestShape$", "")
}

// A request without the Idempotency-Key that the operation declares as a
// required header parameter gets the layer's missing-key problem, the
// same as an operation that does not declare it, not the binder's
// generic refusal of a missing parameter.
func TestMissingDeclaredKeyProblem(t *testing.T) {
	t.Parallel()
	runTestBinary(t, stripeStyleBinary(t), "^TestMissingDeclaredKey$", "")
}

const stripeStyleTest = `package stripestyle

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/idemclient"
	"github.com/idemgen/idemgen/idem/memstore"
	"github.com/idemgen/idemgen/idem/pgstore"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"CLIENT"
)

// service charges; a charge with amount 409 waits for release, so that a
// second request with its key meets it running.
type service[T any] struct {
	mu      sync.Mutex
	runs    int
	started chan struct{}
	release chan struct{}
}

func (s *service[T]) CreateCharge(ctx context.Context, at *idem.Attempt[T], req CreateChargeRequestObject) (CreateChargeResponseObject, error) {
	s.mu.Lock()
	s.runs++
	first := s.runs == 1
	s.mu.Unlock()
	switch {
	case req.Body.Amount == 500 && first:
		return nil, errors.New("the first run fails")
	case req.Body.Amount == 409:
		close(s.started)
		<-s.release
	case req.Body.Fail != nil && *req.Body.Fail:
		return nil, errors.New("the card network timed out")
	case req.Body.Declined != nil && *req.Body.Declined:
		var e CreateCharge400JSONResponse
		e.Error.Type, e.Error.Message = "card_error", "Your card was declined."
		return e, nil
	}
	return CreateCharge200JSONResponse{Id: "ch_1", Amount: req.Body.Amount}, nil
}

func (s *service[T]) CreateRefund(ctx context.Context, at *idem.Attempt[T], req CreateRefundRequestObject) (CreateRefundResponseObject, error) {
	return CreateRefund200JSONResponse{Id: "re_1", Amount: req.Body.Amount}, nil
}

func newService[T any]() *service[T] {
	return &service[T]{started: make(chan struct{}), release: make(chan struct{})}
}

var quiet = IdempotentHandlerOptions{Options: idem.Options{Logger: slog.New(slog.DiscardHandler)}}

// answer is one answer as the API's client decodes it.
type answer struct {
	status int
	retry  string // Stripe-Should-Retry
	err    *client.Error
	typ    string // the response's Content-Type
}

func send(t *testing.T, c *client.ClientWithResponses, key, contentType, body string) answer {
	t.Helper()
	editor := func(ctx context.Context, req *http.Request) error {
		if key == "" {
			req.Header.Del("Idempotency-Key") // as a client that forgot it
		}
		return nil
	}
	resp, err := c.CreateChargeWithBodyWithResponse(context.Background(), &client.CreateChargeParams{IdempotencyKey: key}, contentType, strings.NewReader(body), editor)
	if err != nil {
		t.Fatal(err)
	}
	a := answer{status: resp.StatusCode(), retry: resp.HTTPResponse.Header.Get("Stripe-Should-Retry"), typ: resp.HTTPResponse.Header.Get("Content-Type")}
	switch a.status {
	case 400:
		a.err = resp.JSON400
	case 409:
		a.err = resp.JSON409
	case 413:
		a.err = resp.JSON413
	case 415:
		a.err = resp.JSON415
	case 422:
		a.err = resp.JSON422
	case 500:
		a.err = resp.JSON500
	case 503:
		a.err = resp.JSON503
	}
	return a
}

func newClient(t *testing.T, h http.Handler) *client.ClientWithResponses {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	c, err := client.NewClientWithResponses(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestShape(t *testing.T) {
	svc := newService[memstore.NoTx]()
	c := newClient(t, NewIdempotentHandler(svc, memstore.New(memstore.Options{}), quiet))

	// The API's own error and the layer's decode alike.
	declined := send(t, c, "key-declined", "application/json", ` + "`" + `{"amount": 100, "declined": true}` + "`" + `)
	if declined.status != 400 || declined.err == nil || declined.err.Error.Type != "card_error" {
		t.Fatalf("the API's own 400: %+v", declined)
	}

	cases := []struct {
		name, key, contentType, body string
		status                       int
		code, retry                  string
	}{
		{"missing key", "", "application/json", ` + "`" + `{"amount": 100}` + "`" + `, 400, "missing-idempotency-key", "false"},
		{"invalid key", strings.Repeat("k", 256), "application/json", ` + "`" + `{"amount": 100}` + "`" + `, 400, "invalid-idempotency-key", "false"},
		{"invalid request", "key-invalid", "application/json", ` + "`" + `{"amount": "many"}` + "`" + `, 400, "invalid-request", "false"},
		{"schema broken", "key-schema", "application/json", ` + "`" + `{"declined": true}` + "`" + `, 400, "invalid-request", "false"},
		{"trailing data", "key-trailing", "application/json", ` + "`" + `{"amount": 1}{}` + "`" + `, 400, "invalid-request", "false"},
		{"too large", "key-large", "application/json", ` + "`" + `{"amount": 1, "pad": "` + "`" + ` + strings.Repeat("x", 2000) + ` + "`" + `"}` + "`" + `, 413, "body-too-large", "false"},
		{"media type", "key-media", "text/plain", "amount=1", 415, "unsupported-media-type", "false"},
		{"handler fails", "key-fails", "application/json", ` + "`" + `{"amount": 100, "fail": true}` + "`" + `, 500, "internal-error", "true"},
	}
	for _, tc := range cases {
		a := send(t, c, tc.key, tc.contentType, tc.body)
		checkAnswer(t, tc.name, a, tc.status, tc.code, tc.retry)
	}

	// 422: the key with another request.
	if a := send(t, c, "key-reused", "application/json", ` + "`" + `{"amount": 1}` + "`" + `); a.status != 200 {
		t.Fatalf("first request: %+v", a)
	}
	checkAnswer(t, "reused key", send(t, c, "key-reused", "application/json", ` + "`" + `{"amount": 2}` + "`" + `), 422, "idempotency-key-reused", "false")

	// 409: the key while its first request runs.
	done := make(chan answer)
	go func() { done <- send(t, c, "key-running", "application/json", ` + "`" + `{"amount": 409}` + "`" + `) }()
	<-svc.started
	checkAnswer(t, "key in use", send(t, c, "key-running", "application/json", ` + "`" + `{"amount": 409}` + "`" + `), 409, "idempotency-key-in-use", "true")
	close(svc.release)
	if a := <-done; a.status != 200 {
		t.Fatalf("the first request: %+v", a)
	}

	// The generated IdempotentClient retries as Stripe-Should-Retry says:
	// the failed first run (500, true) again with its key, the API's own
	// 400 (without the header) not.
	srv := httptest.NewServer(NewIdempotentHandler(newService[memstore.NoTx](), memstore.New(memstore.Options{}), quiet))
	defer srv.Close()
	api, err := NewClient(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	retrying := NewIdempotentClient(api, idemclient.Options{BaseDelay: time.Millisecond, MaxDelay: time.Millisecond})
	declinedToo := true
	for _, tc := range []struct {
		name             string
		body             CreateChargeJSONRequestBody
		status, attempts int
	}{
		{"a failed run", CreateChargeJSONRequestBody{Amount: 500}, 200, 2},
		{"the API's own 400", CreateChargeJSONRequestBody{Amount: 100, Declined: &declinedToo}, 400, 1},
	} {
		resp, call, err := retrying.CreateCharge(context.Background(), &CreateChargeParams{}, tc.body)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.status || call.Attempts != tc.attempts {
			t.Errorf("%s: %d after %d attempts, want %d after %d", tc.name, resp.StatusCode, call.Attempts, tc.status, tc.attempts)
		}
	}

	// 503: a store that cannot be reached.
	pool, err := pgxpool.New(context.Background(), "postgres://idemgen@127.0.0.1:1/none?connect_timeout=1")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	down := newClient(t, NewIdempotentHandler(newService[pgx.Tx](), pgstore.New(pool, pgstore.Options{}), quiet))
	checkAnswer(t, "store down", send(t, down, "key-down", "application/json", ` + "`" + `{"amount": 1}` + "`" + `), 503, "store-unavailable", "true")
}

func checkAnswer(t *testing.T, name string, a answer, status int, code, retry string) {
	t.Helper()
	switch {
	case a.status != status:
		t.Errorf("%s: status %d, want %d (%+v)", name, a.status, status, a)
	case a.typ != "application/json":
		t.Errorf("%s: Content-Type %q, want the API's application/json", name, a.typ)
	case a.err == nil:
		t.Errorf("%s: the client decoded no error", name)
	case a.err.Error.Code == nil || *a.err.Error.Code != code:
		t.Errorf("%s: code %v, want %q", name, a.err.Error.Code, code)
	case a.err.Error.Type != "idempotency_error" || a.err.Error.Message == "":
		t.Errorf("%s: type %q, message %q; want idempotency_error and a message", name, a.err.Error.Type, a.err.Error.Message)
	case a.retry != retry:
		t.Errorf("%s: Stripe-Should-Retry %q, want %q", name, a.retry, retry)
	}
}

// The missing-key problem of an operation that declares a required
// Idempotency-Key parameter is the layer's, word for word the one of an
// operation that does not declare it.
func TestMissingDeclaredKey(t *testing.T) {
	h := NewIdempotentHandler(newService[memstore.NoTx](), memstore.New(memstore.Options{}), IdempotentHandlerOptions{Options: idem.Options{Logger: slog.New(slog.DiscardHandler), Problems: plain{}}})
	problem := func(path string) idem.Problem {
		t.Helper()
		req := httptest.NewRequest("POST", path, bytes.NewReader([]byte(` + "`" + `{"amount": 1}` + "`" + `)))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != 400 || rec.Header().Get("Content-Type") != idem.ContentTypeProblem {
			t.Fatalf("POST %s without a key: %d %s %s", path, rec.Code, rec.Header().Get("Content-Type"), rec.Body)
		}
		var p idem.Problem
		if err := json.NewDecoder(io.Reader(rec.Body)).Decode(&p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	declared, undeclared := problem("/v1/charges"), problem("/v1/refunds")
	if declared.Type != idem.TypeMissingKey {
		t.Fatalf("declared key missing: type %q, want %q (%+v)", declared.Type, idem.TypeMissingKey, declared)
	}
	undeclared.Detail = strings.ReplaceAll(undeclared.Detail, "createRefund", "createCharge")
	if declared != undeclared {
		t.Fatalf("declared key missing: %+v\nundeclared key missing: %+v\nwant the same problem", declared, undeclared)
	}
}

// plain renders problem+json, overriding the spec's error shape.
type plain struct{}

func (plain) Render(p *idem.Problem) *idem.Response { return p.Response() }
`

// An errors section that cannot work is refused: in the config, with its
// line, what it lacks; against the spec, at the error schema's line and
// column, the members it does not declare.
func TestErrorShapeRefusals(t *testing.T) {
	dir := t.TempDir()
	spec := filepath.Join(dir, "openapi.yaml")
	writeFile(t, spec, []byte(header+`    post:
      x-idempotent: true
      responses:
        "201":
          description: ok
components:
  schemas:
    Error:
      type: object
      properties:
        error:
          type: object
          properties:
            code:
              type: string
            message:
              type: string
`))
	for _, tc := range []struct{ name, errors, want string }{
		{"no code", "errors:\n  schema: '#/components/schemas/Error'\n  members: {detail: message}\n",
			"errors.members sets neither type nor code"},
		{"not a ref", "errors:\n  schema: Error\n  members: {code: code, detail: message}\n",
			`errors.schema "Error" is not a local $ref`},
		{"one member twice", "errors:\n  schema: '#/components/schemas/Error'\n  members: {code: message, detail: message}\n",
			`errors.members.code and errors.members.detail both name member "message"`},
		{"no such schema", "errors:\n  schema: '#/components/schemas/Problem'\n  members: {code: code, detail: message}\n",
			spec + `: errors.schema "#/components/schemas/Problem" names nothing: #/components/schemas has no "Problem"; expected one of Error`},
		{"no such envelope", "errors:\n  schema: '#/components/schemas/Error'\n  envelope: err\n  members: {code: code, detail: message}\n",
			spec + `:14:5: the error schema Error (errors.schema in the config): has no property "err", which errors.envelope names`},
		{"no such member", "errors:\n  schema: '#/components/schemas/Error'\n  envelope: error\n  members: {code: code, detail: msg}\n  fixed: {kind: idempotency}\n",
			spec + `:14:5: the error schema Error (errors.schema in the config): its error object has no member "msg", "kind", which errors.members or errors.fixed names`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := "spec: " + spec + "\noutput:\n  dir: gen\n" + tc.errors
			cfg, err := generator.ParseConfig(filepath.Join(dir, "idemgen.yaml"), []byte(src))
			if err == nil {
				_, err = generateFrom(cfg)
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got error %v, want one containing %q", err, tc.want)
			}
		})
	}
}
