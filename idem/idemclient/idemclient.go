// Package idemclient is the client's half of the Idempotency-Key
// protocol: one logical call sends one fresh key, and every retry of it,
// after a transport error, a 409 or a 503, sends the same key, so the
// server runs the call at most once and the retry gets its answer.
// idemgen's generated clients call Do; it works with any HTTP client.
package idemclient

import (
	"context"
	crand "crypto/rand"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"
)

// Options bound the retries of one logical call. The zero value works:
// up to 5 attempts within 30 seconds, backing off from 100ms to 5s.
type Options struct {
	// MaxAttempts bounds the attempts, the first included; zero means 5.
	MaxAttempts int
	// MaxElapsed bounds the time from the first attempt to the start of
	// the last; zero means 30s. The context's deadline bounds it too.
	MaxElapsed time.Duration
	// BaseDelay and MaxDelay bound the jittered exponential backoff
	// between attempts; zero means 100ms and 5s. A Retry-After from the
	// server is honoured instead, up to MaxDelay.
	BaseDelay, MaxDelay time.Duration
	// NewKey makes the key of a logical call; nil makes a random UUID.
	NewKey func() string
}

// Call describes how a logical call went.
type Call struct {
	// Key is the Idempotency-Key every attempt sent.
	Key string
	// Attempts counts the requests sent.
	Attempts int
	// Replayed is true when the answer is the stored response of an
	// earlier attempt (Idempotent-Replayed: true).
	Replayed bool
}

// Do runs a logical call: send with a fresh key, then again with the same
// key after a transport error, a 409 (the first attempt still runs) or a
// 503 (the server's key store is unavailable), until an answer comes or
// the bounds are reached. Any other answer, 4xx included, is returned at
// once. When the bounds are reached, Do returns the last answer, or the
// last transport error.
func Do(ctx context.Context, opts Options, send func(ctx context.Context, key string) (*http.Response, error)) (*http.Response, Call, error) {
	opts = opts.withDefaults()
	call := Call{Key: opts.NewKey()}
	start := time.Now()
	for {
		call.Attempts++
		resp, err := send(ctx, call.Key)
		if err == nil && !retryable(resp.StatusCode) {
			call.Replayed = resp.Header.Get("Idempotent-Replayed") == "true"
			return resp, call, nil
		}
		if ctx.Err() != nil {
			closeBody(resp)
			return nil, call, fmt.Errorf("idemclient: call with key %s: %w", call.Key, ctx.Err())
		}
		delay := opts.backoff(call.Attempts, resp)
		if call.Attempts >= opts.MaxAttempts || time.Since(start)+delay > opts.MaxElapsed {
			if err != nil {
				return nil, call, fmt.Errorf("idemclient: call with key %s: gave up after %d attempts: %w", call.Key, call.Attempts, err)
			}
			return resp, call, nil
		}
		closeBody(resp)
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, call, fmt.Errorf("idemclient: call with key %s: %w", call.Key, ctx.Err())
		case <-t.C:
		}
	}
}

// retryable reports the answers a retry with the same key may change.
func retryable(status int) bool {
	return status == http.StatusConflict || status == http.StatusServiceUnavailable
}

func (o Options) withDefaults() Options {
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = 5
	}
	if o.MaxElapsed <= 0 {
		o.MaxElapsed = 30 * time.Second
	}
	if o.BaseDelay <= 0 {
		o.BaseDelay = 100 * time.Millisecond
	}
	if o.MaxDelay <= 0 {
		o.MaxDelay = 5 * time.Second
	}
	if o.NewKey == nil {
		o.NewKey = NewKey
	}
	return o
}

// backoff is the wait before the next attempt: the server's Retry-After
// when it sent one, else a full-jitter exponential delay.
func (o Options) backoff(attempt int, resp *http.Response) time.Duration {
	if resp != nil {
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s >= 0 {
			return min(time.Duration(s)*time.Second, o.MaxDelay)
		}
	}
	ceiling := min(o.BaseDelay<<min(attempt-1, 30), o.MaxDelay)
	return time.Duration(rand.Int64N(int64(ceiling) + 1))
}

func closeBody(resp *http.Response) {
	if resp != nil && resp.Body != nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		_ = resp.Body.Close()
	}
}

// NewKey returns a random UUID (version 4), a good Idempotency-Key.
func NewKey() string {
	var b [16]byte
	_, _ = crand.Read(b[:]) // never fails, per crypto/rand
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// WithKey returns an oapi-codegen RequestEditorFn that sets the key.
func WithKey(key string) func(ctx context.Context, req *http.Request) error {
	return func(_ context.Context, req *http.Request) error {
		req.Header.Set("Idempotency-Key", key)
		return nil
	}
}
