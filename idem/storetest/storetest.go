// Package storetest is the conformance suite every key store passes: the
// Postgres store and the in-memory store run the same tests. Stores report
// facts; the suite checks the facts each store reports for every state a
// key can be in, and the engine's answer on top of them, so that every
// store answers alike.
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
	// Expire makes the TTL of a key pass. The suite's keys live an hour.
	Expire func(t *testing.T, id idem.ID)
	// ExpireLease makes the lease of a phased attempt pass, as if its
	// process had died; the suite's leases run at most a minute, except
	// where noted. No phase of the key is running when it is called.
	ExpireLease func(t *testing.T, id idem.ID)
	// Reap runs the store's TTL reaper over every key past its TTL.
	Reap func(t *testing.T)
}

// Run runs the suite; newHarness returns a store with no keys.
func Run[T any](t *testing.T, newHarness func(t *testing.T) Harness[T]) {
	tests := []struct {
		name string
		fn   func(*testing.T, Harness[T])
	}{
		{"LookupAbsent", testLookupAbsent[T]},
		{"ClaimIsHeldNotFound", testClaimIsHeld[T]},
		{"CompleteStoresResponse", testCompleteStoresResponse[T]},
		{"AbortReleasesKey", testAbortReleasesKey[T]},
		{"CompletedKeyCannotBeClaimed", testCompletedKeyCannotBeClaimed[T]},
		{"ExpiredKeyStartsNewGeneration", testExpiredKeyIsNew[T]},
		{"StaleClaimIsRefused", testStaleClaim[T]},
		{"ClaimExpectingAReapedRowIsRefused", testClaimAfterReap[T]},
		{"KeysIndependentAcrossScopesAndOperations", testIndependent[T]},
		{"BeginWithoutKey", testBeginWithoutKey[T]},
		{"ConcurrentClaimsOneWins", testConcurrentClaims[T]},
		{"LeaseIsVisibleAtOnce", testLeaseVisible[T]},
		{"PhasesAdvanceAndComplete", testPhases[T]},
		{"PhaseAbortKeepsLeaseAndPoint", testPhaseAbort[T]},
		{"ReleaseLetsRetryResume", testRelease[T]},
		{"ExpiredLeaseIsTakenOver", testTakeover[T]},
		{"ConcurrentTakeoversOneWins", testConcurrentTakeovers[T]},
		{"RunningPhaseIsHeld", testRunningPhase[T]},
		{"InFlightPastTTLKeepsItsKey", testInFlightPastTTL[T]},
		{"Secret", testSecret[T]},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newHarness(t)) })
	}
	t.Run("EngineAnswers", func(t *testing.T) { testEngineAnswers(t, newHarness) })
	t.Run("DerivedKeysChangeAfterTTL", func(t *testing.T) { testDerivedKeys(t, newHarness(t)) })
	t.Run("DerivedKeysAfterReap", func(t *testing.T) { testDerivedKeysAfterReap(t, newHarness) })
	t.Run("DerivedKeyDiffersPerRequest", func(t *testing.T) { DerivedKeyDiffersPerRequest(t, newHarness) })
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

// after is c as the engine would make it after reading rec: expecting
// that row, and taking over an in-flight one.
func after(c idem.Claim, rec idem.Record) idem.Claim {
	c.Attempt = rec.Attempt
	c.Takeover = rec.Found && !rec.Completed
	// As the engine counts generations: a takeover continues one.
	c.Generation = rec.Generation + 1
	if c.Takeover {
		c.Generation = rec.Generation
	}
	return c
}

func mustClaim[T any](t *testing.T, h Harness[T], id idem.ID, c idem.Claim) idem.Txn[T] {
	t.Helper()
	txn, err := h.Store.Claim(context.Background(), id, after(c, lookup(t, h, id)))
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
	if rec := lookup(t, h, id("k1")); rec.Found || rec.Held {
		t.Fatalf("new key: %+v, want neither found nor held", rec)
	}
}

// An atomic claim holds the key, but is no row until it completes: its
// request is not visible, as in a transaction that has not committed.
func testClaimIsHeld[T any](t *testing.T, h Harness[T]) {
	txn := mustClaim(t, h, id("k1"), claim)
	defer txn.Abort(context.Background())
	if rec := lookup(t, h, id("k1")); !rec.Held || rec.Found {
		t.Fatalf("while claimed: %+v, want held and not found", rec)
	}
	other := idem.Claim{Fingerprint: fpB, TTL: time.Hour, Lease: time.Minute}
	if _, err := h.Store.Claim(context.Background(), id("k1"), other); !errors.Is(err, idem.ErrContended) {
		t.Fatalf("second Claim err = %v, want ErrContended", err)
	}
	if _, err := h.Store.Lease(context.Background(), id("k1"), other); !errors.Is(err, idem.ErrContended) {
		t.Fatalf("Lease of a claimed key err = %v, want ErrContended", err)
	}
}

func testCompleteStoresResponse[T any](t *testing.T, h Harness[T]) {
	want := response(201, "{\"id\":\"ord_1\"}\n\x00\xff")
	complete(t, mustClaim(t, h, id("k1"), claim), want)
	rec := lookup(t, h, id("k1"))
	if !rec.Found || !rec.Completed || rec.Expired || rec.Held || rec.Generation != 1 || rec.Attempt < 1 {
		t.Fatalf("completed key: %+v, want found, completed, live, generation 1", rec)
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
	if rec := lookup(t, h, id("k1")); rec.Found || rec.Held {
		t.Fatalf("after abort: %+v, want neither found nor held", rec)
	}
	complete(t, mustClaim(t, h, id("k1"), claim), response(200, "{}"))
}

func testCompletedKeyCannotBeClaimed[T any](t *testing.T, h Harness[T]) {
	complete(t, mustClaim(t, h, id("k1"), claim), response(400, `{"title":"bad"}`))
	rec := lookup(t, h, id("k1"))
	for _, c := range []idem.Claim{after(claim, rec), {Fingerprint: fpA, TTL: time.Hour, Lease: time.Minute, Attempt: rec.Attempt, Takeover: true}} {
		if _, err := h.Store.Claim(context.Background(), id("k1"), c); !errors.Is(err, idem.ErrContended) {
			t.Fatalf("Claim(%+v) of a live completed key err = %v, want ErrContended", c, err)
		}
		if _, err := h.Store.Lease(context.Background(), id("k1"), c); !errors.Is(err, idem.ErrContended) {
			t.Fatalf("Lease(%+v) of a live completed key err = %v, want ErrContended", c, err)
		}
	}
	if again := lookup(t, h, id("k1")); !again.Completed || again.Response.Status != 400 || again.Attempt != rec.Attempt {
		t.Fatalf("record changed by a refused claim: %+v", again)
	}
}

func testExpiredKeyIsNew[T any](t *testing.T, h Harness[T]) {
	complete(t, mustClaim(t, h, id("k1"), claim), response(201, `{"n":1}`))
	h.Expire(t, id("k1"))
	if rec := lookup(t, h, id("k1")); !rec.Found || !rec.Completed || !rec.Expired || rec.Generation != 1 {
		t.Fatalf("after the TTL: %+v, want the expired row of generation 1", rec)
	}
	c := idem.Claim{Fingerprint: fpB, TTL: time.Hour, Lease: time.Minute}
	complete(t, mustClaim(t, h, id("k1"), c), response(201, `{"n":2}`))
	rec := lookup(t, h, id("k1"))
	if !rec.Completed || rec.Expired || string(rec.Response.Body) != `{"n":2}` || !bytes.Equal(rec.Fingerprint, fpB) || rec.Generation != 2 {
		t.Fatalf("expired key was not replaced by generation 2: %+v", rec)
	}
}

// A claim decided on from a read of an expired row, which the reaper
// deleted since, loses: claiming the key as new would put the engine's
// generation and the row's apart. The engine reads again.
func testClaimAfterReap[T any](t *testing.T, h Harness[T]) {
	complete(t, mustClaim(t, h, id("k1"), claim), response(201, "{}"))
	h.Expire(t, id("k1"))
	stale := after(claim, lookup(t, h, id("k1")))
	h.Reap(t)
	if rec := lookup(t, h, id("k1")); rec.Found {
		t.Fatalf("after the reaper: %+v, want no row (its attempt derived no key)", rec)
	}
	if _, err := h.Store.Claim(context.Background(), id("k1"), stale); !errors.Is(err, idem.ErrContended) {
		t.Fatalf("Claim expecting the reaped row: err = %v, want ErrContended", err)
	}
	if _, err := h.Store.Lease(context.Background(), id("k1"), stale); !errors.Is(err, idem.ErrContended) {
		t.Fatalf("Lease expecting the reaped row: err = %v, want ErrContended", err)
	}
	if rec := lookup(t, h, id("k1")); rec.Found || rec.Held {
		t.Fatalf("after refused claims: %+v, want the key free", rec)
	}
}

// A claim made from a read that is no longer true loses: the engine reads
// again instead of acting on a row it did not see.
func testStaleClaim[T any](t *testing.T, h Harness[T]) {
	stale := after(claim, lookup(t, h, id("k1")))
	complete(t, mustClaim(t, h, id("k1"), claim), response(201, "{}"))
	h.Expire(t, id("k1"))
	if _, err := h.Store.Claim(context.Background(), id("k1"), stale); !errors.Is(err, idem.ErrContended) {
		t.Fatalf("Claim from a read of no row, over an expired row, err = %v, want ErrContended", err)
	}
	if _, err := h.Store.Lease(context.Background(), id("k1"), stale); !errors.Is(err, idem.ErrContended) {
		t.Fatalf("Lease from a read of no row, over an expired row, err = %v, want ErrContended", err)
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
	if rec := lookup(t, h, idem.ID{Operation: "createOrder"}); rec.Found || rec.Held {
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
	l, err := h.Store.Lease(context.Background(), id, after(c, lookup(t, h, id)))
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

// A lease commits before any phase runs: others see the row in flight,
// with its fingerprint and the lease's time left.
func testLeaseVisible[T any](t *testing.T, h Harness[T]) {
	l := mustLease(t, h, id("k1"), claim)
	if p := l.RecoveryPoint(); p != "" {
		t.Fatalf("new lease at recovery point %q, want \"\"", p)
	}
	rec := lookup(t, h, id("k1"))
	if !rec.Found || rec.Completed || rec.Held || !bytes.Equal(rec.Fingerprint, fpA) || rec.LeaseLeft <= 0 || rec.LeaseLeft > time.Minute || rec.Generation != 1 {
		t.Fatalf("leased key: %+v, want an in-flight row of generation 1 with fingerprint %x and up to a minute of lease left", rec, fpA)
	}
	if _, err := h.Store.Lease(context.Background(), id("k1"), after(claim, rec)); !errors.Is(err, idem.ErrContended) {
		t.Fatalf("takeover of a live lease err = %v, want ErrContended", err)
	}
	if _, err := h.Store.Claim(context.Background(), id("k1"), after(claim, rec)); !errors.Is(err, idem.ErrContended) {
		t.Fatalf("Claim of a leased key err = %v, want ErrContended", err)
	}
}

func testPhases[T any](t *testing.T, h Harness[T]) {
	l := mustLease(t, h, id("k1"), claim)
	advance(t, mustPhase(t, l), "a")
	if rec := lookup(t, h, id("k1")); !rec.Found || rec.Completed || rec.Held || rec.RecoveryPoint != "a" {
		t.Fatalf("after advancing to a: %+v, want in flight at a, not held", rec)
	}
	advance(t, mustPhase(t, l), "b")
	want := response(201, `{"id":"pay_1"}`)
	complete(t, mustPhase(t, l), want)
	rec := lookup(t, h, id("k1"))
	if !rec.Completed || rec.Response == nil || string(rec.Response.Body) != string(want.Body) {
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
	if rec := lookup(t, h, id("k1")); !rec.Found || rec.Completed || rec.Held || rec.RecoveryPoint != "a" || rec.LeaseLeft <= 0 {
		t.Fatalf("after an aborted phase: %+v, want in flight at a with its lease", rec)
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
	if rec := lookup(t, h, id("k1")); !rec.Found || rec.Completed || rec.LeaseLeft > 0 || rec.RecoveryPoint != "a" || !bytes.Equal(rec.Fingerprint, fpA) {
		t.Fatalf("after Release: %+v, want in flight at a with no lease left", rec)
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

// A lease that passes (the process died) lets a retry take over at the
// committed point, in the same generation.
func testTakeover[T any](t *testing.T, h Harness[T]) {
	zombie := mustLease(t, h, id("k1"), claim)
	advance(t, mustPhase(t, zombie), "a")
	h.ExpireLease(t, id("k1"))
	rec := lookup(t, h, id("k1"))
	if !rec.Found || rec.Completed || rec.Held || rec.LeaseLeft > 0 || rec.RecoveryPoint != "a" {
		t.Fatalf("after the lease passed: %+v, want in flight at a with no lease left", rec)
	}
	l := mustLease(t, h, id("k1"), claim)
	if p := l.RecoveryPoint(); p != "a" {
		t.Fatalf("takeover resumes at %q, want a", p)
	}
	if again := lookup(t, h, id("k1")); again.LeaseLeft <= 0 || again.Generation != rec.Generation || again.Attempt <= rec.Attempt {
		t.Fatalf("after the takeover: %+v, want a live lease, generation %d and a later attempt than %d", again, rec.Generation, rec.Attempt)
	}
	// The attempt that was taken over is fenced off.
	if _, err := zombie.Phase(context.Background()); !errors.Is(err, idem.ErrLeaseLost) {
		t.Fatalf("taken-over attempt's Phase err = %v, want ErrLeaseLost", err)
	}
	if err := zombie.Release(context.Background()); err != nil {
		t.Fatalf("taken-over attempt's Release: %v", err)
	}
	if again := lookup(t, h, id("k1")); again.LeaseLeft <= 0 {
		t.Fatalf("a fenced Release ended the new lease: %+v", again)
	}
	complete(t, mustPhase(t, l), response(201, "{}"))
}

// Many retries race for one expired lease: exactly one takes it over.
func testConcurrentTakeovers[T any](t *testing.T, h Harness[T]) {
	first := mustLease(t, h, id("race"), claim)
	advance(t, mustPhase(t, first), "a")
	h.ExpireLease(t, id("race"))
	c := after(claim, lookup(t, h, id("race")))
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
			l, err := h.Store.Lease(context.Background(), id("race"), c)
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

// While a phase runs, a live claimant holds the key, even past its lease.
func testRunningPhase[T any](t *testing.T, h Harness[T]) {
	l := mustLease(t, h, id("k1"), claim)
	ph := mustPhase(t, l)
	if rec := lookup(t, h, id("k1")); !rec.Held || !rec.Found || rec.Completed {
		t.Fatalf("during a phase: %+v, want held and in flight", rec)
	}
	if _, err := h.Store.Lease(context.Background(), id("k1"), after(claim, lookup(t, h, id("k1")))); !errors.Is(err, idem.ErrContended) {
		t.Fatalf("Lease during a phase err = %v, want ErrContended", err)
	}
	advance(t, ph, "a")
}

// An attempt in flight keeps its key past the TTL: it is no completed row
// to replace, so only a takeover, in the same generation and at its
// recovery point, may claim it.
func testInFlightPastTTL[T any](t *testing.T, h Harness[T]) {
	l := mustLease(t, h, id("k1"), claim)
	advance(t, mustPhase(t, l), "a")
	if err := l.Release(context.Background()); err != nil {
		t.Fatalf("Release: %v", err)
	}
	h.Expire(t, id("k1"))
	rec := lookup(t, h, id("k1"))
	if !rec.Found || rec.Completed || !rec.Expired || rec.RecoveryPoint != "a" {
		t.Fatalf("after the TTL: %+v, want an expired row still in flight at a", rec)
	}
	fresh := idem.Claim{Fingerprint: fpB, TTL: time.Hour, Lease: time.Minute, Attempt: rec.Attempt}
	if _, err := h.Store.Lease(context.Background(), id("k1"), fresh); !errors.Is(err, idem.ErrContended) {
		t.Fatalf("a new generation over an attempt in flight err = %v, want ErrContended", err)
	}
	resumed := mustLease(t, h, id("k1"), claim)
	if p := resumed.RecoveryPoint(); p != "a" {
		t.Fatalf("takeover past the TTL resumes at %q, want a", p)
	}
	if again := lookup(t, h, id("k1")); again.Generation != rec.Generation || again.Expired {
		t.Fatalf("after the takeover: %+v, want generation %d with a live TTL", again, rec.Generation)
	}
	if _, err := l.Phase(context.Background()); !errors.Is(err, idem.ErrLeaseLost) {
		t.Fatalf("old attempt's Phase err = %v, want ErrLeaseLost", err)
	}
	complete(t, mustPhase(t, resumed), response(201, "{}"))
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
