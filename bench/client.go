package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemgen/idemgen/example/server"
	"github.com/idemgen/idemgen/idem"
)

// account is the X-Account-Id of the requests: the scope of the keys.
const account = "acct_bench"

// exportAccount is the X-Account-Id of the export scenarios: an account
// of its own, without orders, so that an export's CSV stays one header
// line however many orders the other scenarios create.
const exportAccount = "acct_bench_exports"

// authSecret is the secret of the orders-api's bearer tokens in a run
// (startServer sets it); every request carries its account's token, which
// the orders-api checks and the other servers ignore.
const authSecret = "idemgen-bench-secret"

// authorization is each account's Authorization header, made once so
// that requests do not pay for the MAC.
var authorization = map[string]string{
	account:       "Bearer " + server.Token(authSecret, account),
	exportAccount: "Bearer " + server.Token(authSecret, exportAccount),
}

// outcome is what a response says happened.
type outcome int

const (
	outFirst    outcome = iota // the handler ran: 201 without Idempotent-Replayed
	outReplay                  // 201 with Idempotent-Replayed: true
	outConflict                // 409: the key's first attempt is in flight
	outMismatch                // 422: the key was used for another request
	outRead                    // 200: a read answered
	outAccepted                // 202: an async request accepted, or a retry of one not done yet
	outPending                 // 200 with Retry-After: the status of an async request not done yet
	outOther                   // any other status, or no response
	numOutcomes
)

var outcomeNames = [numOutcomes]string{"first", "replay", "409", "422", "read", "accepted", "pending", "other"}

func (o outcome) String() string { return outcomeNames[o] }

func classify(status int, h http.Header) outcome {
	switch {
	case status == http.StatusCreated && h.Get(idem.HeaderReplayed) == "true":
		return outReplay
	case status == http.StatusCreated:
		return outFirst
	case status == http.StatusConflict:
		return outConflict
	case status == http.StatusUnprocessableEntity:
		return outMismatch
	case status == http.StatusAccepted:
		return outAccepted
	case status == http.StatusOK && h.Get("Retry-After") != "":
		// Only a status resource says when to ask again.
		return outPending
	case status == http.StatusOK:
		return outRead
	}
	return outOther
}

// request is what a client sends: a POST of body to path (or a GET, when
// get is set), with key as its Idempotency-Key unless empty, for account
// (the bench's account when empty).
type request struct {
	get     bool
	path    string
	key     string
	body    []byte
	account string
}

// setHeaders sets r's headers on req.
func (r request) setHeaders(req *http.Request) {
	if !r.get {
		req.Header.Set("Content-Type", "application/json")
	}
	acct := cmp.Or(r.account, account)
	req.Header.Set("X-Account-Id", acct)
	req.Header.Set("Authorization", authorization[acct])
	if r.key != "" {
		req.Header.Set(idem.HeaderKey, r.key)
	}
}

// client is one closed-loop load generator with its own keep-alive
// connection: it sends the next request when the last one is answered.
type client struct {
	id   int
	base string
	http *http.Client
	// seq counts the requests this client built, for fresh keys.
	seq int
	// orderID and payment are the client's order and the body that pays
	// it, for the phased scenario.
	orderID string
	payment []byte

	// What the current phase saw.
	latencies []time.Duration
	outcomes  [numOutcomes]int64
	failures  int64 // requests without a response
	sample    string
}

func newClient(id int, base string) *client {
	return &client{
		id:   id,
		base: base,
		http: &http.Client{
			Timeout: time.Minute,
			Transport: &http.Transport{
				// One connection, kept alive: the load is conns
				// connections, as a pool of API clients would hold.
				MaxConnsPerHost:     1,
				MaxIdleConnsPerHost: 1,
				DisableCompression:  true,
				IdleConnTimeout:     5 * time.Minute,
			},
		},
	}
}

func (c *client) reset() {
	c.latencies = c.latencies[:0]
	c.outcomes = [numOutcomes]int64{}
	c.failures = 0
	c.sample = ""
}

func (c *client) close() { c.http.CloseIdleConnections() }

// freshKey returns a key no request of this run used before.
func (c *client) freshKey(prefix string) string {
	c.seq++
	return prefix + strconv.Itoa(c.id) + "-" + strconv.Itoa(c.seq)
}

// send sends r and records its outcome and latency.
func (c *client) send(ctx context.Context, r request) outcome {
	o, status, body, lat, err := c.roundTrip(ctx, r)
	if err != nil {
		c.failures++
		c.outcomes[outOther]++
		if c.sample == "" {
			c.sample = err.Error()
		}
		return outOther
	}
	c.latencies = append(c.latencies, lat)
	c.outcomes[o]++
	if o == outOther && c.sample == "" {
		c.sample = fmt.Sprintf("%s answered %d: %.200s", r.path, status, body)
	}
	return o
}

// roundTrip sends r and reads the whole answer, which lets the connection
// be reused. It keeps the body only when the status is unexpected.
func (c *client) roundTrip(ctx context.Context, r request) (outcome, int, []byte, time.Duration, error) {
	method, send := http.MethodPost, io.Reader(bytes.NewReader(r.body))
	if r.get {
		method, send = http.MethodGet, nil
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+r.path, send)
	if err != nil {
		return outOther, 0, nil, 0, err
	}
	r.setHeaders(req)
	start := time.Now()
	resp, err := c.http.Do(req)
	if err != nil {
		return outOther, 0, nil, 0, err
	}
	defer resp.Body.Close()
	o := classify(resp.StatusCode, resp.Header)
	var body []byte
	if o == outOther {
		body, err = io.ReadAll(resp.Body)
	} else {
		_, err = io.Copy(io.Discard, resp.Body)
	}
	lat := time.Since(start)
	if err != nil {
		return outOther, resp.StatusCode, nil, lat, fmt.Errorf("read the answer to %s: %w", r.path, err)
	}
	return o, resp.StatusCode, body, lat, nil
}

// post sends r outside any measurement and decodes a 201's JSON body into
// into, when not nil.
func (c *client) post(ctx context.Context, r request, into any) error {
	_, body, err := c.call(ctx, r, http.StatusCreated)
	if err != nil || into == nil {
		return err
	}
	return json.Unmarshal(body, into)
}

// accept posts r, an async request, outside any measurement and returns
// the path of its status resource, the 202's Location.
func (c *client) accept(ctx context.Context, r request) (string, error) {
	h, _, err := c.call(ctx, r, http.StatusAccepted)
	if err != nil {
		return "", err
	}
	loc, err := url.Parse(h.Get("Location"))
	if err != nil || loc.Path == "" {
		return "", fmt.Errorf("POST %s answered 202 with Location %q", r.path, h.Get("Location"))
	}
	return loc.RequestURI(), nil
}

// call sends r outside any measurement and returns the answer's header and
// body, or an error when its status is not want.
func (c *client) call(ctx context.Context, r request, want int) (http.Header, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+r.path, bytes.NewReader(r.body))
	if err != nil {
		return nil, nil, err
	}
	r.setHeaders(req)
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, nil, err
	}
	if resp.StatusCode != want {
		return nil, nil, fmt.Errorf("POST %s answered %d: %.300s", r.path, resp.StatusCode, body)
	}
	return resp.Header, body, nil
}

// phase is what all clients saw during one drive.
type phase struct {
	elapsed   time.Duration
	requests  int64
	outcomes  [numOutcomes]int64
	failures  int64
	latencies []time.Duration // sorted
	sample    string
}

// drive runs every client in a closed loop on next until d has passed,
// then waits for the requests in flight: when it returns, nothing is
// running, so counters read next cover exactly the requests it counted.
func drive(ctx context.Context, clients []*client, d time.Duration, next func(*client) request) phase {
	var stop atomic.Bool
	timer := time.AfterFunc(d, func() { stop.Store(true) })
	defer timer.Stop()
	var wg sync.WaitGroup
	start := time.Now()
	for _, c := range clients {
		c.reset()
		wg.Go(func() {
			for !stop.Load() && ctx.Err() == nil {
				c.send(ctx, next(c))
			}
		})
	}
	wg.Wait()
	p := phase{elapsed: time.Since(start)}
	for _, c := range clients {
		for o, n := range c.outcomes {
			p.outcomes[o] += n
			p.requests += n
		}
		p.failures += c.failures
		p.latencies = append(p.latencies, c.latencies...)
		if p.sample == "" {
			p.sample = c.sample
		}
	}
	slices.Sort(p.latencies)
	return p
}

// percentile returns the nearest-rank q-th percentile of sorted.
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q/100*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}
