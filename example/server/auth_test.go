package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/example/gen"
	"github.com/idemgen/idemgen/example/psp"
	"github.com/idemgen/idemgen/example/server"
	"github.com/idemgen/idemgen/idem"
)

// The account check on its own: what it lets through, and what each
// refusal is.
func TestAuthenticate(t *testing.T) {
	const secret = "unit-secret"
	tokenA := server.Token(secret, "acct_A")
	for _, tc := range []struct {
		name    string
		account []string // X-Account-Id values
		auth    []string // Authorization values
		want    int      // 0: let through
	}{
		{"the account's token", []string{"acct_A"}, []string{"Bearer " + tokenA}, 0},
		{"scheme in another case", []string{"acct_A"}, []string{"bearer " + tokenA}, 0},
		{"no Authorization", []string{"acct_A"}, nil, 401},
		{"another scheme", []string{"acct_A"}, []string{"Basic " + tokenA}, 401},
		{"no token", []string{"acct_A"}, []string{"Bearer"}, 401},
		{"not a token", []string{"acct_A"}, []string{"Bearer garbage"}, 401},
		{"a token cut short", []string{"acct_A"}, []string{"Bearer " + tokenA[:len(tokenA)-1]}, 401},
		{"two Authorization headers", []string{"acct_A"}, []string{"Bearer " + tokenA, "Bearer " + tokenA}, 401},
		{"another account's token", []string{"acct_A"}, []string{"Bearer " + server.Token(secret, "acct_B")}, 403},
		{"the token under another secret", []string{"acct_A"}, []string{"Bearer " + server.Token("other-secret", "acct_A")}, 403},
		{"the token under the demo secret", []string{"acct_A"}, []string{"Bearer " + server.Token("", "acct_A")}, 403},
		{"an empty account with its token", []string{""}, []string{"Bearer " + server.Token(secret, "")}, 403},
		{"no account", nil, []string{"Bearer " + tokenA}, 403},
		{"two accounts", []string{"acct_A", "acct_A"}, []string{"Bearer " + tokenA}, 403},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/orders/ord_1", nil)
			r.Header["X-Account-Id"] = tc.account
			r.Header["Authorization"] = tc.auth
			w := httptest.NewRecorder()
			ran := false
			next := func(context.Context, http.ResponseWriter, *http.Request, any) (any, error) {
				ran = true
				return "answer", nil
			}
			resp, err := server.Authenticate(secret)(next, "GetOrder")(r.Context(), w, r, nil)
			if tc.want == 0 {
				if err != nil || !ran || resp != "answer" {
					t.Fatalf("refused: %v, ran %v", err, ran)
				}
				return
			}
			var p *idem.Problem
			if !errors.As(err, &p) || p.Status != tc.want || p.Detail == "" {
				t.Fatalf("got %v, want a %d problem with a detail", err, tc.want)
			}
			if ran {
				t.Fatal("the operation ran for a refused request")
			}
			if got := w.Header().Get("WWW-Authenticate"); (tc.want == 401) != (got != "") {
				t.Errorf("WWW-Authenticate %q on a %d", got, tc.want)
			}
		})
	}
}

// Tokens differ by account and by secret, and an empty secret is the demo
// secret.
func TestToken(t *testing.T) {
	a := server.Token("s", "acct_1")
	if a == server.Token("s", "acct_2") || a == server.Token("t", "acct_1") {
		t.Fatal("two accounts or two secrets share a token")
	}
	if server.Token("", "acct_1") != server.Token(server.DemoSecret, "acct_1") {
		t.Fatal("an empty secret is not the demo secret")
	}
	if a != server.Token("s", "acct_1") {
		t.Fatal("a token changed between two calls")
	}
}

// testSecret is the secret of the tokens of the tests' servers.
const testSecret = "test-secret"

// bearer is the Authorization header of account's requests to the tests'
// servers.
func bearer(account string) string { return "Bearer " + server.Token(testSecret, account) }

// authorize names account in req and adds its token.
func authorize(req *http.Request, account string) {
	req.Header.Set("X-Account-Id", account)
	req.Header.Set("Authorization", bearer(account))
}

// attempt is a request sent as account with the Authorization header
// auth ("" for none): what another caller tries with an account's id.
type attempt struct {
	method, path, account, auth, key, body string
}

func (e *env) try(a attempt) reply {
	e.t.Helper()
	req, err := http.NewRequest(a.method, e.url+a.path, strings.NewReader(a.body))
	if err != nil {
		e.t.Fatal(err)
	}
	if a.body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("X-Account-Id", a.account)
	if a.auth != "" {
		req.Header.Set("Authorization", a.auth)
	}
	if a.key != "" {
		req.Header.Set(idem.HeaderKey, a.key)
	}
	return e.do(req)
}

// refused checks that r is the account check's refusal with status, and
// holds nothing of secret.
func refused(t *testing.T, what string, r reply, status int, secret string) {
	t.Helper()
	if r.status != status {
		t.Errorf("%s: %d %s, want %d", what, r.status, r.body, status)
		return
	}
	want := map[int]string{401: server.ProblemUnauthenticated, 403: server.ProblemWrongAccount}[status]
	if p := r.problem(t); p.Type != want {
		t.Errorf("%s: problem %s, want %s", what, p.Type, want)
	}
	if strings.Contains(string(r.body), secret) || r.header.Get(idem.HeaderReplayed) != "" {
		t.Errorf("%s: the answer holds the account's order: %v %s", what, r.header, r.body)
	}
}

// Account A stores an order under key k1. Someone who knows A's id and
// that key, and holds a valid token of account B, sends A's request: a
// 403 that never holds A's order; without a token, or with one that is
// not a token, a 401. The refusals run nothing and store nothing: the
// service ran once, for A, whose key is the only one stored and still
// replays A's order.
func TestAccountHeaderVerified(t *testing.T) {
	e := newEnv(t, nil)
	first := e.post("acct_A", order, "k1")
	if first.status != 201 {
		t.Fatalf("A's order: %d %s", first.status, first.body)
	}
	var o gen.Order
	if err := json.Unmarshal(first.body, &o); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, auth string
		status     int
	}{
		{"B's token", bearer("acct_B"), 403},
		{"A's token under another secret", "Bearer " + server.Token("guessed-secret", "acct_A"), 403},
		{"no token", "", 401},
		{"a garbage token", "Bearer garbage", 401},
		{"A's id as the token", "Bearer acct_A", 401},
	} {
		for _, key := range []string{"k1", "k-" + tc.name} {
			r := e.try(attempt{method: "POST", path: "/orders", account: "acct_A", auth: tc.auth, key: key, body: order})
			refused(t, tc.name+", key "+key, r, tc.status, o.Id)
		}
	}
	e.expect(1, 1, 1)
	if n := e.count(`SELECT count(*) FROM idempotency_keys WHERE NOT (scope = 'acct_A' AND key = 'k1')`); n != 0 {
		t.Errorf("%d keys stored for refused requests", n)
	}
	if r := e.post("acct_A", order, "k1"); r.status != 201 || string(r.body) != string(first.body) || r.header.Get(idem.HeaderReplayed) != "true" {
		t.Errorf("A's retry after the refusals: %d %v %s, want its order replayed", r.status, r.header, r.body)
	}
	e.expect(1, 1, 1)
}

// Every operation that takes X-Account-Id checks it: another account's
// token reads none of A's orders, pays for none of them, creates none in
// A's name, and neither starts nor reads an export of A's. A's own token still works on each. The provider's webhook,
// signed instead, has TestWebhookSignature.
func TestEveryOperationChecksTheAccount(t *testing.T) {
	e := newEnv(t, nil)
	created := e.post("acct_A", order, "k1")
	var o gen.Order
	if created.status != 201 || json.Unmarshal(created.body, &o) != nil {
		t.Fatalf("A's order: %d %s", created.status, created.body)
	}
	payment := fmt.Sprintf(`{"order_id": %q, "amount_cents": 1250}`, o.Id)
	for _, op := range []struct {
		name         string
		req          attempt
		status       int  // the answer to A's own token
		createsOrder bool // whether A's request adds an order
	}{
		{"getOrder", attempt{method: "GET", path: "/orders/" + o.Id}, 200, false},
		{"listOrders", attempt{method: "GET", path: "/orders?customer_id=cus_1"}, 200, false},
		{"createOrder", attempt{method: "POST", path: "/orders", key: "k2", body: order}, 201, true},
		{"createOrderBaseline", attempt{method: "POST", path: "/baseline/orders", body: order}, 201, true},
		{"importOrders", attempt{method: "POST", path: "/orders/imports", body: `{"po_number": "PO-1", "lines": [` + order + `]}`}, 201, true},
		// Async: accepted (no worker runs here), then its status resource,
		// which the same middleware guards.
		{"createExport", attempt{method: "POST", path: "/exports", key: "x1", body: `{"format": "csv"}`}, 202, false},
		{"createExportStatus", attempt{method: "GET", path: "/exports/requests/x1"}, 200, false},
		{"createPayment", attempt{method: "POST", path: "/payments", key: "p1", body: payment}, 201, false},
	} {
		t.Run(op.name, func(t *testing.T) {
			orders, keys := e.orders(), e.keys()
			for name, tc := range map[string]struct {
				auth   string
				status int
			}{"B's token": {bearer("acct_B"), 403}, "no token": {"", 401}} {
				r := op.req
				r.account, r.auth = "acct_A", tc.auth
				refused(t, name, e.try(r), tc.status, o.Id)
			}
			if e.orders() != orders || e.keys() != keys || e.psp.Stats() != (psp.Stats{}) {
				t.Fatalf("refused requests left %d orders (had %d), %d keys (had %d), provider %+v", e.orders(), orders, e.keys(), keys, e.psp.Stats())
			}
			r := op.req
			r.account, r.auth = "acct_A", bearer("acct_A")
			if got := e.try(r); got.status != op.status {
				t.Fatalf("A's own token: %d %s, want %d", got.status, got.body, op.status)
			}
			if want := orders + map[bool]int{true: 1}[op.createsOrder]; e.orders() != want {
				t.Errorf("%d orders after A's request, want %d", e.orders(), want)
			}
		})
	}
}
