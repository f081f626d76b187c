package idem_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/memstore"
)

type benchOrder struct {
	AmountCents int64  `json:"amount_cents"`
	Currency    string `json:"currency"`
	CustomerID  string `json:"customer_id"`
}

func BenchmarkFingerprint(b *testing.B) {
	body := &benchOrder{AmountCents: 1250, Currency: "EUR", CustomerID: "cus_1"}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := idem.Fingerprint("createOrder", nil, nil, nil, body, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkServe measures the engine over the in-memory store: the
// protocol's own cost per request, without a database.
func BenchmarkServe(b *testing.B) {
	op := &idem.Operation{Name: "createOrder", TTL: time.Hour, Lease: time.Minute}
	handler := func(ctx context.Context, at *idem.Attempt[memstore.NoTx]) (idem.Writer, error) {
		return func(w http.ResponseWriter) error {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusCreated)
			_, err := w.Write([]byte(`{"id":"ord_1","amount_cents":1250}`))
			return err
		}, nil
	}
	fp, _ := idem.Fingerprint("createOrder", nil, nil, nil, &benchOrder{AmountCents: 1250}, nil)
	run := func(b *testing.B, key func(i int) string) {
		e := idem.NewEngine(memstore.New(memstore.Options{}), idem.Options{Logger: quiet})
		r := httptest.NewRequest("POST", "/orders", nil)
		ctx := idem.WithRequest(context.Background(), r)
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			r.Header.Set(idem.HeaderKey, key(i))
			if _, err := e.Serve(ctx, op, fp, handler); err != nil {
				b.Fatal(err)
			}
			i++
		}
	}
	b.Run("first", func(b *testing.B) { run(b, func(i int) string { return "k" + strconv.Itoa(i) }) })
	b.Run("replay", func(b *testing.B) { run(b, func(int) string { return "same" }) })
}
