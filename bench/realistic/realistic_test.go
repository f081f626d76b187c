package realistic_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/bench/realistic"
	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/idemtest"
)

func TestMain(m *testing.M) { idemtest.Main(m) }

// Both routes do the four statements' work: an order, its two line items
// and an outbox event per execution; the annotated one replays.
func TestRealisticOrder(t *testing.T) {
	pool := idemtest.NewPool(t)
	mux := http.NewServeMux()
	if err := realistic.Mount(t.Context(), pool, mux, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mux)
	defer srv.Close()
	body := `{"customer_id":"` + realistic.Customer + `","items":[{"sku":"a","quantity":1,"price_cents":500},{"sku":"b","quantity":2,"price_cents":250}]}`
	send := func(path, key string) (int, string, string) {
		req, _ := http.NewRequest("POST", srv.URL+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Account-Id", realistic.Account)
		if key != "" {
			req.Header.Set(idem.HeaderKey, key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get(idem.HeaderReplayed), string(b)
	}
	if status, _, b := send("/realistic/baseline/orders", ""); status != 201 || !strings.Contains(b, `"total_cents":1000`) {
		t.Fatalf("baseline: %d %s", status, b)
	}
	status, _, first := send("/realistic/orders", "k1")
	if status != 201 {
		t.Fatalf("first: %d %s", status, first)
	}
	if status, replayed, again := send("/realistic/orders", "k1"); status != 201 || replayed != "true" || again != first {
		t.Fatalf("replay: %d %q %s, want %s replayed", status, replayed, again, first)
	}
	for table, want := range map[string]int{"realistic_orders": 2, "realistic_line_items": 4, "realistic_outbox": 2} {
		var n int
		if err := pool.QueryRow(t.Context(), `SELECT count(*) FROM `+table).Scan(&n); err != nil || n != want {
			t.Errorf("%s: %d rows, %v; want %d", table, n, err, want)
		}
	}
}
