package generator_test

import (
	"testing"

	// The chi server kind's generated code imports chi; compiling it in
	// this module needs chi among the module's requirements, which go mod
	// tidy keeps only for an import it sees.
	_ "github.com/go-chi/chi/v5"
)

// TestServerKinds runs one protocol suite over HTTP against the example's
// spec generated for each server kind: every row of the protocol table
// that needs no database, a 50-way race for one key, and tenant
// isolation by the spec's scope header.
func TestServerKinds(t *testing.T) {
	for _, kind := range []string{"std-http", "chi"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			runGenerated(t, "kinds-"+kind, protocolSuite)
		})
	}
}

const protocolSuite = `package kinds

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
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/memstore"
)

// service counts createOrder's runs; an order for customer "slow" waits
// for release, and failNext makes the next run fail.
type service struct {
	runs     atomic.Int64
	failNext atomic.Bool
	entered  chan struct{}
	release  chan struct{}
}

func (s *service) CreateOrder(ctx context.Context, at *idem.Attempt[memstore.NoTx], req CreateOrderRequestObject) (CreateOrderResponseObject, error) {
	n := s.runs.Add(1)
	if s.failNext.CompareAndSwap(true, false) {
		return nil, errors.New("the handler failed")
	}
	if req.Body.CustomerId == "slow" {
		s.entered <- struct{}{}
		<-s.release
	}
	id := fmt.Sprintf("ord_%d", n)
	return CreateOrder201JSONResponse{
		Body:    Order{Id: id, AccountId: req.Params.XAccountId, AmountCents: req.Body.AmountCents, Currency: req.Body.Currency, CustomerId: req.Body.CustomerId, CreatedAt: time.Unix(0, 0).UTC()},
		Headers: CreateOrder201ResponseHeaders{Location: "/orders/" + id},
	}, nil
}

func (s *service) CreateOrderBaseline(context.Context, CreateOrderBaselineRequestObject) (CreateOrderBaselineResponseObject, error) {
	return CreateOrderBaseline400ApplicationProblemPlusJSONResponse{}, nil
}

func (s *service) ListOrders(context.Context, ListOrdersRequestObject) (ListOrdersResponseObject, error) {
	return ListOrders200JSONResponse{}, nil
}

func (s *service) GetOrder(context.Context, GetOrderRequestObject) (GetOrderResponseObject, error) {
	return GetOrder404ApplicationProblemPlusJSONResponse{}, nil
}

func (s *service) CreatePayment(context.Context, *idem.Attempt[memstore.NoTx], CreatePaymentRequestObject) (CreatePaymentStep, error) {
	return CreatePaymentNext(CreatePaymentPaymentCreated), nil
}

func (s *service) CreatePaymentAfterPaymentCreated(context.Context, *idem.Attempt[memstore.NoTx], CreatePaymentRequestObject) (CreatePaymentStep, error) {
	return CreatePaymentNext(CreatePaymentChargeCreated), nil
}

func (s *service) CreatePaymentAfterChargeCreated(context.Context, *idem.Attempt[memstore.NoTx], CreatePaymentRequestObject) (CreatePaymentResponseObject, error) {
	return CreatePayment402ApplicationProblemPlusJSONResponse{Status: 402, Title: "declined", Type: "about:blank"}, nil
}

type reply struct {
	status int
	header http.Header
	body   string
	typ    string // the problem type, if any
}

func TestProtocol(t *testing.T) {
	svc := &service{entered: make(chan struct{}, 1), release: make(chan struct{})}
	srv := httptest.NewServer(NewIdempotentHandler(svc, memstore.New(memstore.Options{}), IdempotentHandlerOptions{Options: idem.Options{Logger: slog.New(slog.DiscardHandler)}}))
	defer srv.Close()
	send := func(account, body string, keys ...string) (reply, error) {
		req, err := http.NewRequest("POST", srv.URL+"/orders", strings.NewReader(body))
		if err != nil {
			return reply{}, err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Account-Id", account)
		for _, k := range keys {
			req.Header.Add("Idempotency-Key", k)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return reply{}, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		var p idem.Problem
		_ = json.Unmarshal(b, &p)
		return reply{resp.StatusCode, resp.Header, string(b), p.Type}, err
	}
	post := func(account, body string, keys ...string) reply {
		t.Helper()
		r, err := send(account, body, keys...)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	order := func(customer string) string {
		return fmt.Sprintf(` + "`" + `{"amount_cents": 100, "currency": "EUR", "customer_id": %q}` + "`" + `, customer)
	}
	runs := func(want int64) {
		t.Helper()
		if got := svc.runs.Load(); got != want {
			t.Fatalf("createOrder ran %d times, want %d", got, want)
		}
	}

	if r := post("a1", order("c")); r.status != 400 || r.typ != idem.TypeMissingKey {
		t.Fatalf("no key: %+v", r)
	}
	if r := post("a1", order("c"), "k", "k"); r.status != 400 || r.typ != idem.TypeInvalidKey {
		t.Fatalf("key twice: %+v", r)
	}
	if r := post("a1", ` + "`" + `{"amount_cents": "lots"}` + "`" + `, "k0"); r.status != 400 || r.typ != idem.TypeInvalidRequest {
		t.Fatalf("body that does not decode: %+v", r)
	}
	runs(0)

	first := post("a1", order("c"), "k1")
	if first.status != 201 || first.header.Get(idem.HeaderReplayed) != "" {
		t.Fatalf("first: %+v", first)
	}
	replay := post("a1", order("c"), "k1")
	if replay.status != 201 || replay.body != first.body || replay.header.Get(idem.HeaderReplayed) != "true" || replay.header.Get("Location") != first.header.Get("Location") {
		t.Fatalf("replay: %+v, want %+v replayed", replay, first)
	}
	if r := post("a1", order("other"), "k1"); r.status != 422 || r.typ != idem.TypeKeyReused {
		t.Fatalf("another body: %+v", r)
	}
	runs(1)

	// Another account's same key and body is another key.
	if r := post("a2", order("c"), "k1"); r.status != 201 || r.header.Get(idem.HeaderReplayed) != "" || r.body == first.body {
		t.Fatalf("another account: %+v", r)
	}
	runs(2)

	// An error releases the key: a 500, then the retry runs.
	svc.failNext.Store(true)
	if r := post("a1", order("c"), "k2"); r.status != 500 || r.typ != idem.TypeInternal {
		t.Fatalf("failing handler: %+v", r)
	}
	if r := post("a1", order("c"), "k2"); r.status != 201 || r.header.Get(idem.HeaderReplayed) != "" {
		t.Fatalf("retry after the failure: %+v", r)
	}
	runs(4)

	// While the first runs, a duplicate gets 409 with Retry-After, at once.
	done := make(chan reply)
	go func() { r, _ := send("a1", order("slow"), "k3"); done <- r }()
	<-svc.entered
	if r := post("a1", order("slow"), "k3"); r.status != 409 || r.typ != idem.TypeKeyInUse || r.header.Get("Retry-After") == "" {
		t.Fatalf("duplicate while running: %+v", r)
	}
	close(svc.release)
	if r := <-done; r.status != 201 {
		t.Fatalf("the slow first: %+v", r)
	}
	runs(5)

	// 50 at once with one key: one run, and every answer its 201 or a 409.
	var wg sync.WaitGroup
	replies := make([]reply, 50)
	start := make(chan struct{})
	for i := range replies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			replies[i], _ = send("a1", order("race"), "k4")
		}()
	}
	close(start)
	wg.Wait()
	var created string
	for _, r := range replies {
		switch {
		case r.status == 201 && (created == "" || r.body == created):
			created = r.body
		case r.status == 409:
		default:
			t.Fatalf("race answer %+v", r)
		}
	}
	runs(6)
}
`
