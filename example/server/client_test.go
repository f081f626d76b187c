package server_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/idemgen/idemgen/example/gen"
	"github.com/idemgen/idemgen/idem/idemclient"
)

// lossyProxy forwards requests to the API and loses answers on the way
// back: a key's first request is run by the API but its response is
// dropped (the connection closed instead), its second is cut before it
// reaches the API, and later ones pass.
type lossyProxy struct {
	next *httputil.ReverseProxy
	mu   sync.Mutex
	seen map[string]int // requests by Idempotency-Key
}

func (p *lossyProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	key := r.Header.Get("Idempotency-Key")
	p.seen[key]++
	n := p.seen[key]
	p.mu.Unlock()
	drop := func() {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
	}
	switch n {
	case 1:
		rec := httptest.NewRecorder()
		p.next.ServeHTTP(rec, r) // the API runs it; the client never hears
		drop()
	case 2:
		drop()
	default:
		p.next.ServeHTTP(w, r)
	}
}

// Clients call createOrder through a proxy that drops answers and resets
// connections; the generated IdempotentClient retries each logical call
// with its one key until it gets the answer, and the API creates exactly
// one order per call.
func TestRetryingClientExactlyOnce(t *testing.T) {
	e := newEnv(t, nil)
	target, err := url.Parse(e.url)
	if err != nil {
		t.Fatal(err)
	}
	proxy := &lossyProxy{next: httputil.NewSingleHostReverseProxy(target), seen: map[string]int{}}
	srv := httptest.NewServer(proxy)
	t.Cleanup(srv.Close)
	// The generated client sends the spec's parameters; the token, which
	// the spec does not declare, goes on every request.
	c, err := gen.NewClient(srv.URL, gen.WithRequestEditorFn(func(_ context.Context, req *http.Request) error {
		req.Header.Set("Authorization", bearer("acct_1"))
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	client := gen.NewIdempotentClient(c, idemclient.Options{BaseDelay: time.Millisecond, MaxDelay: 20 * time.Millisecond, MaxAttempts: 10})

	const calls = 20
	var wg sync.WaitGroup
	results := make([]idemclient.Call, calls)
	errs := make([]error, calls)
	statuses := make([]int, calls)
	for i := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, call, err := client.CreateOrder(context.Background(), &gen.CreateOrderParams{XAccountId: "acct_1"},
				gen.CreateOrderJSONRequestBody{AmountCents: int64(100 + i), Currency: "EUR", CustomerId: fmt.Sprintf("cus_%d", i)})
			results[i], errs[i] = call, err
			if resp != nil {
				statuses[i] = resp.StatusCode
				resp.Body.Close()
			}
		}()
	}
	wg.Wait()
	keys := map[string]bool{}
	for i := range calls {
		if errs[i] != nil || statuses[i] != 201 || !results[i].Replayed {
			t.Errorf("call %d: %d %+v %v; want the 201 the API stored, replayed", i, statuses[i], results[i], errs[i])
		}
		keys[results[i].Key] = true
	}
	if len(keys) != calls {
		t.Errorf("%d distinct keys for %d calls", len(keys), calls)
	}
	for key, n := range proxy.seen {
		if n < 3 {
			t.Errorf("key %s reached the proxy %d times; the script loses the first two", key, n)
		}
	}
	e.expect(calls, calls, calls)
}
