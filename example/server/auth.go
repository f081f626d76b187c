package server

// The account check. Keys are scoped by the X-Account-Id header
// (openapi.yaml), and a scope is only as trustworthy as its header: without
// a check, anyone who knows an account's id and one of its keys gets that
// account's stored response (docs/SCOPES.md). So each request also carries
// a bearer token bound to its account, checked in a strict middleware: it
// runs after the route gate and before the protocol looks the key up, so a
// refused request claims and stores nothing.

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"strings"

	"github.com/idemgen/idemgen/example/gen"
	"github.com/idemgen/idemgen/idem"
)

// DemoSecret is the secret tokens are made with when none is given: an
// empty secret means DemoSecret throughout this package. It is public, so
// anyone can make any account's token with it: it lets a new user try the
// API with curl on their own machine, and serves for nothing else.
const DemoSecret = "idemgen-example-demo-secret"

// The types of the account check's refusals.
const (
	ProblemUnauthenticated = "https://example.com/problems/unauthenticated"
	ProblemWrongAccount    = "https://example.com/problems/wrong-account"
)

// accountHeader names the caller's account; it scopes the keys.
const accountHeader = "X-Account-Id"

// tokenContext starts every MAC, so that a token cannot be a MAC made with
// the same secret for another purpose.
const tokenContext = "idemgen example account token v1\x00"

// tokenEncoding spells tokens: unpadded base64url, and strictly, so that
// each token has one spelling.
var tokenEncoding = base64.RawURLEncoding.Strict()

// Token returns account's bearer token under secret: HMAC-SHA256 of the
// account keyed by the secret, in unpadded base64url. The server makes the
// expected token again for each request, so any account id works and
// there is no table of tokens to keep; whoever holds the secret can make
// any account's token.
func Token(secret, account string) string {
	return tokenEncoding.EncodeToString(accountMAC(secret, account))
}

func accountMAC(secret, account string) []byte {
	if secret == "" {
		secret = DemoSecret
	}
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(tokenContext))
	m.Write([]byte(account))
	return m.Sum(nil)
}

// Authenticate returns the strict middleware that lets a request through
// only when its Authorization header holds the bearer token of the account
// in its X-Account-Id (see Token). Every operation of the API but the
// payment provider's webhook takes that header, so every one is checked:
// reads too, since they are the account's. It refuses with an *idem.Problem, which the handler answers
// as it is: 401 without a token of the right form, 403 with a token of
// another account.
func Authenticate(secret string) gen.StrictMiddlewareFunc {
	return func(next gen.StrictHandlerFunc, operationID string) gen.StrictHandlerFunc {
		if operationID == webhookOperation {
			return next // signed by the provider instead (webhooks.go)
		}
		return func(ctx context.Context, w http.ResponseWriter, r *http.Request, request any) (any, error) {
			if p := checkAccount(secret, r); p != nil {
				if p.Status == http.StatusUnauthorized {
					// RFC 9110: a 401 names the scheme to authenticate with.
					w.Header().Set("WWW-Authenticate", `Bearer realm="orders-api"`)
				}
				return nil, p
			}
			return next(ctx, w, r, request)
		}
	}
}

// checkAccount returns the refusal of r, or nil when its token is its
// account's.
func checkAccount(secret string, r *http.Request) *idem.Problem {
	sent, problem := bearerToken(r.Header.Values("Authorization"))
	if problem != nil {
		return problem
	}
	// The route gate and the parameter binding refuse a missing or
	// repeated header before this runs; an empty one may get here, and no
	// token belongs to no account.
	accounts := r.Header.Values(accountHeader)
	if len(accounts) != 1 || accounts[0] == "" || !hmac.Equal(sent, accountMAC(secret, accounts[0])) {
		return &idem.Problem{
			Type:   ProblemWrongAccount,
			Title:  "Wrong account",
			Status: http.StatusForbidden,
			Detail: "The bearer token does not belong to the account in X-Account-Id. Send the token of that account; the request was not run, and nothing was stored under its Idempotency-Key.",
		}
	}
	return nil
}

// bearerToken returns the MAC that an Authorization header's values carry
// as a bearer token, or the 401 that says what to send instead.
func bearerToken(values []string) ([]byte, *idem.Problem) {
	if len(values) == 0 {
		return nil, unauthenticated("The request has no Authorization header.")
	}
	if len(values) > 1 {
		return nil, unauthenticated("The request has more than one Authorization header.")
	}
	scheme, token, _ := strings.Cut(strings.TrimSpace(values[0]), " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return nil, unauthenticated("The request's Authorization header is not a bearer token.")
	}
	mac, err := tokenEncoding.DecodeString(strings.TrimSpace(token))
	if err != nil || len(mac) != sha256.Size {
		return nil, unauthenticated("The request's bearer token is not of the form this API issues.")
	}
	return mac, nil
}

func unauthenticated(what string) *idem.Problem {
	return &idem.Problem{
		Type:   ProblemUnauthenticated,
		Title:  "Unauthenticated",
		Status: http.StatusUnauthorized,
		Detail: what + " Send the header Authorization: Bearer TOKEN, where TOKEN is the token of the account in X-Account-Id (orders-api -token ACCOUNT prints it); the request was not run, and nothing was stored under its Idempotency-Key.",
	}
}
