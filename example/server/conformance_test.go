package server_test

import (
	"net/http/httptest"
	"testing"

	"github.com/idemgen/idemgen/example/gen/gentest"
	"github.com/idemgen/idemgen/example/orders"
	"github.com/idemgen/idemgen/example/psp"
	"github.com/idemgen/idemgen/idem/idemtest"
	"github.com/idemgen/idemgen/idem/pgstore"
)

// TestIdemtest runs the conformance checks idemgen generates (tests: true
// in idemgen.yaml writes gen/gentest) on the example's own service, as a
// team would on theirs, behind its account check as its server serves
// it: createOrder with the spec's example order, createPayment with one
// for an order made first, both with the account's token (kitRequests).
func TestIdemtest(t *testing.T) {
	pool := idemtest.NewPool(t)
	if err := orders.Migrate(t.Context(), pool); err != nil {
		t.Fatal(err)
	}
	provider := httptest.NewServer(psp.NewFake())
	t.Cleanup(provider.Close)
	svc := &orders.Service{Pool: pool, PSP: &psp.Client{BaseURL: provider.URL}}

	var orderID string
	err := pool.QueryRow(t.Context(), `INSERT INTO orders (account_id, amount_cents, currency, customer_id)
		VALUES ('acct_demo', 990, 'EUR', 'cus_pay') RETURNING id`).Scan(&orderID)
	if err != nil {
		t.Fatal(err)
	}
	gentest.Check(t, svc, pgstore.New(pool, pgstore.Options{}), kitOptions(), kitRequests(orderID))

	// The checks' runs that committed: the first, one of the concurrent
	// ones, and the retry after the failed run, whose order rolled back.
	var n int
	if err := pool.QueryRow(t.Context(), `SELECT count(*) FROM orders WHERE customer_id = 'cus_42'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 3 {
		t.Errorf("%d orders from the checks, want 3: a run that failed kept its order, or duplicates ran", n)
	}
	if err := pool.QueryRow(t.Context(), `SELECT count(*) FROM payments WHERE status = 'succeeded'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 3 {
		t.Errorf("%d payments from the checks, want 3", n)
	}
}
