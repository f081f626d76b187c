package generator_test

import "testing"

// TestFormFieldsTheDecoderDrops runs the refunds test spec's generated
// handler over HTTP: createCharge takes a form whose schema names no
// metadata, so the typed body drops metadata[foo]. The fingerprint covers
// the form as sent: changing metadata[foo] under a key is a 422, not a
// replay of the other request. An excluded member of a form body
// (updateCustomer's metadata[trace_id]) still does not count.
func TestFormFieldsTheDecoderDrops(t *testing.T) {
	t.Parallel()
	runGenerated(t, "refunds", formTest)
}

const formTest = `package refunds

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/memstore"
)

type service struct{ runs int }

func (s *service) CreateCharge(ctx context.Context, at *idem.Attempt[memstore.NoTx], request CreateChargeRequestObject) (CreateChargeResponseObject, error) {
	s.runs++
	return CreateCharge200JSONResponse{Id: "ch_1", AmountCents: request.Body.AmountCents, Currency: request.Body.Currency}, nil
}

func (s *service) UpdateCustomer(ctx context.Context, at *idem.Attempt[memstore.NoTx], request UpdateCustomerRequestObject) (UpdateCustomerResponseObject, error) {
	s.runs++
	return UpdateCustomer200JSONResponse{Name: "n"}, nil
}

func (s *service) CreateRefund(ctx context.Context, at *idem.Attempt[memstore.NoTx], request CreateRefundRequestObject) (CreateRefundResponseObject, error) {
	return CreateRefund201JSONResponse{}, nil
}

func TestFormFields(t *testing.T) {
	svc := &service{}
	srv := httptest.NewServer(NewIdempotentHandler(svc, memstore.New(memstore.Options{}), IdempotentHandlerOptions{Options: idem.Options{Logger: slog.New(slog.DiscardHandler)}}))
	defer srv.Close()
	send := func(method, path, key, form string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(form))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Idempotency-Key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode, resp.Header.Get(idem.HeaderReplayed)
	}
	charge := "amount_cents=5&currency=eur&metadata%5Bfoo%5D="
	if status, _ := send("POST", "/charges", "c1", charge+"1"); status != 200 {
		t.Fatalf("first charge: %d", status)
	}
	if status, replayed := send("POST", "/charges", "c1", charge+"1"); status != 200 || replayed != "true" {
		t.Fatalf("same form: %d replayed=%q, want a replay", status, replayed)
	}
	if status, _ := send("POST", "/charges", "c1", charge+"2"); status != 422 {
		t.Fatalf("metadata[foo] changed, a field the typed body drops: %d, want 422", status)
	}
	if status, _ := send("POST", "/charges", "c1", "currency=eur&amount_cents=5&metadata%5Bfoo%5D=1"); status != 200 {
		t.Fatalf("the same fields in another order: %d, want the replay", status)
	}
	customer := "name=n&metadata%5Bsource%5D=web&metadata%5Btrace_id%5D="
	if status, _ := send("PUT", "/customers/cus_1", "u1", customer+"a"); status != 200 {
		t.Fatalf("first update: %d", status)
	}
	if status, replayed := send("PUT", "/customers/cus_1", "u1", customer+"b"); status != 200 || replayed != "true" {
		t.Fatalf("only the excluded metadata[trace_id] changed: %d replayed=%q, want a replay", status, replayed)
	}
	if svc.runs != 2 {
		t.Fatalf("handlers ran %d times, want 2", svc.runs)
	}
}
`
