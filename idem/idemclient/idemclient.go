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
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
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
	// NewKey makes the key of a logical call; nil makes a key of Keys.
	// When set, it makes every call's key, whatever limits an operation
	// declares for its keys.
	NewKey func() string
	// RetryHeader, when set, names a header by which the server says
	// whether a retry with the same key is right, as Stripe-Should-Retry
	// does: an answer with it "true" is retried, one with it "false" is
	// not, whatever its status. An answer without it is retried by its
	// status alone (409 and 503). A generated IdempotentClient sets it
	// from the config's errors.retry-header.
	RetryHeader string
	// Keys is the format of the keys made when NewKey is nil; the zero
	// value makes random UUIDs. A generated IdempotentClient sets it for
	// each operation whose spec limits its Idempotency-Key to keys a UUID
	// does not fit.
	Keys KeyFormat
}

// KeyFormat describes random keys: Prefix, then Len characters each drawn
// uniformly and independently from Alphabet with crypto/rand. The zero
// value stands for random UUIDs (NewKey).
type KeyFormat struct {
	Prefix   string
	Alphabet string
	Len      int
}

// Alphabets for KeyFormat. Their characters are printable ASCII that a
// server takes as they are: no space, comma or double quote.
const (
	Alphanumeric      = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	Base64URL         = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	LowerAlphanumeric = "0123456789abcdefghijklmnopqrstuvwxyz"
	UpperAlphanumeric = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	LowerHex          = "0123456789abcdef"
	UpperHex          = "0123456789ABCDEF"
	LowerLetters      = "abcdefghijklmnopqrstuvwxyz"
	UpperLetters      = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	Digits            = "0123456789"
)

// uuidBits is the entropy of a random (version 4) UUID.
const uuidBits = 122

// NewKey returns a random key of the format; the zero format makes a
// random UUID. It panics on a format Check refuses.
func (f KeyFormat) NewKey() string {
	if f == (KeyFormat{}) {
		return NewKey()
	}
	if err := f.Check(); err != nil {
		panic("idemclient: " + err.Error())
	}
	n := len(f.Alphabet)
	// Bytes at or above the largest multiple of n that fits in a byte
	// are drawn again, so that every character is equally likely.
	limit := 256 - 256%n
	key := make([]byte, len(f.Prefix), len(f.Prefix)+f.Len)
	copy(key, f.Prefix)
	buf := make([]byte, f.Len+f.Len/2+1)
	for len(key) < cap(key) {
		_, _ = crand.Read(buf) // never fails, per crypto/rand
		for _, b := range buf {
			if int(b) < limit && len(key) < cap(key) {
				key = append(key, f.Alphabet[int(b)%n])
			}
		}
	}
	return string(key)
}

// Bits is the entropy of a key of the format, in bits: that of its random
// characters.
func (f KeyFormat) Bits() float64 {
	if f == (KeyFormat{}) {
		return uuidBits
	}
	return float64(f.Len) * math.Log2(float64(len(f.Alphabet)))
}

// Check reports a format whose keys a server would refuse or that has no
// randomness: keys are 1 to 255 characters of printable ASCII (no space,
// comma or double quote, which a server reads as separators or quoting),
// made of at least one random character from an alphabet of at least two
// distinct characters.
func (f KeyFormat) Check() error {
	if f == (KeyFormat{}) {
		return nil
	}
	switch {
	case f.Len < 1:
		return fmt.Errorf("key format: Len is %d; expected at least 1", f.Len)
	case len(f.Prefix)+f.Len > maxKeyLen:
		return fmt.Errorf("key format: keys of %d characters; expected at most %d", len(f.Prefix)+f.Len, maxKeyLen)
	case len(f.Alphabet) < 2:
		return fmt.Errorf("key format: Alphabet %q; expected at least two characters", f.Alphabet)
	}
	for i := 0; i < len(f.Alphabet); i++ {
		if !keyChar(f.Alphabet[i]) {
			return fmt.Errorf("key format: Alphabet %q holds %q; expected printable ASCII other than space, comma and double quote", f.Alphabet, f.Alphabet[i])
		}
		if strings.IndexByte(f.Alphabet[:i], f.Alphabet[i]) >= 0 {
			return fmt.Errorf("key format: Alphabet %q holds %q twice; expected distinct characters, each as likely as the others", f.Alphabet, f.Alphabet[i])
		}
	}
	for i := 0; i < len(f.Prefix); i++ {
		if !keyChar(f.Prefix[i]) {
			return fmt.Errorf("key format: Prefix %q holds %q; expected printable ASCII other than space, comma and double quote", f.Prefix, f.Prefix[i])
		}
	}
	return nil
}

// maxKeyLen is the longest key a server of idem accepts (idem.MaxKeyLen;
// this package does not import the server's).
const maxKeyLen = 255

func keyChar(c byte) bool { return c > ' ' && c <= '~' && c != ',' && c != '"' }

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
	if opts.NewKey == nil {
		if err := opts.Keys.Check(); err != nil {
			return nil, Call{}, fmt.Errorf("idemclient: Options.Keys: %w", err)
		}
	}
	opts = opts.withDefaults()
	call := Call{Key: opts.NewKey()}
	start := time.Now()
	for {
		call.Attempts++
		resp, err := send(ctx, call.Key)
		if err == nil && !opts.retryable(resp) {
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

// retryable reports the answers a retry with the same key may change:
// as the server's retry header says, else by the status.
func (o Options) retryable(resp *http.Response) bool {
	if o.RetryHeader != "" {
		switch resp.Header.Get(o.RetryHeader) {
		case "true":
			return true
		case "false":
			return false
		}
	}
	return resp.StatusCode == http.StatusConflict || resp.StatusCode == http.StatusServiceUnavailable
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
		o.NewKey = o.Keys.NewKey
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
