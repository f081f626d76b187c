package server_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/example/gen"
	"github.com/idemgen/idemgen/idem"
)

// TestImportOrdersKeyedByPONumber: importOrders is keyed by its body's
// po_number, within the account: a purchase order imported again creates
// nothing and gets the first answer, whatever Idempotency-Key it carries;
// its number with other lines is a 422; another account's PO-1 is its
// own; and a purchase order the spec refuses leaves its number unused.
func TestImportOrdersKeyedByPONumber(t *testing.T) {
	e := newEnv(t, nil)
	po := func(number string, amounts ...string) string {
		lines := make([]string, len(amounts))
		for i, a := range amounts {
			lines[i] = `{"amount_cents": ` + a + `, "currency": "EUR", "customer_id": "cus_1"}`
		}
		return `{"po_number": "` + number + `", "lines": [` + strings.Join(lines, ", ") + `]}`
	}
	send := func(account, key, body string) reply {
		t.Helper()
		return e.try(attempt{method: "POST", path: "/orders/imports", account: account, auth: bearer(account), key: key, body: body})
	}
	first := send("acct_A", "", po("PO-1", "1250", "300"))
	var imported gen.Import
	if first.status != 201 || json.Unmarshal(first.body, &imported) != nil || len(imported.Orders) != 2 {
		t.Fatalf("first import: %d %s; want 201 with two orders", first.status, first.body)
	}
	again := send("acct_A", "an-idempotency-key", po("PO-1", "1250", "300"))
	if again.status != 201 || again.header.Get(idem.HeaderReplayed) != "true" || string(again.body) != string(first.body) {
		t.Fatalf("PO-1 again: %d %v %s; want the first answer, replayed", again.status, again.header, again.body)
	}
	if e.orders() != 2 {
		t.Fatalf("%d orders after importing PO-1 twice; want 2", e.orders())
	}
	other := send("acct_A", "", po("PO-1", "999"))
	if other.status != 422 || other.problem(t).Type != idem.TypeKeyReused || !strings.Contains(other.problem(t).Detail, "po_number") {
		t.Fatalf("PO-1 with other lines: %d %s; want a 422 naming po_number", other.status, other.body)
	}
	if r := send("acct_B", "", po("PO-1", "1250", "300")); r.status != 201 || r.header.Get(idem.HeaderReplayed) != "" {
		t.Fatalf("another account's PO-1: %d %s; want an import of its own", r.status, r.body)
	}
	bad := send("acct_A", "", po("PO-2", "0"))
	if bad.status != 400 || bad.problem(t).Type != idem.TypeInvalidRequest {
		t.Fatalf("a line of 0 cents: %d %s; want the spec's 400", bad.status, bad.body)
	}
	if r := send("acct_A", "", po("PO-2", "100")); r.status != 201 || r.header.Get(idem.HeaderReplayed) != "" {
		t.Fatalf("PO-2 corrected: %d %s; want it imported, its number unused by the refusal", r.status, r.body)
	}
	if r := send("acct_A", "k", `{"lines": [`+order+`]}`); r.status != 400 {
		t.Fatalf("no po_number: %d %s; want a 400", r.status, r.body)
	}
	if e.orders() != 5 {
		t.Fatalf("%d orders; want 5: PO-1 of both accounts and PO-2", e.orders())
	}
}
