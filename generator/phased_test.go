package generator_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/generator"
)

// A phased annotation generates a phase table and an adapter that serves
// it with ServePhased; a single recovery point makes two phases.
func TestGeneratePhased(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "openapi.yaml"), []byte(header+`    post:
      operationId: createThing
      x-idempotent:
        mode: phased
        recovery-points: [thing_created]
      requestBody:
        content:
          application/json:
            schema:
              $ref: "#/components/schemas/Thing"
      responses:
        "201":
          description: ok
`+components))
	res := generate(t, configFor(t, dir, "openapi.yaml", ""))
	layer := string(fileNamed(t, res, "idempotency.gen.go"))
	for _, want := range []string{
		"\tCreateThingPhases[T]\n",
		"\tCreateThingThingCreated CreateThingPoint = \"thing_created\"\n",
		"\tCreateThing(ctx context.Context, at *idem.Attempt[T], request CreateThingRequestObject) (CreateThingStep, error)\n",
		"\tCreateThingAfterThingCreated(ctx context.Context, at *idem.Attempt[T], request CreateThingRequestObject) (CreateThingResponseObject, error)\n",
		"\t\t\tRecoveryPoints: []string{\"thing_created\"},\n",
		"s.engine.ServePhased(ctx, &s.createThingOp, fingerprint,",
		"\t\tcase CreateThingThingCreated:\n\t\t\tstep.response, err = s.impl.CreateThingAfterThingCreated(ctx, at, request)\n",
	} {
		if !strings.Contains(layer, want) {
			t.Errorf("the layer lacks %q:\n%s", want, layer)
		}
	}
	compileGo(t, res)
}

// paymentsServer implements testdata/payments' IdempotentServer in the
// generated package, without the phase methods in omit.
func paymentsServer(omit string) string {
	methods := []struct{ name, src string }{
		{"CreatePayment", `(ctx context.Context, at *idem.Attempt[memstore.NoTx], request CreatePaymentRequestObject) (CreatePaymentStep, error) {
	return CreatePaymentNext(CreatePaymentPaymentCreated), nil
}`},
		{"CreatePaymentAfterPaymentCreated", `(ctx context.Context, at *idem.Attempt[memstore.NoTx], request CreatePaymentRequestObject) (CreatePaymentStep, error) {
	return CreatePaymentNext(CreatePaymentChargeCreated), nil
}`},
		{"CreatePaymentAfterChargeCreated", `(ctx context.Context, at *idem.Attempt[memstore.NoTx], request CreatePaymentRequestObject) (CreatePaymentResponseObject, error) {
	return CreatePayment201JSONResponse{Id: "pay_1", Status: "charged"}, nil
}`},
		{"CapturePayment", `(ctx context.Context, at *idem.Attempt[memstore.NoTx], request CapturePaymentRequestObject) (CapturePaymentResponseObject, error) {
	return CapturePayment200JSONResponse{Id: request.PaymentId, Status: "captured"}, nil
}`},
		{"GetPayment", `(ctx context.Context, request GetPaymentRequestObject) (GetPaymentResponseObject, error) {
	return GetPayment200JSONResponse{Id: request.PaymentId, Status: "charged"}, nil
}`},
	}
	var b strings.Builder
	b.WriteString(`package payments

import (
	"context"

	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/memstore"
)

type server struct{}

var _ IdempotentServer[memstore.NoTx] = (*server)(nil)
`)
	for _, m := range methods {
		if m.name != omit {
			fmt.Fprintf(&b, "\nfunc (*server) %s%s\n", m.name, m.src)
		}
	}
	return b.String()
}

// The phase table is checked by the compiler: a server without one of
// the phase methods does not build, and the error names the method.
func TestPhasedServerMissingPhase(t *testing.T) {
	t.Parallel()
	res := generate(t, loadConfig(t, filepath.Join("testdata", "payments", "idemgen.yaml")))
	t.Run("complete", func(t *testing.T) {
		t.Parallel()
		pkg := writeGoPackage(t, res, map[string]string{"server.go": paymentsServer("")})
		vetGo(t, pkg, "")
	})
	for _, phase := range []string{"CreatePayment", "CreatePaymentAfterPaymentCreated", "CreatePaymentAfterChargeCreated"} {
		t.Run("without "+phase, func(t *testing.T) {
			t.Parallel()
			pkg := writeGoPackage(t, res, map[string]string{"server.go": paymentsServer(phase)})
			out, err := runGo(t, "build", pkg)
			if err == nil {
				t.Fatalf("go build succeeded without %s", phase)
			}
			if want := "(missing method " + phase + ")"; !strings.Contains(string(out), want) {
				t.Errorf("go build failed without naming the method; want %q in:\n%s", want, out)
			}
		})
	}
}

// phasesTest drives testdata/payments' generated handler over HTTP with the
// in-memory store: it runs in the generated package, as a user's test
// would.
const phasesTest = `package payments

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/memstore"
)

// service records the phases it runs; the phase named failOnce fails the
// first time it runs.
type service struct {
	ran      []string
	failOnce string
}

func (s *service) run(phase string) error {
	s.ran = append(s.ran, phase)
	if s.failOnce == phase {
		s.failOnce = ""
		return errors.New("the card network timed out")
	}
	return nil
}

func (s *service) CreatePayment(ctx context.Context, at *idem.Attempt[memstore.NoTx], request CreatePaymentRequestObject) (CreatePaymentStep, error) {
	if err := s.run("first"); err != nil {
		return CreatePaymentStep{}, err
	}
	if request.Body.CardToken == "declined" {
		return CreatePaymentRespond(CreatePayment402ApplicationProblemPlusJSONResponse{Type: "about:blank", Title: "Card declined", Status: 402}), nil
	}
	return CreatePaymentNext(CreatePaymentPaymentCreated), nil
}

func (s *service) CreatePaymentAfterPaymentCreated(ctx context.Context, at *idem.Attempt[memstore.NoTx], request CreatePaymentRequestObject) (CreatePaymentStep, error) {
	if err := s.run(at.RecoveryPoint()); err != nil {
		return CreatePaymentStep{}, err
	}
	return CreatePaymentNext(CreatePaymentChargeCreated), nil
}

func (s *service) CreatePaymentAfterChargeCreated(ctx context.Context, at *idem.Attempt[memstore.NoTx], request CreatePaymentRequestObject) (CreatePaymentResponseObject, error) {
	if err := s.run(at.RecoveryPoint()); err != nil {
		return nil, err
	}
	return CreatePayment201JSONResponse{Id: "pay_1", Amount: request.Body.Amount, Currency: request.Body.Currency, Status: "charged"}, nil
}

func (s *service) CapturePayment(ctx context.Context, at *idem.Attempt[memstore.NoTx], request CapturePaymentRequestObject) (CapturePaymentResponseObject, error) {
	return CapturePayment200JSONResponse{Id: request.PaymentId, Status: "captured"}, nil
}

func (s *service) GetPayment(ctx context.Context, request GetPaymentRequestObject) (GetPaymentResponseObject, error) {
	return GetPayment200JSONResponse{Id: request.PaymentId, Status: "charged"}, nil
}

func TestPhases(t *testing.T) {
	tests := []struct {
		name     string
		card     string
		failOnce string
		statuses [2]int   // of the request and of its retry
		ran      []string // the phases run by both
	}{
		{
			name:     "every phase, then a replay",
			card:     "tok_visa",
			statuses: [2]int{201, 201},
			ran:      []string{"first", "payment_created", "charge_created"},
		},
		{
			name:     "a response from the first phase",
			card:     "declined",
			statuses: [2]int{402, 402},
			ran:      []string{"first"},
		},
		{
			name:     "a retry resumes at the failed phase",
			card:     "tok_visa",
			failOnce: "charge_created",
			statuses: [2]int{500, 201},
			ran:      []string{"first", "payment_created", "charge_created", "charge_created"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			svc := &service{failOnce: tt.failOnce}
			opts := IdempotentHandlerOptions{Options: idem.Options{Logger: slog.New(slog.DiscardHandler)}}
			srv := httptest.NewServer(NewIdempotentHandler(svc, memstore.New(memstore.Options{}), opts))
			defer srv.Close()
			for i, want := range tt.statuses {
				body := fmt.Sprintf("{\"amount\": 1000, \"currency\": \"eur\", \"card_token\": %q}", tt.card)
				req, err := http.NewRequest(http.MethodPost, srv.URL+"/payments", strings.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Idempotency-Key", "key-1")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != want {
					t.Errorf("request %d: status %d, want %d", i+1, resp.StatusCode, want)
				}
				replayed := i == 1 && tt.statuses[0] != 500
				if got := resp.Header.Get("Idempotent-Replayed") == "true"; got != replayed {
					t.Errorf("request %d: replayed %v, want %v", i+1, got, replayed)
				}
			}
			if !slices.Equal(svc.ran, tt.ran) {
				t.Errorf("ran the phases %q, want %q", svc.ran, tt.ran)
			}
		})
	}
}
`

// The generated adapter runs the phases in order, stores a response from
// any of them, and resumes a retry at the phase that failed.
func TestPhasedServerRuns(t *testing.T) {
	t.Parallel()
	res := generate(t, loadConfig(t, filepath.Join("testdata", "payments", "idemgen.yaml")))
	goTest(t, writeGoPackage(t, res, map[string]string{"phases_test.go": phasesTest}))
}

// fileNamed returns the content of the generated file with the base name.
func fileNamed(t *testing.T, res *generator.Result, name string) []byte {
	t.Helper()
	for _, f := range res.Files {
		if filepath.Base(f.Path) == name {
			return f.Content
		}
	}
	t.Fatalf("no %s generated", name)
	return nil
}
