// Package storetest is the conformance suite every key store passes: the
// Postgres store and the in-memory store run the same tests.
package storetest

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/idemgen/idemgen/idem"
)

// Harness is a store under test.
type Harness[T any] struct {
	Store idem.Store[T]
	// Expire makes the TTL of a stored key pass.
	Expire func(t *testing.T, id idem.ID)
}

// Run runs the suite; newHarness returns a store with no keys.
func Run[T any](t *testing.T, newHarness func(t *testing.T) Harness[T]) {
	tests := []struct {
		name string
		fn   func(*testing.T, Harness[T])
	}{
		{"LookupAbsent", testLookupAbsent[T]},
		{"ClaimedKeyIsBusy", testClaimedKeyIsBusy[T]},
		{"CompleteStoresResponse", testCompleteStoresResponse[T]},
		{"AbortReleasesKey", testAbortReleasesKey[T]},
		{"CompletedKeyCannotBeClaimed", testCompletedKeyCannotBeClaimed[T]},
		{"ExpiredKeyIsNew", testExpiredKeyIsNew[T]},
		{"KeysIndependentAcrossScopesAndOperations", testIndependent[T]},
		{"BeginWithoutKey", testBeginWithoutKey[T]},
		{"ConcurrentClaimsOneWins", testConcurrentClaims[T]},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newHarness(t)) })
	}
}

var (
	fpA   = bytes.Repeat([]byte{0xa}, 32)
	fpB   = bytes.Repeat([]byte{0xb}, 32)
	claim = idem.Claim{Fingerprint: fpA, TTL: time.Hour, Lease: time.Minute}
)

func id(key string) idem.ID { return idem.ID{Scope: "acct_1", Operation: "createOrder", Key: key} }

func lookup[T any](t *testing.T, h Harness[T], id idem.ID) idem.Record {
	t.Helper()
	rec, err := h.Store.Lookup(context.Background(), id)
	if err != nil {
		t.Fatalf("Lookup(%v): %v", id, err)
	}
	return rec
}

func mustClaim[T any](t *testing.T, h Harness[T], id idem.ID, c idem.Claim) idem.Txn[T] {
	t.Helper()
	txn, err := h.Store.Claim(context.Background(), id, c)
	if err != nil {
		t.Fatalf("Claim(%v): %v", id, err)
	}
	return txn
}

func complete[T any](t *testing.T, txn idem.Txn[T], r *idem.Response) {
	t.Helper()
	if err := txn.Complete(context.Background(), r); err != nil {
		t.Fatalf("Complete: %v", err)
	}
}

func response(status int, body string) *idem.Response {
	return &idem.Response{
		Status: status,
		Header: http.Header{"Content-Type": {"application/json"}, "Location": {"/orders/1"}, "X-Multi": {"a", "b"}},
		Body:   []byte(body),
	}
}

func testLookupAbsent[T any](t *testing.T, h Harness[T]) {
	if rec := lookup(t, h, id("k1")); rec.State != idem.Absent {
		t.Fatalf("state = %v, want absent", rec.State)
	}
}

func testClaimedKeyIsBusy[T any](t *testing.T, h Harness[T]) {
	txn := mustClaim(t, h, id("k1"), claim)
	defer txn.Abort(context.Background())
	if rec := lookup(t, h, id("k1")); rec.State != idem.Busy {
		t.Fatalf("state while claimed = %v, want busy", rec.State)
	}
	if _, err := h.Store.Claim(context.Background(), id("k1"), idem.Claim{Fingerprint: fpB, TTL: time.Hour, Lease: time.Minute}); !errors.Is(err, idem.ErrContended) {
		t.Fatalf("second Claim err = %v, want ErrContended", err)
	}
}

func testCompleteStoresResponse[T any](t *testing.T, h Harness[T]) {
	want := response(201, "{\"id\":\"ord_1\"}\n\x00\xff")
	complete(t, mustClaim(t, h, id("k1"), claim), want)
	rec := lookup(t, h, id("k1"))
	if rec.State != idem.Completed {
		t.Fatalf("state = %v, want completed", rec.State)
	}
	if !bytes.Equal(rec.Fingerprint, fpA) {
		t.Errorf("fingerprint = %x, want %x", rec.Fingerprint, fpA)
	}
	got := rec.Response
	if got == nil || got.Status != want.Status || !bytes.Equal(got.Body, want.Body) || !reflect.DeepEqual(got.Header, want.Header) {
		t.Fatalf("stored response = %+v, want %+v", got, want)
	}
	if got.Replayed {
		t.Errorf("store marked the response replayed; the engine does that")
	}
}

func testAbortReleasesKey[T any](t *testing.T, h Harness[T]) {
	txn := mustClaim(t, h, id("k1"), claim)
	if err := txn.Abort(context.Background()); err != nil {
		t.Fatalf("Abort: %v", err)
	}
	if rec := lookup(t, h, id("k1")); rec.State != idem.Absent {
		t.Fatalf("state after abort = %v, want absent", rec.State)
	}
	complete(t, mustClaim(t, h, id("k1"), claim), response(200, "{}"))
}

func testCompletedKeyCannotBeClaimed[T any](t *testing.T, h Harness[T]) {
	complete(t, mustClaim(t, h, id("k1"), claim), response(400, `{"title":"bad"}`))
	if _, err := h.Store.Claim(context.Background(), id("k1"), claim); !errors.Is(err, idem.ErrContended) {
		t.Fatalf("Claim of a completed key err = %v, want ErrContended", err)
	}
	if rec := lookup(t, h, id("k1")); rec.State != idem.Completed || rec.Response.Status != 400 {
		t.Fatalf("record changed by a refused claim: %+v", rec)
	}
}

func testExpiredKeyIsNew[T any](t *testing.T, h Harness[T]) {
	complete(t, mustClaim(t, h, id("k1"), claim), response(201, `{"n":1}`))
	h.Expire(t, id("k1"))
	if rec := lookup(t, h, id("k1")); rec.State != idem.Absent {
		t.Fatalf("state after TTL = %v, want absent", rec.State)
	}
	c := idem.Claim{Fingerprint: fpB, TTL: time.Hour, Lease: time.Minute}
	complete(t, mustClaim(t, h, id("k1"), c), response(201, `{"n":2}`))
	rec := lookup(t, h, id("k1"))
	if rec.State != idem.Completed || string(rec.Response.Body) != `{"n":2}` || !bytes.Equal(rec.Fingerprint, fpB) {
		t.Fatalf("expired key was not replaced: %+v", rec)
	}
}

func testIndependent[T any](t *testing.T, h Harness[T]) {
	ids := []idem.ID{
		{Scope: "acct_1", Operation: "createOrder", Key: "same"},
		{Scope: "acct_2", Operation: "createOrder", Key: "same"},
		{Scope: "acct_1", Operation: "createPayment", Key: "same"},
	}
	var txns []idem.Txn[T]
	for _, id := range ids {
		txns = append(txns, mustClaim(t, h, id, claim))
	}
	for i, txn := range txns {
		complete(t, txn, response(201, string(rune('a'+i))))
	}
	for i, id := range ids {
		if rec := lookup(t, h, id); string(rec.Response.Body) != string(rune('a'+i)) {
			t.Errorf("%v replays %q, want %q", id, rec.Response.Body, string(rune('a'+i)))
		}
	}
}

func testBeginWithoutKey[T any](t *testing.T, h Harness[T]) {
	txn, err := h.Store.Begin(context.Background())
	if err != nil {
		t.Fatalf("Begin: %v", err)
	}
	complete(t, txn, response(201, "{}"))
	if rec := lookup(t, h, idem.ID{Operation: "createOrder"}); rec.State != idem.Absent {
		t.Fatalf("a keyless attempt stored a record: %+v", rec)
	}
}

// testConcurrentClaims races many claims of one key: exactly one wins.
func testConcurrentClaims[T any](t *testing.T, h Harness[T]) {
	const n = 50
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		winners []idem.Txn[T]
		others  = map[string]int{}
		start   = make(chan struct{})
	)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			txn, err := h.Store.Claim(context.Background(), id("race"), claim)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				others[err.Error()]++
				return
			}
			winners = append(winners, txn)
		}()
	}
	close(start)
	wg.Wait()
	if len(winners) != 1 {
		t.Fatalf("%d claims won, want exactly 1 (errors: %v)", len(winners), others)
	}
	if others[idem.ErrContended.Error()] != n-1 {
		t.Fatalf("losers' errors = %v, want %d × ErrContended", others, n-1)
	}
	complete(t, winners[0], response(201, "{}"))
}
