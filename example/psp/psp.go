// Package psp is the example's payment provider: a fake one that keeps
// its charges in memory, and the client the example's createPayment uses
// to charge it. Like a real provider, it makes each charge once per
// Idempotency-Key and replays the answer to a retry; and, given a webhook
// URL, it sends a payment.succeeded event for each charge, signed the
// Standard Webhooks way, delivering it again until it gets a 2xx.
package psp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
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

// defaultCurrency is the currency of a charge request that names none.
const defaultCurrency = "EUR"

// maxBody bounds a charge request's body; a charge is a few dozen bytes.
const maxBody = 64 << 10

// Stats counts what a Fake did.
type Stats struct {
	// Requests counts every POST /v1/charges received, replays and
	// refused requests included.
	Requests int `json:"requests"`
	// Charges counts the charges made: one per Idempotency-Key.
	Charges int `json:"charges"`
	// Declines counts the charges declined: one per Idempotency-Key.
	Declines int `json:"declines"`
}

// Fake is an in-memory payment provider serving POST /v1/charges and
// GET /v1/stats, and with webhooks GET /v1/events and POST
// /v1/events/{id}/redeliver. It is safe for concurrent use.
type Fake struct {
	mu    sync.Mutex
	keys  map[string]stored
	stats Stats

	hooks   *webhooks      // nil when it sends no events
	events  []Event        // sent, oldest first
	changed chan struct{}  // closed and replaced when an event changes
	sending sync.WaitGroup // deliveries in the background
	stop    context.CancelFunc
}

// stored is the first answer to an Idempotency-Key, with the request it
// answered so that a reuse of the key for another charge can be refused.
type stored struct {
	req    ChargeRequest
	status int
	body   []byte
}

// NewFake returns a provider with no charges, which sends no events.
func NewFake() *Fake {
	return &Fake{keys: make(map[string]stored), changed: make(chan struct{}), stop: func() {}}
}

// NewFakeSending returns a provider with no charges, which sends an event
// for each charge it makes as opts say. Close it to stop the deliveries.
func NewFakeSending(opts WebhookOptions) (*Fake, error) {
	if opts.URL == "" {
		return nil, errors.New("psp: WebhookOptions.URL is empty; give the receiver's URL")
	}
	f := NewFake()
	ctx, stop := context.WithCancel(context.Background())
	hooks, err := newWebhooks(ctx, opts)
	if err != nil {
		stop()
		return nil, err
	}
	f.hooks, f.stop = hooks, stop
	return f, nil
}

// Close stops the deliveries in flight and waits for them to end.
func (f *Fake) Close() {
	f.stop()
	f.sending.Wait()
}

// Stats returns the counts so far.
func (f *Fake) Stats() Stats {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stats
}

// ServeHTTP serves POST /v1/charges and GET /v1/stats, and a JSON 404 for
// anything else.
func (f *Fake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/v1/charges":
		f.charge(w, r)
	case r.Method == http.MethodGet && r.URL.Path == "/v1/stats":
		writeJSON(w, http.StatusOK, f.Stats())
	case r.Method == http.MethodGet && r.URL.Path == "/v1/events":
		writeJSON(w, http.StatusOK, f.Events())
	case r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/v1/events/") && strings.HasSuffix(r.URL.Path, "/redeliver"):
		f.redeliver(w, strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/v1/events/"), "/redeliver"))
	default:
		writeError(w, http.StatusNotFound, "not_found", "no such endpoint; the fake serves POST /v1/charges, GET /v1/stats, GET /v1/events and POST /v1/events/{id}/redeliver")
	}
}

func (f *Fake) charge(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.stats.Requests++
	f.mu.Unlock()

	key := r.Header.Get("Idempotency-Key")
	if key == "" {
		writeError(w, http.StatusBadRequest, "missing_idempotency_key", "send an Idempotency-Key header with every charge")
		return
	}
	var req ChargeRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody)).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request", "the body is not a charge: "+err.Error())
		return
	}
	if req.AmountCents <= 0 {
		writeError(w, http.StatusBadRequest, "invalid_request", "amount_cents must be positive")
		return
	}
	if req.Currency == "" {
		// Defaulted before the comparison with a stored request, so that
		// leaving the currency out and sending "EUR" are the same charge.
		req.Currency = defaultCurrency
	}

	s, replayed, reused := f.once(key, req)
	if reused {
		writeError(w, http.StatusUnprocessableEntity, "idempotency_key_reused", "this Idempotency-Key was used for a different charge; send a new key for a new charge")
		return
	}
	if replayed {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	if !replayed && s.status == http.StatusCreated && f.hooks != nil {
		var c Charge
		_ = json.Unmarshal(s.body, &c) // encoded by once
		f.sendEvent(c)
	}
	writeBody(w, s.status, s.body)
}

// redeliver serves POST /v1/events/{id}/redeliver: the answer to one
// more delivery of the event.
func (f *Fake) redeliver(w http.ResponseWriter, id string) {
	d, err := f.Redeliver(id)
	switch {
	case errors.Is(err, ErrNoEvent):
		writeError(w, http.StatusNotFound, "not_found", "no event "+id+"; GET /v1/events lists them")
	case err != nil:
		writeError(w, http.StatusConflict, "no_webhooks", err.Error())
	default:
		writeJSON(w, http.StatusOK, d)
	}
}

// once returns the answer stored for key, making the charge first if the
// key is new. The lock is held from the lookup to the store, so that
// concurrent retries of one key make one charge; the answer is written
// after it is released, so a slow client holds up no one.
func (f *Fake) once(key string, req ChargeRequest) (s stored, replayed, reused bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if s, ok := f.keys[key]; ok {
		return s, s.req == req, s.req != req
	}
	c := Charge{
		ID:          "ch_" + randomHex(8),
		AmountCents: req.AmountCents,
		Currency:    req.Currency,
		Reference:   req.Reference,
		Status:      StatusSucceeded,
	}
	status := http.StatusCreated
	if req.AmountCents == DeclineAmount {
		c.Status, c.DeclineCode, status = StatusDeclined, "card_declined", http.StatusPaymentRequired
		f.stats.Declines++
	} else {
		f.stats.Charges++
	}
	body, _ := json.Marshal(c) // a Charge always encodes
	s = stored{req: req, status: status, body: body}
	f.keys[key] = s
	return s, false, false
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, _ := json.Marshal(v) // only this package's types, which always encode
	writeBody(w, status, body)
}

func writeBody(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

func writeError(w http.ResponseWriter, status int, code, message string) {
	writeJSON(w, status, apiError{Code: code, Message: message})
}

// apiError is the body of every answer that is not a charge or stats.
type apiError struct {
	Code    string `json:"error"`
	Message string `json:"message"`
}

// randomHex returns n random bytes as 2n hex characters.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails, per crypto/rand
	return hex.EncodeToString(b)
}
