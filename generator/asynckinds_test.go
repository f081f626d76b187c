package generator_test

import (
	"strings"
	"testing"
)

// The exports spec (testdata/exports: an async operation and an async one
// in phases) is generated for each server kind into the kind's test
// binary and run over HTTP on PostgreSQL with River workers: mounted under
// a prefix the router's own way, its 202 points at its status resource
// under that prefix; the status is scoped; the worker's response is stored
// and replayed.

// asyncMounts are each kind's newAsyncHandler: the layer on that router,
// mounted under prefix the router's own way.
var asyncMounts = map[string]string{
	"std-http": `package exports

import (
	"net/http"

	"github.com/idemgen/idemgen/idem"
	"github.com/jackc/pgx/v5"
)

func newAsyncHandler(prefix string, impl IdempotentServer[pgx.Tx], store idem.Store[pgx.Tx], opts IdempotentHandlerOptions) http.Handler {
	mux := http.NewServeMux()
	mux.Handle(prefix+"/", http.StripPrefix(prefix, NewIdempotentHandler(impl, store, opts)))
	return mux
}
`,
	"chi": `package exports

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/idemgen/idemgen/idem"
	"github.com/jackc/pgx/v5"
)

func newAsyncHandler(prefix string, impl IdempotentServer[pgx.Tx], store idem.Store[pgx.Tx], opts IdempotentHandlerOptions) http.Handler {
	r := chi.NewRouter()
	r.Mount(prefix, NewIdempotentHandler(impl, store, opts))
	return r
}
`,
	"echo": `package exports

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/idemgen/idemgen/idem"
	"github.com/jackc/pgx/v5"
)

func newAsyncHandler(prefix string, impl IdempotentServer[pgx.Tx], store idem.Store[pgx.Tx], opts IdempotentHandlerOptions) http.Handler {
	e := echo.New()
	RegisterIdempotentHandlers(e.Group(prefix), impl, store, opts)
	return e
}
`,
	"gin": `package exports

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/idemgen/idemgen/idem"
	"github.com/jackc/pgx/v5"
)

func newAsyncHandler(prefix string, impl IdempotentServer[pgx.Tx], store idem.Store[pgx.Tx], opts IdempotentHandlerOptions) http.Handler {
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	// gin routes on the decoded path unless told otherwise: a key with a
	// slash, escaped in its status path, needs the raw one (docs/ASYNC.md).
	r.UseRawPath = true
	RegisterIdempotentHandlers(r.Group(prefix), impl, store, opts)
	return r
}
`,
}

// asyncSuite runs the generated async operations end to end.
var asyncSuite = strings.ReplaceAll(`package exports

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/idemriver"
	"github.com/idemgen/idemgen/idem/pgstore"
	"github.com/idemgen/idemgen/internal/pgtest"
)

type exportService struct{ exports, refunds atomic.Int64 }

func (s *exportService) CreateExport(ctx context.Context, at *idem.Attempt[pgx.Tx], request CreateExportRequestObject) (CreateExportResponseObject, error) {
	s.exports.Add(1)
	return CreateExport201JSONResponse{Id: "exp_" + at.Key(), Url: "/files/" + at.Key() + "." + string(request.Body.Format)}, nil
}

func (s *exportService) CreateRefund(ctx context.Context, at *idem.Attempt[pgx.Tx], request CreateRefundRequestObject) (CreateRefundStep, error) {
	return CreateRefundNext(CreateRefundRefundRequested), nil
}

func (s *exportService) CreateRefundAfterRefundRequested(ctx context.Context, at *idem.Attempt[pgx.Tx], request CreateRefundRequestObject) (CreateRefundResponseObject, error) {
	s.refunds.Add(1)
	return CreateRefund200JSONResponse{RefundId: "re_" + request.Body.PaymentId}, nil
}

func send(t *testing.T, method, url, key, account, body string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	req.Header.Set("X-Account-Id", account)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

// TestAsync: 202 with the status resource's Location under the prefix the
// routes are mounted at, the worker's response in the status (and in no
// other account's), and replayed to a retry; the same for a handler in
// phases.
func TestAsync(t *testing.T) {
	url := pgtest.NewMigratedDatabase(t, "async kinds", func(ctx context.Context, url string) error {
		pool, err := pgxpool.New(ctx, url)
		if err != nil {
			return err
		}
		defer pool.Close()
		if err := pgstore.Migrate(ctx, pool); err != nil {
			return err
		}
		return idemriver.Migrate(ctx, pool)
	})
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	store := pgstore.New(pool, pgstore.Options{})
	opts := idem.Options{Logger: slog.New(slog.DiscardHandler)}
	svc := &exportService{}
	workers := river.NewWorkers()
	AddIdempotentWorkers[pgx.Tx](workers, svc, store, opts)
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 2}},
		Workers:           workers,
		FetchCooldown:     10 * time.Millisecond,
		FetchPollInterval: 50 * time.Millisecond,
		Logger:            slog.New(slog.DiscardHandler),
		TestOnly:          true,
	})
	if err != nil {
		t.Fatal(err)
	}
	done, cancel := client.Subscribe(river.EventKindJobCompleted)
	defer cancel()
	if err := client.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = client.Stop(ctx)
	})
	srv := httptest.NewServer(newAsyncHandler("/api", svc, store, IdempotentHandlerOptions{Options: opts, River: client}))
	defer srv.Close()
	await := func() {
		t.Helper()
		select {
		case <-done:
		case <-time.After(time.Minute):
			t.Fatal("no job completed within a minute")
		}
	}
	status := func(location, account string) (int, idem.AsyncStatus) {
		t.Helper()
		resp, body := send(t, "GET", srv.URL+location, "", account, "")
		var st idem.AsyncStatus
		if resp.StatusCode == http.StatusOK {
			if err := json.Unmarshal([]byte(body), &st); err != nil {
				t.Fatalf("status body %s: %v", body, err)
			}
		}
		return resp.StatusCode, st
	}

	resp, body := send(t, "POST", srv.URL+"/api/exports", "k1", "a1", ´{"format": "csv"}´)
	if resp.StatusCode != http.StatusAccepted || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("POST /api/exports: %d %s, want 202 with Retry-After", resp.StatusCode, body)
	}
	location := resp.Header.Get("Location")
	if location != "/api/exports/requests/k1" {
		t.Fatalf("Location %q, want the status resource under the prefix, /api/exports/requests/k1", location)
	}
	await()
	code, st := status(location, "a1")
	if code != http.StatusOK || st.Status != idem.AsyncSucceeded || st.Response == nil || st.Response.Status != http.StatusCreated ||
		!strings.Contains(string(st.Response.Body), ´"exp_k1"´) {
		t.Fatalf("status once done: %d %+v", code, st)
	}
	if code, _ := status(location, "a2"); code != http.StatusNotFound {
		t.Errorf("another account's read of the status: %d, want 404", code)
	}
	resp, body = send(t, "POST", srv.URL+"/api/exports", "k1", "a1", ´{"format": "csv"}´)
	if resp.StatusCode != http.StatusCreated || resp.Header.Get("Idempotent-Replayed") != "true" || !strings.Contains(body, ´"exp_k1"´) {
		t.Errorf("retry once done: %d %s, want the stored 201, replayed", resp.StatusCode, body)
	}
	if n := svc.exports.Load(); n != 1 {
		t.Errorf("the export ran %d times, want 1", n)
	}

	// A key with a slash and a space: one segment of the status path,
	// escaped, which every router hands back whole.
	resp, body = send(t, "POST", srv.URL+"/api/exports", "k/2 x", "a1", ´{"format": "csv"}´)
	if resp.StatusCode != http.StatusAccepted || resp.Header.Get("Location") != "/api/exports/requests/k%2F2%20x" {
		t.Fatalf("POST /api/exports with key %q: %d %s (Location %q)", "k/2 x", resp.StatusCode, body, resp.Header.Get("Location"))
	}
	await()
	if code, st := status(resp.Header.Get("Location"), "a1"); code != http.StatusOK || st.Status != idem.AsyncSucceeded {
		t.Errorf("status of key %q at its Location: %d %+v", "k/2 x", code, st)
	}

	resp, body = send(t, "POST", srv.URL+"/api/refunds", "r1", "a1", ´{"payment_id": "pay_1"}´)
	if resp.StatusCode != http.StatusAccepted || resp.Header.Get("Location") != "/api/refunds/r1/status" {
		t.Fatalf("POST /api/refunds: %d %s (Location %q)", resp.StatusCode, body, resp.Header.Get("Location"))
	}
	await()
	if code, st := status("/api/refunds/r1/status", "a1"); code != http.StatusOK || st.Status != idem.AsyncSucceeded || st.Response.Status != http.StatusOK {
		t.Fatalf("refund status once done: %d %+v", code, st)
	}
	if n := svc.refunds.Load(); n != 1 {
		t.Errorf("the refund's last phase ran %d times, want 1", n)
	}
}
`, "´", "`")

// TestAsyncServerKinds runs the async suite on every server kind.
func TestAsyncServerKinds(t *testing.T) {
	t.Parallel()
	for _, kind := range serverKinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			runTestBinary(t, kindBinary(t, kind), "^TestAsync_", "")
		})
	}
}
