package pgstore_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/pgstore"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// logBuffer collects log lines written from several goroutines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// keyRow is the key's row as JSON, or "" when it has none.
func keyRow(t *testing.T, pool *pgxpool.Pool, id idem.ID) string {
	t.Helper()
	var row string
	err := pool.QueryRow(context.Background(), `SELECT row_to_json(k)::text FROM idempotency_keys AS k
		WHERE scope = $1 AND operation = $2 AND key = $3`, id.Scope, id.Operation, id.Key).Scan(&row)
	if errors.Is(err, pgx.ErrNoRows) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return row
}

// A key held by a live attempt is not forgotten without Force: neither a
// phased attempt's lease, between phases or during one, nor an atomic
// attempt's advisory lock. With Force, the phased attempt is fenced off:
// its next phase fails with lease lost, and the next request runs as new
// in the next generation. A running atomic attempt cannot be fenced.
func TestForgetHeldKeyRefused(t *testing.T) {
	t.Run("phased", func(t *testing.T) {
		ctx := context.Background()
		pool := newPool(t, nil)
		var logs logBuffer
		s := pgstore.New(pool, pgstore.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		id := idem.ID{Scope: "tenant", Operation: "createPayment", Key: "secret-key-1"}
		l, err := s.Lease(ctx, id, idem.Claim{Fingerprint: []byte("fp"), TTL: time.Hour, Lease: time.Minute, Generation: 1})
		if err != nil {
			t.Fatal(err)
		}
		ph, err := l.Phase(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := ph.Advance(ctx, "payment_created"); err != nil {
			t.Fatal(err)
		}

		// Between phases, the lease holds the key.
		before := keyRow(t, pool, id)
		k, err := s.ForgetKey(ctx, id, pgstore.ForgetOptions{})
		if !errors.Is(err, pgstore.ErrKeyHeld) {
			t.Fatalf("ForgetKey of a leased key = %v, want ErrKeyHeld", err)
		}
		if !k.Held || k.Status != pgstore.StatusInFlight || k.LeaseLeft() <= 0 || k.RecoveryPoint != "payment_created" {
			t.Errorf("ForgetKey returned %+v; want the key as read: held, in flight, its lease running", k)
		}
		if after := keyRow(t, pool, id); after != before {
			t.Fatalf("a refused forget changed the row:\n%s\nto\n%s", before, after)
		}

		// During a phase, a forget without Force is refused at once, without
		// waiting for the phase; with Force it waits for the phase to commit,
		// then fences the attempt off.
		running, err := l.Phase(ctx)
		if err != nil {
			t.Fatal(err)
		}
		noWait, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if _, err := s.ForgetKey(noWait, id, pgstore.ForgetOptions{}); !errors.Is(err, pgstore.ErrKeyHeld) {
			t.Fatalf("ForgetKey during a phase = %v, want ErrKeyHeld", err)
		}
		if after := keyRow(t, pool, id); after != before {
			t.Fatalf("a refused forget changed the row:\n%s\nto\n%s", before, after)
		}
		type result struct {
			k   pgstore.KeyInfo
			err error
		}
		forced := make(chan result)
		go func() {
			k, err := s.ForgetKey(ctx, id, pgstore.ForgetOptions{Force: true})
			forced <- result{k, err}
		}()
		if err := running.Advance(ctx, "charge_created"); err != nil {
			t.Fatalf("the running phase's commit = %v, want it committed before the forced forget", err)
		}
		r := <-forced
		if r.err != nil || r.k.Status != pgstore.StatusInFlight || !r.k.Held || r.k.Generation != 1 {
			t.Fatalf("forced ForgetKey = %+v, %v; want the held in-flight key of generation 1", r.k, r.err)
		}
		if _, err := l.Phase(ctx); !errors.Is(err, idem.ErrLeaseLost) {
			t.Fatalf("the fenced attempt's next phase = %v, want ErrLeaseLost", err)
		}

		// The next request runs as new, from its first phase, in generation 2.
		engine := idem.NewEngine(s, idem.Options{Scope: func(context.Context, *http.Request) (string, error) { return "tenant", nil },
			Logger: slog.New(slog.DiscardHandler)})
		op := &idem.Operation{Name: "createPayment", TTL: time.Hour, Lease: time.Minute, RecoveryPoints: []string{"payment_created", "charge_created"}}
		var phases []string
		var generation int64
		run := func(ctx context.Context, at *idem.Attempt[pgx.Tx]) (string, idem.Writer, error) {
			phases = append(phases, at.RecoveryPoint())
			generation = at.Generation()
			switch at.RecoveryPoint() {
			case "":
				return "payment_created", nil, nil
			case "payment_created":
				return "charge_created", nil, nil
			}
			return "", func(w http.ResponseWriter) error { w.WriteHeader(201); return nil }, nil
		}
		r2 := httptest.NewRequest("POST", "/payments", nil)
		r2.Header.Set(idem.HeaderKey, id.Key)
		resp, err := engine.ServePhased(idem.WithRequest(ctx, r2), op, []byte("fp"), run)
		if err != nil || resp.Status != 201 || resp.Replayed {
			t.Fatalf("the next request = %+v, %v; want it run as new", resp, err)
		}
		if strings.Join(phases, ",") != ",payment_created,charge_created" || generation != 2 {
			t.Errorf("the next request ran phases %q in generation %d; want all of them, in generation 2", phases, generation)
		}

		got := logs.String()
		if !strings.Contains(got, `msg="idem: forgot key" operation=createPayment scope=tenant key_hash=`+idem.KeyHash(id)+` status=in_flight generation=1 held=true forced=true action=emptied`) {
			t.Errorf("the forced forget was not logged as expected:\n%s", got)
		}
		if strings.Contains(got, id.Key) {
			t.Errorf("the log names the key itself:\n%s", got)
		}
	})

	t.Run("atomic", func(t *testing.T) {
		ctx := context.Background()
		pool := newPool(t, nil)
		s := pgstore.New(pool, pgstore.Options{Logger: slog.New(slog.DiscardHandler)})
		engine := idem.NewEngine(s, idem.Options{Logger: slog.New(slog.DiscardHandler)})
		op := &idem.Operation{Name: "createOrder", TTL: time.Hour, Lease: time.Minute}
		id := idem.ID{Operation: "createOrder", Key: "k1"}
		var runs atomic.Int64
		started, release := make(chan struct{}), make(chan struct{})
		handler := func(ctx context.Context, at *idem.Attempt[pgx.Tx]) (idem.Writer, error) {
			if runs.Add(1) == 1 {
				close(started)
				<-release
			}
			if at.Generation() != 1 {
				return nil, errors.New("not in generation 1")
			}
			return func(w http.ResponseWriter) error { w.WriteHeader(201); return nil }, nil
		}
		serve := func() (*idem.Response, error) {
			r := httptest.NewRequest("POST", "/orders", nil)
			r.Header.Set(idem.HeaderKey, id.Key)
			return engine.Serve(idem.WithRequest(ctx, r), op, []byte("fp"), handler)
		}
		type result struct {
			resp *idem.Response
			err  error
		}
		first := make(chan result)
		go func() {
			resp, err := serve()
			first <- result{resp, err}
		}()
		<-started
		for _, force := range []bool{false, true} {
			k, err := s.ForgetKey(ctx, id, pgstore.ForgetOptions{Force: force})
			if !errors.Is(err, pgstore.ErrKeyHeld) || !k.Held {
				t.Errorf("ForgetKey (Force %v) of a key an atomic attempt holds = %+v, %v; want ErrKeyHeld", force, k, err)
			}
		}
		if row := keyRow(t, pool, id); row != "" {
			t.Fatalf("a refused forget wrote a row: %s", row)
		}
		d, err := s.ShowKey(ctx, id, pgstore.ShowOptions{})
		if err != nil || !d.Held || d.Status != pgstore.StatusInFlight {
			t.Errorf("ShowKey during the attempt = %+v, %v; want it in flight and held", d, err)
		}
		close(release)
		if r := <-first; r.err != nil || r.resp.Status != 201 {
			t.Fatalf("the first request = %+v, %v", r.resp, r.err)
		}

		// Once it completed, the key is forgotten; it derived no key, so its
		// row goes, and the next request runs as new.
		k, err := s.ForgetKey(ctx, id, pgstore.ForgetOptions{})
		if err != nil || k.Status != pgstore.StatusCompleted || k.Held || k.ResponseStatus != 201 {
			t.Fatalf("ForgetKey of the completed key = %+v, %v", k, err)
		}
		if row := keyRow(t, pool, id); row != "" {
			t.Errorf("the forgotten key's row is still there: %s", row)
		}
		if resp, err := serve(); err != nil || resp.Status != 201 || resp.Replayed {
			t.Fatalf("the next request = %+v, %v; want it run as new", resp, err)
		}
		if n := runs.Load(); n != 2 {
			t.Errorf("the handler ran %d times, want 2", n)
		}
	})
}

// ForgetKey forgets an abandoned attempt's key without Force, leaves an
// expired key as it is, and knows no key that is not there.
func TestForgetKey(t *testing.T) {
	ctx := context.Background()
	pool := newPool(t, nil)
	s := pgstore.New(pool, pgstore.Options{Logger: slog.New(slog.DiscardHandler)})
	id := idem.ID{Operation: "createPayment", Key: "abandoned"}

	if _, err := s.ForgetKey(ctx, id, pgstore.ForgetOptions{}); !errors.Is(err, pgstore.ErrKeyNotFound) {
		t.Fatalf("ForgetKey of a missing key = %v, want ErrKeyNotFound", err)
	}
	if _, err := s.ShowKey(ctx, id, pgstore.ShowOptions{}); !errors.Is(err, pgstore.ErrKeyNotFound) {
		t.Fatalf("ShowKey of a missing key = %v, want ErrKeyNotFound", err)
	}
	l, err := s.Lease(ctx, id, idem.Claim{Fingerprint: []byte("fp"), TTL: time.Hour, Lease: time.Minute, Generation: 3})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `UPDATE idempotency_keys SET locked_until = now() - interval '1 hour'`); err != nil {
		t.Fatal(err)
	}
	k, err := s.ForgetKey(ctx, id, pgstore.ForgetOptions{})
	if err != nil || k.Held || k.Status != pgstore.StatusInFlight || k.Generation != 3 || k.LeaseLeft() >= 0 {
		t.Fatalf("ForgetKey of an abandoned attempt = %+v, %v", k, err)
	}
	if _, err := l.Phase(ctx); !errors.Is(err, idem.ErrLeaseLost) {
		t.Fatalf("the abandoned attempt's next phase = %v, want ErrLeaseLost", err)
	}
	keys, err := s.ListKeys(ctx, pgstore.KeyFilter{Operation: id.Operation})
	if err != nil || len(keys) != 1 || keys[0].Status != pgstore.StatusExpired || keys[0].Generation != 3 || keys[0].Held || keys[0].TTLLeft() > 0 {
		t.Fatalf("ListKeys after the forget = %+v, %v; want the key emptied, expired, generation 3", keys, err)
	}
	before := keyRow(t, pool, id)
	if k, err := s.ForgetKey(ctx, id, pgstore.ForgetOptions{}); err != nil || k.Status != pgstore.StatusExpired {
		t.Fatalf("ForgetKey of an expired key = %+v, %v", k, err)
	}
	if after := keyRow(t, pool, id); after != before {
		t.Errorf("forgetting an expired key changed its row:\n%s\nto\n%s", before, after)
	}
}
