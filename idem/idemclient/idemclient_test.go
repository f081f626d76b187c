package idemclient_test

import (
	"context"
	"net/http"
	"net/http/httptest"
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
