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
	// ExpireLease makes the lease of a phased attempt pass, as if its
	// process had died. No phase of the key is running when it is called.
	ExpireLease func(t *testing.T, id idem.ID)
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
		{"LeaseIsVisibleAtOnce", testLeaseVisible[T]},
		{"PhasesAdvanceAndComplete", testPhases[T]},
		{"PhaseAbortKeepsLeaseAndPoint", testPhaseAbort[T]},
		{"ReleaseLetsRetryResume", testRelease[T]},
		{"ExpiredLeaseIsTakenOver", testTakeover[T]},
		{"ConcurrentTakeoversOneWins", testConcurrentTakeovers[T]},
		{"RunningPhaseIsBusy", testRunningPhase[T]},
		{"ExpiredTTLReplacesAbandonedAttempt", testExpiredAbandoned[T]},
		{"Secret", testSecret[T]},
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

func mustLease[T any](t *testing.T, h Harness[T], id idem.ID, c idem.Claim) idem.Lease[T] {
	t.Helper()
	l, err := h.Store.Lease(context.Background(), id, c)
	if err != nil {
		t.Fatalf("Lease(%v): %v", id, err)
	}
	return l
}

func mustPhase[T any](t *testing.T, l idem.Lease[T]) idem.Phase[T] {
	t.Helper()
	ph, err := l.Phase(context.Background())
	if err != nil {
		t.Fatalf("Phase: %v", err)
	}
	return ph
}

func advance[T any](t *testing.T, ph idem.Phase[T], point string) {
	t.Helper()
	if err := ph.Advance(context.Background(), point); err != nil {
		t.Fatalf("Advance(%q): %v", point, err)
	}
}

// A lease commits before any phase runs: others see the key busy, with
// its fingerprint, so a different request with the key is a 422.
func testLeaseVisible[T any](t *testing.T, h Harness[T]) {
	l := mustLease(t, h, id("k1"), claim)
	if p := l.RecoveryPoint(); p != "" {
		t.Fatalf("new lease at recovery point %q, want \"\"", p)
	}
	rec := lookup(t, h, id("k1"))
	if rec.State != idem.Busy || !bytes.Equal(rec.Fingerprint, fpA) {
		t.Fatalf("leased key: %+v, want busy with fingerprint %x", rec, fpA)
	}
	if _, err := h.Store.Lease(context.Background(), id("k1"), claim); !errors.Is(err, idem.ErrContended) {
		t.Fatalf("second Lease err = %v, want ErrContended", err)
	}
	if _, err := h.Store.Claim(context.Background(), id("k1"), claim); !errors.Is(err, idem.ErrContended) {
		t.Fatalf("Claim of a leased key err = %v, want ErrContended", err)
	}
}

func testPhases[T any](t *testing.T, h Harness[T]) {
	l := mustLease(t, h, id("k1"), claim)
	advance(t, mustPhase(t, l), "a")
	if rec := lookup(t, h, id("k1")); rec.State != idem.Busy || rec.RecoveryPoint != "a" {
		t.Fatalf("after advancing to a: %+v, want busy at a", rec)
	}
	advance(t, mustPhase(t, l), "b")
	want := response(201, `{"id":"pay_1"}`)
	complete(t, mustPhase(t, l), want)
	rec := lookup(t, h, id("k1"))
	if rec.State != idem.Completed || rec.Response == nil || string(rec.Response.Body) != string(want.Body) {
		t.Fatalf("after the last phase: %+v, want the stored response", rec)
	}
	if _, err := l.Phase(context.Background()); !errors.Is(err, idem.ErrLeaseLost) {
		t.Fatalf("Phase after Complete err = %v, want ErrLeaseLost", err)
	}
}

// Abort rolls back one phase: the lease and the points before stay.
func testPhaseAbort[T any](t *testing.T, h Harness[T]) {
	l := mustLease(t, h, id("k1"), claim)
	advance(t, mustPhase(t, l), "a")
	if err := mustPhase(t, l).Abort(context.Background()); err != nil {
		t.Fatalf("Abort: %v", err)
	}
	if rec := lookup(t, h, id("k1")); rec.State != idem.Busy || rec.RecoveryPoint != "a" {
		t.Fatalf("after an aborted phase: %+v, want busy at a", rec)
	}
	advance(t, mustPhase(t, l), "b")
}

// Release hands the key to the next retry at once, which resumes at the
// committed point; the released attempt can run no further phase.
func testRelease[T any](t *testing.T, h Harness[T]) {
	old := mustLease(t, h, id("k1"), claim)
	advance(t, mustPhase(t, old), "a")
	if err := old.Release(context.Background()); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if rec := lookup(t, h, id("k1")); rec.State != idem.Abandoned || rec.RecoveryPoint != "a" || !bytes.Equal(rec.Fingerprint, fpA) {
		t.Fatalf("after Release: %+v, want abandoned at a with the fingerprint", rec)
	}
	l := mustLease(t, h, id("k1"), claim)
	if p := l.RecoveryPoint(); p != "a" {
		t.Fatalf("retry resumes at %q, want a", p)
	}
	if _, err := old.Phase(context.Background()); !errors.Is(err, idem.ErrLeaseLost) {
		t.Fatalf("released attempt's Phase err = %v, want ErrLeaseLost", err)
	}
	complete(t, mustPhase(t, l), response(201, "{}"))
}

// A lease that passes (the process died) lets a retry of the same request
// take over at the committed point; a different request is refused.
func testTakeover[T any](t *testing.T, h Harness[T]) {
	zombie := mustLease(t, h, id("k1"), claim)
	advance(t, mustPhase(t, zombie), "a")
	h.ExpireLease(t, id("k1"))
	if rec := lookup(t, h, id("k1")); rec.State != idem.Abandoned || rec.RecoveryPoint != "a" {
		t.Fatalf("after the lease passed: %+v, want abandoned at a", rec)
	}
	other := idem.Claim{Fingerprint: fpB, TTL: time.Hour, Lease: time.Minute}
	if _, err := h.Store.Lease(context.Background(), id("k1"), other); !errors.Is(err, idem.ErrContended) {
		t.Fatalf("takeover by another request err = %v, want ErrContended", err)
	}
	l := mustLease(t, h, id("k1"), claim)
	if p := l.RecoveryPoint(); p != "a" {
		t.Fatalf("takeover resumes at %q, want a", p)
	}
	if rec := lookup(t, h, id("k1")); rec.State != idem.Busy {
		t.Fatalf("after the takeover: %+v, want busy", rec)
	}
	// The attempt that was taken over is fenced off.
	if _, err := zombie.Phase(context.Background()); !errors.Is(err, idem.ErrLeaseLost) {
		t.Fatalf("taken-over attempt's Phase err = %v, want ErrLeaseLost", err)
	}
	if err := zombie.Release(context.Background()); err != nil {
		t.Fatalf("taken-over attempt's Release: %v", err)
	}
	if rec := lookup(t, h, id("k1")); rec.State != idem.Busy {
		t.Fatalf("a fenced Release ended the new lease: %+v", rec)
	}
	complete(t, mustPhase(t, l), response(201, "{}"))
}

// Many retries race for one expired lease: exactly one takes it over.
func testConcurrentTakeovers[T any](t *testing.T, h Harness[T]) {
	first := mustLease(t, h, id("race"), claim)
	advance(t, mustPhase(t, first), "a")
	h.ExpireLease(t, id("race"))
	const n = 50
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		winners []idem.Lease[T]
		others  = map[string]int{}
		start   = make(chan struct{})
	)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			l, err := h.Store.Lease(context.Background(), id("race"), claim)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				others[err.Error()]++
				return
			}
			winners = append(winners, l)
		}()
	}
	close(start)
	wg.Wait()
	if len(winners) != 1 {
		t.Fatalf("%d takeovers won, want exactly 1 (errors: %v)", len(winners), others)
	}
	if others[idem.ErrContended.Error()] != n-1 {
		t.Fatalf("losers' errors = %v, want %d × ErrContended", others, n-1)
	}
	if p := winners[0].RecoveryPoint(); p != "a" {
		t.Fatalf("winner resumes at %q, want a", p)
	}
	complete(t, mustPhase(t, winners[0]), response(201, "{}"))
}

// While a phase runs the key is busy to lookups and claims alike.
func testRunningPhase[T any](t *testing.T, h Harness[T]) {
	l := mustLease(t, h, id("k1"), claim)
	ph := mustPhase(t, l)
	if rec := lookup(t, h, id("k1")); rec.State != idem.Busy {
		t.Fatalf("during a phase: %+v, want busy", rec)
	}
	if _, err := h.Store.Lease(context.Background(), id("k1"), claim); !errors.Is(err, idem.ErrContended) {
		t.Fatalf("Lease during a phase err = %v, want ErrContended", err)
	}
	advance(t, ph, "a")
}

// An abandoned attempt whose TTL has passed too is history: a new request
// with the key starts over.
func testExpiredAbandoned[T any](t *testing.T, h Harness[T]) {
	l := mustLease(t, h, id("k1"), claim)
	advance(t, mustPhase(t, l), "a")
	if err := l.Release(context.Background()); err != nil {
		t.Fatalf("Release: %v", err)
	}
	h.Expire(t, id("k1"))
	other := idem.Claim{Fingerprint: fpB, TTL: time.Hour, Lease: time.Minute}
	fresh := mustLease(t, h, id("k1"), other)
	if p := fresh.RecoveryPoint(); p != "" {
		t.Fatalf("new attempt after the TTL starts at %q, want \"\"", p)
	}
	if _, err := l.Phase(context.Background()); !errors.Is(err, idem.ErrLeaseLost) {
		t.Fatalf("old attempt's Phase err = %v, want ErrLeaseLost", err)
	}
}

func testSecret[T any](t *testing.T, h Harness[T]) {
	a, err := h.Store.Secret(context.Background())
	if err != nil {
		t.Fatalf("Secret: %v", err)
	}
	b, err := h.Store.Secret(context.Background())
	if err != nil {
		t.Fatalf("Secret: %v", err)
	}
	if len(a) < 16 || !bytes.Equal(a, b) {
		t.Fatalf("Secret = %x then %x; want the same secret of 16 bytes or more", a, b)
	}
}
