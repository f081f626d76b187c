// Package psp is the example's payment provider: a fake one that keeps
// its charges in memory, and the client the example's createPayment uses
// to charge it. Like a real provider, it makes each charge once per
// Idempotency-Key and replays the answer to a retry.
package psp

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"sync"
)

// Charge statuses.
const (
	StatusSucceeded = "succeeded"
	StatusDeclined  = "declined"
)

// DeclineAmount is the amount, in cents, that the fake always declines,
// so that demos and tests can show a decline.
const DeclineAmount int64 = 4000

// Stats counts what a Fake did.
type Stats struct {
	// Requests counts every charge request received, retries included.
	Requests int `json:"requests"`
	// Charges counts the charges made: one per Idempotency-Key.
	Charges int `json:"charges"`
	// Declines counts the charges declined: one per Idempotency-Key.
	Declines int `json:"declines"`
}

// Fake is an in-memory payment provider serving POST /v1/charges and
// GET /v1/stats. It is safe for concurrent use.
type Fake struct {
	mu    sync.Mutex
	keys  map[string]*stored
	stats Stats
}

type stored struct {
	req    ChargeRequest
	status int
	body   []byte
}

// NewFake returns a provider with no charges.
func NewFake() *Fake {
	return &Fake{keys: make(map[string]*stored)}
}

// Stats returns the counts so far.
func (f *Fake) Stats() Stats {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stats
}

func (f *Fake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/v1/charges":
		f.charge(w, r)
	case r.Method == http.MethodGet && r.URL.Path == "/v1/stats":
		writeJSON(w, http.StatusOK, f.Stats())
	default:
		writeError(w, http.StatusNotFound, "not_found", "no such endpoint; the fake serves POST /v1/charges and GET /v1/stats")
	}
}

func (f *Fake) charge(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get("Idempotency-Key")
	f.mu.Lock()
	f.stats.Requests++
	f.mu.Unlock()
	if key == "" {
		writeError(w, http.StatusBadRequest, "missing_idempotency_key", "send an Idempotency-Key header with every charge")
		return
	}
	var req ChargeRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request", "the body is not a charge: "+err.Error())
		return
	}
	if req.AmountCents <= 0 {
		writeError(w, http.StatusBadRequest, "invalid_request", "amount_cents must be positive")
		return
	}
	if req.Currency == "" {
		req.Currency = "EUR"
	}

	// The lock is held across the whole charge so that concurrent retries
	// of one key make one charge.
	f.mu.Lock()
	defer f.mu.Unlock()
	if s, ok := f.keys[key]; ok {
		if s.req != req {
			writeError(w, http.StatusUnprocessableEntity, "idempotency_key_reused", "this Idempotency-Key was used for a different charge")
			return
		}
		w.Header().Set("Idempotent-Replayed", "true")
		writeBody(w, s.status, s.body)
		return
	}
	c := Charge{ID: "ch_" + randomHex(8), AmountCents: req.AmountCents, Currency: req.Currency, Reference: req.Reference, Status: StatusSucceeded}
	status := http.StatusCreated
	if req.AmountCents == DeclineAmount {
		c.Status, c.DeclineCode, status = StatusDeclined, "card_declined", http.StatusPaymentRequired
		f.stats.Declines++
	} else {
		f.stats.Charges++
	}
	body, _ := json.Marshal(c) // a Charge always encodes
	f.keys[key] = &stored{req: req, status: status, body: body}
	writeBody(w, status, body)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, _ := json.Marshal(v) // only this package's types, which always encode
	writeBody(w, status, body)
}

func writeBody(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(bytes.TrimSpace(body))
}

func writeError(w http.ResponseWriter, status int, code, message string) {
	writeJSON(w, status, apiError{Code: code, Message: message})
}

type apiError struct {
	Code    string `json:"error"`
	Message string `json:"message"`
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails, per crypto/rand
	return hex.EncodeToString(b)
}
