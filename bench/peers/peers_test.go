package peers_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/bench/peers"
	"github.com/idemgen/idemgen/example/orders"
	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/idemtest"
)

func TestMain(m *testing.M) { idemtest.Main(m) }

// Both hand-written designs answer as the generated layer does, so that
// the benchmark compares like with like: a first 201, its replay byte for
// byte, a 422 for another body under the key, one order in all.
func TestPeersAnswerTheProtocol(t *testing.T) {
	pool := idemtest.NewPool(t)
	if err := orders.Migrate(t.Context(), pool); err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	if err := peers.Mount(t.Context(), pool, mux); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mux)
	defer srv.Close()
	for _, path := range []string{peers.InsertUpdatePath, peers.UpsertPath} {
		t.Run(strings.Split(path, "/")[2], func(t *testing.T) {
			send := func(body string) (int, http.Header, []byte) {
				req, _ := http.NewRequest("POST", srv.URL+path, strings.NewReader(body))
				req.Header.Set("X-Account-Id", "acct_"+path)
				req.Header.Set(idem.HeaderKey, "k1")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				return resp.StatusCode, resp.Header, b
			}
			order := `{"amount_cents": 100, "currency": "EUR", "customer_id": "c1"}`
			status, h, first := send(order)
			if status != 201 || h.Get(idem.HeaderReplayed) != "" {
				t.Fatalf("first: %d %s", status, first)
			}
			status, h, again := send(order)
			if status != 201 || h.Get(idem.HeaderReplayed) != "true" || !bytes.Equal(again, first) || h.Get("Location") == "" {
				t.Fatalf("replay: %d %v %s, want %s replayed", status, h, again, first)
			}
			if status, _, b := send(`{"amount_cents": 101, "currency": "EUR", "customer_id": "c1"}`); status != 422 {
				t.Fatalf("another body: %d %s", status, b)
			}
			var n int
			if err := pool.QueryRow(t.Context(), `SELECT count(*) FROM orders WHERE account_id = $1`, "acct_"+path).Scan(&n); err != nil || n != 1 {
				t.Fatalf("%d orders, %v; want 1", n, err)
			}
		})
	}
}
