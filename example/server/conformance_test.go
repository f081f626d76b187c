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
// for an order made first, importOrders with a purchase order, all with
// the account's token, and the provider's event for a payment made first
// (kitRequests).
func TestIdemtest(t *testing.T) {
	pool := idemtest.NewPool(t)
	if err := orders.Migrate(t.Context(), pool); err != nil {
		t.Fatal(err)
	}
	provider := httptest.NewServer(psp.NewFake())
	t.Cleanup(provider.Close)
	svc := &orders.Service{Pool: pool, PSP: &psp.Client{BaseURL: provider.URL}}

	gentest.Check(t, svc, pgstore.New(pool, pgstore.Options{}), kitOptions(), kitRequests(kitRows(t, pool)))

	// Each operation's runs that committed: the first, one of the
	// concurrent ones, and the retry after the failed run, whose writes
	// rolled back.
	for what, query := range map[string]string{
		"orders":           `SELECT count(*) FROM orders WHERE customer_id = 'cus_42'`,
		"payments":         `SELECT count(*) FROM payments WHERE status = 'succeeded'`,
		"imported orders":  `SELECT count(*) FROM orders WHERE customer_id = 'cus_kit'`,
		"settled payments": `SELECT count(*) FROM settlements WHERE charge_id = 'ch_kit'`,
	} {
		var n int
		if err := pool.QueryRow(t.Context(), query).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 3 {
			t.Errorf("%d %s from the checks, want 3: a run that failed kept its writes, or duplicates ran", n, what)
		}
	}
}
