package idemclient_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemgen/idemgen/idem/idemclient"
)

// server answers each request with the next status of its script and
// records the keys it was sent; a status of 0 drops the connection.
type server struct {
	mu     sync.Mutex
	script []int
	keys   []string
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	status := 200
	if len(s.keys) < len(s.script) {
		status = s.script[len(s.keys)]
	}
	s.keys = append(s.keys, r.Header.Get("Idempotency-Key"))
	s.mu.Unlock()
	if status == 0 {
		conn, _, _ := w.(http.Hijacker).Hijack()
		conn.Close()
		return
	}
	if status == 409 || status == 503 {
		w.Header().Set("Retry-After", "0")
	}
	if status == 200 && len(s.keys) > 1 {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	w.WriteHeader(status)
}

func call(t *testing.T, script []int, opts idemclient.Options) (*server, *http.Response, idemclient.Call, error) {
	t.Helper()
	s := &server{script: script}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	opts.BaseDelay, opts.MaxDelay = time.Millisecond, 5*time.Millisecond
	resp, c, err := idemclient.Do(context.Background(), opts, func(ctx context.Context, key string) (*http.Response, error) {
		req, err := http.NewRequestWithContext(ctx, "POST", srv.URL, nil)
		if err != nil {
			return nil, err
		}
		if err := idemclient.WithKey(key)(ctx, req); err != nil {
			return nil, err
		}
		return srv.Client().Do(req)
	})
	if resp != nil {
		resp.Body.Close()
	}
	return s, resp, c, err
}

func TestDo(t *testing.T) {
	for _, tc := range []struct {
		name     string
		script   []int
		status   int // 0: an error
		attempts int
		replayed bool
	}{
		{"answered at once", []int{201}, 201, 1, false},
		{"409 then the stored answer", []int{409, 409, 200}, 200, 3, true},
		{"503 then the answer", []int{503, 201}, 201, 2, false},
		{"dropped connection then the stored answer", []int{0, 200}, 200, 2, true},
		{"422 is not retried", []int{422}, 422, 1, false},
		{"400 is not retried", []int{400}, 400, 1, false},
		{"gives up on 409 after MaxAttempts", []int{409, 409, 409, 409, 409, 409, 409}, 409, 5, false},
		{"gives up on dropped connections", []int{0, 0, 0, 0, 0, 0}, 0, 5, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, resp, c, err := call(t, tc.script, idemclient.Options{})
			switch {
			case tc.status == 0 && err == nil:
				t.Fatalf("answer %d, want an error", resp.StatusCode)
			case tc.status != 0 && (err != nil || resp.StatusCode != tc.status):
				t.Fatalf("%v %v, want %d", resp, err, tc.status)
			}
			if c.Attempts != tc.attempts || len(s.keys) != tc.attempts || c.Replayed != tc.replayed {
				t.Fatalf("%+v after %d requests, want %d attempts, replayed %v", c, len(s.keys), tc.attempts, tc.replayed)
			}
			for _, k := range s.keys {
				if k != c.Key || len(k) != 36 {
					t.Fatalf("keys sent %q, want %q on every attempt", s.keys, c.Key)
				}
			}
		})
	}
}

// Each logical call gets its own key.
func TestFreshKeyPerCall(t *testing.T) {
	_, _, a, _ := call(t, []int{201}, idemclient.Options{})
	_, _, b, _ := call(t, []int{201}, idemclient.Options{})
	if a.Key == b.Key {
		t.Fatalf("two calls sent the same key %q", a.Key)
	}
}

// Keys of a KeyFormat have its prefix and length, only characters of its
// alphabet, every character about equally often, and no repeats.
func TestKeyFormat(t *testing.T) {
	f := idemclient.KeyFormat{Prefix: "idem_", Alphabet: idemclient.Alphanumeric, Len: 20}
	if err := f.Check(); err != nil {
		t.Fatal(err)
	}
	if bits := f.Bits(); bits < 119 || bits > 120 {
		t.Fatalf("Bits() = %v, want 20*log2(62) = 119.08", bits)
	}
	counts := map[byte]int{}
	seen := map[string]bool{}
	const keys = 3000
	for range keys {
		k := f.NewKey()
		if len(k) != 25 || !strings.HasPrefix(k, "idem_") || seen[k] {
			t.Fatalf("key %q: want idem_ and 20 characters, never repeated", k)
		}
		seen[k] = true
		for i := 5; i < len(k); i++ {
			if !strings.ContainsRune(idemclient.Alphanumeric, rune(k[i])) {
				t.Fatalf("key %q holds %q, not of the alphabet", k, k[i])
			}
			counts[k[i]]++
		}
	}
	// 60000 characters over 62: about 968 each; a biased draw (b % 62
	// without rejection) gives the first 8 characters a quarter more.
	for _, c := range []byte(idemclient.Alphanumeric) {
		if n := counts[c]; n < 800 || n > 1150 {
			t.Errorf("character %q drawn %d times in %d, want about %d", c, n, keys*20, keys*20/62)
		}
	}
	if k := (idemclient.KeyFormat{}).NewKey(); len(k) != 36 || k[14] != '4' {
		t.Fatalf("the zero format made %q, want a random UUID", k)
	}
}

func TestKeyFormatCheck(t *testing.T) {
	for _, a := range []string{idemclient.Alphanumeric, idemclient.Base64URL, idemclient.LowerAlphanumeric, idemclient.UpperAlphanumeric, idemclient.LowerHex, idemclient.UpperHex, idemclient.LowerLetters, idemclient.UpperLetters, idemclient.Digits} {
		if err := (idemclient.KeyFormat{Alphabet: a, Len: 10}).Check(); err != nil {
			t.Errorf("the package's own alphabet: %v", err)
		}
	}
	for _, f := range []idemclient.KeyFormat{
		{Alphabet: idemclient.Digits},
		{Alphabet: "a", Len: 10},
		{Alphabet: "abca", Len: 10},
		{Alphabet: "ab,", Len: 10},
		{Alphabet: `ab"`, Len: 10},
		{Alphabet: "ab ", Len: 10},
		{Alphabet: "ab", Len: 256},
		{Prefix: "k,", Alphabet: "ab", Len: 10},
	} {
		if err := f.Check(); err == nil {
			t.Errorf("%+v: Check accepted it", f)
		}
	}
	// Do refuses such a format before sending anything, unless NewKey
	// makes the keys.
	s, _, _, err := call(t, []int{201}, idemclient.Options{Keys: idemclient.KeyFormat{Alphabet: "a", Len: 10}})
	if err == nil || len(s.keys) != 0 {
		t.Fatalf("Do with an alphabet of one character: %v after %d requests, want an error and none", err, len(s.keys))
	}
	s, _, c, err := call(t, []int{201}, idemclient.Options{Keys: idemclient.KeyFormat{Alphabet: "a", Len: 10}, NewKey: func() string { return "k1" }})
	if err != nil || c.Key != "k1" || len(s.keys) != 1 {
		t.Fatalf("Do with NewKey set: %v, key %q, want NewKey's key sent once", err, c.Key)
	}
}

// Every attempt of a call sends the same key of Options.Keys.
func TestKeysOption(t *testing.T) {
	s, _, c, err := call(t, []int{409, 201}, idemclient.Options{Keys: idemclient.KeyFormat{Alphabet: idemclient.LowerHex, Len: 20}})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range s.keys {
		if k != c.Key || len(k) != 20 || strings.Trim(k, idemclient.LowerHex) != "" {
			t.Fatalf("keys sent %q, want one key of 20 lower-case hex digits on every attempt", s.keys)
		}
	}
}

// With RetryHeader, the server's word decides: a 500 it says to retry is
// retried, a 409 it says not to retry is not, and an answer without the
// header is retried by its status.
func TestRetryHeader(t *testing.T) {
	type answer struct {
		status int
		retry  string
	}
	for _, tc := range []struct {
		name     string
		script   []answer
		status   int
		attempts int
	}{
		{"500 the server says to retry", []answer{{500, "true"}, {201, ""}}, 201, 2},
		{"409 the server says not to retry", []answer{{409, "false"}}, 409, 1},
		{"422 the server says not to retry", []answer{{422, "false"}}, 422, 1},
		{"no header: by the status", []answer{{503, ""}, {201, ""}}, 201, 2},
		{"no header, 500: not retried", []answer{{500, ""}}, 500, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			n := 0
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				a := tc.script[min(n, len(tc.script)-1)]
				n++
				mu.Unlock()
				if a.retry != "" {
					w.Header().Set("Stripe-Should-Retry", a.retry)
				}
				w.WriteHeader(a.status)
			}))
			defer srv.Close()
			opts := idemclient.Options{RetryHeader: "Stripe-Should-Retry", BaseDelay: time.Millisecond, MaxDelay: time.Millisecond}
			resp, c, err := idemclient.Do(context.Background(), opts, func(ctx context.Context, key string) (*http.Response, error) {
				req, err := http.NewRequestWithContext(ctx, "POST", srv.URL, nil)
				if err != nil {
					return nil, err
				}
				return srv.Client().Do(req)
			})
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.status || c.Attempts != tc.attempts {
				t.Fatalf("answer %d after %d attempts, want %d after %d", resp.StatusCode, c.Attempts, tc.status, tc.attempts)
			}
		})
	}
}
