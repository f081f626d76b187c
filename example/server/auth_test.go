package server_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

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
