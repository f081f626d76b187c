package psp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
)

// Client calls a payment provider's charges API.
type Client struct {
	// BaseURL is the provider's, such as http://127.0.0.1:9090.
	BaseURL string
	// HTTP sends the requests; nil uses http.DefaultClient.
	HTTP *http.Client
}

// ChargeRequest is a charge to make.
type ChargeRequest struct {
	AmountCents int64  `json:"amount_cents"`
	Currency    string `json:"currency,omitempty"`
	// Reference is the caller's, such as its payment's ID.
	Reference string `json:"reference"`
}

// Charge is a charge the provider made or declined.
type Charge struct {
	ID          string `json:"id"`
	AmountCents int64  `json:"amount_cents"`
	Currency    string `json:"currency"`
	Reference   string `json:"reference"`
	// Status is StatusSucceeded or StatusDeclined.
	Status      string `json:"status"`
	DeclineCode string `json:"decline_code,omitempty"`
}

// Error is an answer of the provider other than a charge or its stats,
// such as a 422 for an Idempotency-Key reused for another charge.
type Error struct {
	// Status is the HTTP status code.
	Status int
	// Code is the provider's error code, such as "idempotency_key_reused",
	// or "unexpected_response" when the body is not one of its errors.
	Code string
	// Message is the provider's explanation, or the body it sent.
	Message string
}

// Error has no "psp:" prefix because the client's methods wrap it in one.
func (e *Error) Error() string {
	return fmt.Sprintf("provider answered %d %s: %s", e.Status, e.Code, e.Message)
}

// Charge creates a charge; idempotencyKey makes retries safe, because the
// provider makes the charge once per key and answers a retry with it. A
// decline is not an error: the charge comes back with Status
// StatusDeclined. Any answer other than 201 or 402 is an *Error.
func (c *Client) Charge(ctx context.Context, idempotencyKey string, req ChargeRequest) (Charge, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return Charge{}, fmt.Errorf("psp: charge: %w", err)
	}
	r, err := http.NewRequestWithContext(ctx, http.MethodPost, c.BaseURL+"/v1/charges", bytes.NewReader(body))
	if err != nil {
		return Charge{}, fmt.Errorf("psp: charge: %w", err)
	}
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Idempotency-Key", idempotencyKey)
	var ch Charge
	if err := c.do(r, &ch, http.StatusCreated, http.StatusPaymentRequired); err != nil {
		return Charge{}, fmt.Errorf("psp: charge: %w", err)
	}
	return ch, nil
}

// Stats reads what the fake provider counted, from GET /v1/stats.
func (c *Client) Stats(ctx context.Context) (Stats, error) {
	r, err := http.NewRequestWithContext(ctx, http.MethodGet, c.BaseURL+"/v1/stats", nil)
	if err != nil {
		return Stats{}, fmt.Errorf("psp: stats: %w", err)
	}
	var s Stats
	if err := c.do(r, &s, http.StatusOK); err != nil {
		return Stats{}, fmt.Errorf("psp: stats: %w", err)
	}
	return s, nil
}

// Events reads the events the fake provider sent, with their
// deliveries, from GET /v1/events.
func (c *Client) Events(ctx context.Context) ([]Event, error) {
	r, err := http.NewRequestWithContext(ctx, http.MethodGet, c.BaseURL+"/v1/events", nil)
	if err != nil {
		return nil, fmt.Errorf("psp: events: %w", err)
	}
	var events []Event
	if err := c.do(r, &events, http.StatusOK); err != nil {
		return nil, fmt.Errorf("psp: events: %w", err)
	}
	return events, nil
}

// Redeliver makes the fake provider deliver event id once more, as a
// provider's dashboard does, and returns that delivery's answer.
func (c *Client) Redeliver(ctx context.Context, id string) (Delivery, error) {
	r, err := http.NewRequestWithContext(ctx, http.MethodPost, c.BaseURL+"/v1/events/"+url.PathEscape(id)+"/redeliver", nil)
	if err != nil {
		return Delivery{}, fmt.Errorf("psp: redeliver: %w", err)
	}
	var d Delivery
	if err := c.do(r, &d, http.StatusOK); err != nil {
		return Delivery{}, fmt.Errorf("psp: redeliver: %w", err)
	}
	return d, nil
}

// do sends r and decodes an answer with one of the ok statuses into v.
func (c *Client) do(r *http.Request, v any, ok ...int) error {
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(r)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("read %d answer: %w", resp.StatusCode, err)
	}
	if slices.Contains(ok, resp.StatusCode) {
		if err := json.Unmarshal(body, v); err != nil {
			return fmt.Errorf("decode %d answer: %w", resp.StatusCode, err)
		}
		return nil
	}
	var e apiError
	if json.Unmarshal(body, &e) != nil || e.Code == "" {
		e = apiError{Code: "unexpected_response", Message: string(body)}
	}
	return &Error{Status: resp.StatusCode, Code: e.Code, Message: e.Message}
}
