package psp

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// EventPaymentSucceeded is the event the fake sends for each charge it
// makes.
const EventPaymentSucceeded = "payment.succeeded"

// WebhookOptions say where a Fake sends its events, and how it retries.
type WebhookOptions struct {
	// URL receives the events, such as http://127.0.0.1:8080/webhooks/psp.
	URL string
	// Secret signs each delivery the Standard Webhooks way: whsec_
	// followed by the base64 of the key. "" signs with a random key, which
	// no receiver knows.
	Secret string
	// Attempts bounds the deliveries of one event; 0 is 5.
	Attempts int
	// Backoff is the wait before the second delivery, doubled before each
	// one after it; 0 is 200ms. Real providers wait minutes to hours.
	Backoff time.Duration
	// HTTP sends the deliveries; nil uses a client with a 10s timeout.
	HTTP *http.Client
	// Now is the clock each delivery is signed and stamped with; nil is
	// time.Now.
	Now func() time.Time
}

// NewWebhookSecret returns a random secret of the form Secret takes.
func NewWebhookSecret() string {
	key := make([]byte, 24)
	_, _ = rand.Read(key) // never fails, per crypto/rand
	return "whsec_" + base64.StdEncoding.EncodeToString(key)
}

// Event is an event the fake sent, with each of its deliveries.
type Event struct {
	// ID is its webhook-id, the same in every delivery.
	ID         string          `json:"id"`
	Type       string          `json:"type"`
	Payload    json.RawMessage `json:"payload"`
	Deliveries []Delivery      `json:"deliveries"`
	// Done is set once a delivery got a 2xx, or the attempts ran out.
	Done bool `json:"done"`
}

// Delivery is one POST of an event and its answer.
type Delivery struct {
	Timestamp int64 `json:"timestamp"` // the webhook-timestamp sent
	// Status is the answer's, 0 when none came (Error says why).
	Status   int    `json:"status"`
	Replayed bool   `json:"replayed"` // Idempotent-Replayed: true
	Body     string `json:"body"`
	Error    string `json:"error,omitempty"`
}

// ok reports whether the receiver took the delivery.
func (d Delivery) ok() bool { return d.Status >= 200 && d.Status < 300 }

// webhooks is the sending half of a Fake, nil when it sends no events.
type webhooks struct {
	opts   WebhookOptions
	signer *standardwebhooks.Webhook
	ctx    context.Context // ends with the Fake
}

func newWebhooks(ctx context.Context, opts WebhookOptions) (*webhooks, error) {
	if opts.Secret == "" {
		opts.Secret = NewWebhookSecret()
	}
	signer, err := standardwebhooks.NewWebhook(opts.Secret)
	if err != nil {
		return nil, fmt.Errorf("psp: the webhook secret is not whsec_ and base64: %w", err)
	}
	if opts.Attempts <= 0 {
		opts.Attempts = 5
	}
	if opts.Backoff <= 0 {
		opts.Backoff = 200 * time.Millisecond
	}
	if opts.HTTP == nil {
		opts.HTTP = &http.Client{Timeout: 10 * time.Second}
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &webhooks{opts: opts, signer: signer, ctx: ctx}, nil
}

// sendEvent records a new event for the charge and delivers it in the
// background, again after each answer other than a 2xx, until the
// attempts run out or the Fake closes.
func (f *Fake) sendEvent(c Charge) {
	payload, _ := json.Marshal(map[string]any{ // only strings and numbers
		"type":      EventPaymentSucceeded,
		"timestamp": time.Now().UTC().Format(time.RFC3339),
		"data":      map[string]any{"payment_id": c.Reference, "charge_id": c.ID, "amount_cents": c.AmountCents, "currency": c.Currency},
	})
	ev := Event{ID: "msg_" + randomHex(12), Type: EventPaymentSucceeded, Payload: payload}
	f.mu.Lock()
	f.events = append(f.events, ev)
	f.mu.Unlock()
	f.sending.Go(func() {
		wait := f.hooks.opts.Backoff
		for attempt := 1; ; attempt++ {
			d := f.deliver(ev)
			if d.ok() || attempt == f.hooks.opts.Attempts {
				f.update(ev.ID, func(e *Event) { e.Done = true })
				return
			}
			select {
			case <-f.hooks.ctx.Done():
				return
			case <-time.After(wait):
			}
			wait *= 2
		}
	})
}

// deliver POSTs ev once, signed anew, and records the answer.
func (f *Fake) deliver(ev Event) Delivery {
	now := f.hooks.opts.Now()
	d := Delivery{Timestamp: now.Unix()}
	sig, err := f.hooks.signer.Sign(ev.ID, now, ev.Payload)
	if err != nil {
		d.Error = err.Error()
		return f.record(ev.ID, d)
	}
	r, err := http.NewRequestWithContext(f.hooks.ctx, http.MethodPost, f.hooks.opts.URL, bytes.NewReader(ev.Payload))
	if err != nil {
		d.Error = err.Error()
		return f.record(ev.ID, d)
	}
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set(standardwebhooks.HeaderWebhookID, ev.ID)
	r.Header.Set(standardwebhooks.HeaderWebhookTimestamp, strconv.FormatInt(d.Timestamp, 10))
	r.Header.Set(standardwebhooks.HeaderWebhookSignature, sig)
	resp, err := f.hooks.opts.HTTP.Do(r)
	if err != nil {
		d.Error = err.Error()
		return f.record(ev.ID, d)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		d.Error = err.Error()
	}
	d.Status, d.Body, d.Replayed = resp.StatusCode, string(body), resp.Header.Get("Idempotent-Replayed") == "true"
	return f.record(ev.ID, d)
}

// record appends d to the deliveries of event id.
func (f *Fake) record(id string, d Delivery) Delivery {
	f.update(id, func(e *Event) { e.Deliveries = append(e.Deliveries, d) })
	return d
}

// update changes event id and wakes those waiting for a change.
func (f *Fake) update(id string, change func(*Event)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if i := slices.IndexFunc(f.events, func(e Event) bool { return e.ID == id }); i >= 0 {
		change(&f.events[i])
	}
	close(f.changed)
	f.changed = make(chan struct{})
}

// Events returns the events sent so far, oldest first.
func (f *Fake) Events() []Event {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]Event, len(f.events))
	for i, e := range f.events {
		e.Deliveries = slices.Clone(e.Deliveries)
		out[i] = e
	}
	return out
}

// WaitEvent waits until an event satisfies cond, and returns it; or ctx
// ends first.
func (f *Fake) WaitEvent(ctx context.Context, cond func(Event) bool) (Event, error) {
	for {
		f.mu.Lock()
		changed := f.changed
		f.mu.Unlock()
		for _, e := range f.Events() {
			if cond(e) {
				return e, nil
			}
		}
		select {
		case <-ctx.Done():
			return Event{}, ctx.Err()
		case <-changed:
		}
	}
}

// ErrNoEvent reports a redelivery of an event the fake never sent.
var ErrNoEvent = errors.New("psp: no such event")

// Redeliver delivers event id once more, as a provider's dashboard or
// its retry schedule does, and returns the answer.
func (f *Fake) Redeliver(id string) (Delivery, error) {
	if f.hooks == nil {
		return Delivery{}, errors.New("psp: this fake sends no events")
	}
	for _, e := range f.Events() {
		if e.ID == id {
			return f.deliver(e), nil
		}
	}
	return Delivery{}, ErrNoEvent
}
