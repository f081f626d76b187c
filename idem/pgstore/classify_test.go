package pgstore_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/pgstore"
	"github.com/idemgen/idemgen/internal/pgtest"
	"github.com/idemgen/idemgen/schema"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// records counts the log records of a level.
type records struct {
	mu   sync.Mutex
	msgs []string
}

func (r *records) Enabled(context.Context, slog.Level) bool { return true }
func (r *records) Handle(_ context.Context, rec slog.Record) error {
	if rec.Level >= slog.LevelError {
		r.mu.Lock()
		r.msgs = append(r.msgs, rec.Message)
		r.mu.Unlock()
	}
	return nil
}
func (r *records) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *records) WithGroup(string) slog.Handler      { return r }

func (r *records) errors() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.msgs...)
}

// request sends one request with key through e's atomic operation; the
// handler returns handlerErr, or a 201.
func request(t *testing.T, e *idem.Engine[pgx.Tx], key string, handlerErr error) (*idem.Response, error) {
	t.Helper()
	r, _ := http.NewRequest("POST", "/orders", nil)
	r.Header.Set(idem.HeaderKey, key)
	op := &idem.Operation{Name: "createOrder", TTL: time.Hour, Lease: time.Minute}
	return e.Serve(idem.WithRequest(context.Background(), r), op, []byte("fp"), func(context.Context, *idem.Attempt[pgx.Tx]) (idem.Writer, error) {
		if handlerErr != nil {
			return nil, handlerErr
		}
		return func(w http.ResponseWriter) error { w.WriteHeader(201); return nil }, nil
	})
}

func problemType(t *testing.T, resp *idem.Response) string {
	t.Helper()
	var p idem.Problem
	if err := json.Unmarshal(resp.Body, &p); err != nil {
		t.Fatalf("%d %s: %v", resp.Status, resp.Body, err)
	}
	return p.Type
}

// Only a store that cannot be reached is a 503: a misconfigured one is a
// 500 that says so, logged once; a value the database refuses is the
// request's; and a handler's own network error is the handler's 500.
func TestStoreErrorClassification(t *testing.T) {
	ctx := context.Background()

	t.Run("table missing", func(t *testing.T) {
		pool := pgtest.NewPool(t) // never migrated
		log := &records{}
		e := idem.NewEngine(pgstore.New(pool, pgstore.Options{}), idem.Options{Logger: slog.New(log)})
		for _, key := range []string{"k1", "k2", "k3"} {
			resp, err := request(t, e, key, nil)
			if err != nil || resp.Status != 500 || problemType(t, resp) != idem.TypeStoreMisconfigured || resp.Header.Get("Retry-After") != "" {
				t.Fatalf("%s: %+v, %v; want a 500 store-misconfigured problem", key, resp, err)
			}
		}
		if got := log.errors(); len(got) != 1 || !strings.Contains(got[0], "misconfigured") {
			t.Fatalf("errors logged: %q, want the misconfiguration once", got)
		}
	})

	t.Run("permission denied", func(t *testing.T) {
		pool := newPool(t, nil)
		role := "idemgen_noaccess_" + randomHex(t)
		if _, err := pool.Exec(ctx, `CREATE ROLE `+role); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _, _ = pool.Exec(context.Background(), `DROP ROLE IF EXISTS `+role) })
		cfg := pool.Config().Copy()
		cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
			_, err := c.Exec(ctx, `SET ROLE `+role)
			return err
		}
		limited, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(limited.Close)
		e := idem.NewEngine(pgstore.New(limited, pgstore.Options{}), idem.Options{Logger: slog.New(&records{})})
		if resp, err := request(t, e, "k1", nil); err != nil || resp.Status != 500 || problemType(t, resp) != idem.TypeStoreMisconfigured {
			t.Fatalf("%+v, %v; want a 500 store-misconfigured problem", resp, err)
		}
		if err := pgstore.Check(ctx, limited); !errors.Is(err, pgstore.ErrSchema) || !strings.Contains(err.Error(), "grant") {
			t.Fatalf("Check as a role without access = %v, want ErrSchema saying what to grant", err)
		}
	})

	t.Run("unreachable", func(t *testing.T) {
		pool, err := pgxpool.New(ctx, "postgres://postgres@127.0.0.1:1/postgres?sslmode=disable&connect_timeout=5")
		if err != nil {
			t.Fatal(err)
		}
		defer pool.Close()
		e := idem.NewEngine(pgstore.New(pool, pgstore.Options{}), idem.Options{Logger: slog.New(&records{})})
		if resp, err := request(t, e, "k1", nil); err != nil || resp.Status != 503 || problemType(t, resp) != idem.TypeStoreUnavailable || resp.Header.Get("Retry-After") == "" {
			t.Fatalf("%+v, %v; want a 503 with Retry-After", resp, err)
		}
	})

	t.Run("refusing connections", func(t *testing.T) {
		// A database that refuses new sessions (ALLOW_CONNECTIONS false, as
		// during maintenance) cannot be reached: 503, every time.
		url := pgtest.NewDatabase(t)
		cfg, err := pgx.ParseConfig(url)
		if err != nil {
			t.Fatal(err)
		}
		db := cfg.Database
		cfg.Database = "postgres" // a database may not refuse its own session's
		admin, err := pgx.ConnectConfig(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer admin.Close(ctx)
		if _, err := admin.Exec(ctx, `ALTER DATABASE `+pgx.Identifier{db}.Sanitize()+` ALLOW_CONNECTIONS false`); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_, _ = admin.Exec(context.Background(), `ALTER DATABASE `+pgx.Identifier{db}.Sanitize()+` ALLOW_CONNECTIONS true`)
		})
		pool, err := pgxpool.New(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		defer pool.Close()
		e := idem.NewEngine(pgstore.New(pool, pgstore.Options{}), idem.Options{Logger: slog.New(&records{})})
		for _, key := range []string{"k1", "k2"} {
			if resp, err := request(t, e, key, nil); err != nil || resp.Status != 503 || problemType(t, resp) != idem.TypeStoreUnavailable || resp.Header.Get("Retry-After") == "" {
				t.Fatalf("%s: %+v, %v; want a 503 store-unavailable with Retry-After", key, resp, err)
			}
		}
	})

	t.Run("no such database", func(t *testing.T) {
		// A connection string naming a database that does not exist is
		// the deployment's mistake: a 500 that says the store is
		// misconfigured, not an outage to wait out.
		cfg, err := pgxpool.ParseConfig(pgtest.NewDatabase(t))
		if err != nil {
			t.Fatal(err)
		}
		cfg.ConnConfig.Database = "idemgen_no_such_database_" + randomHex(t)
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer pool.Close()
		e := idem.NewEngine(pgstore.New(pool, pgstore.Options{}), idem.Options{Logger: slog.New(&records{})})
		if resp, err := request(t, e, "k1", nil); err != nil || resp.Status != 500 || problemType(t, resp) != idem.TypeStoreMisconfigured {
			t.Fatalf("%+v, %v; want a 500 store-misconfigured problem", resp, err)
		}
	})

	t.Run("a value the handler's statement is refused", func(t *testing.T) {
		// A request's value the database cannot take (a NUL in text, a
		// number out of range) fails every retry alike: a 400, with the
		// key left free for the corrected request. A data exception of
		// the handler's own making stays its 500.
		pool := newPool(t, nil)
		e := idem.NewEngine(pgstore.New(pool, pgstore.Options{}), idem.Options{Logger: slog.New(&records{})})
		op := &idem.Operation{Name: "createOrder", TTL: time.Hour, Lease: time.Minute}
		serve := func(key, sql string, arg any) (*idem.Response, error) {
			r, _ := http.NewRequest("POST", "/orders", nil)
			r.Header.Set(idem.HeaderKey, key)
			return e.Serve(idem.WithRequest(ctx, r), op, []byte("fp"), func(ctx context.Context, at *idem.Attempt[pgx.Tx]) (idem.Writer, error) {
				if _, err := at.Tx().Exec(ctx, sql, arg); err != nil {
					return nil, fmt.Errorf("insert order: %w", err)
				}
				return func(w http.ResponseWriter) error { w.WriteHeader(201); return nil }, nil
			})
		}
		for _, tc := range []struct {
			name, sql string
			arg       any
		}{
			{"a NUL in text", `SELECT $1::text`, "a\x00b"},
			{"not an integer", `SELECT $1::text::int`, "twelve"},
			{"out of range", `SELECT $1::int::smallint`, 1 << 20},
		} {
			key := "k-" + randomHex(t)
			resp, err := serve(key, tc.sql, tc.arg)
			if err != nil || resp.Status != 400 || problemType(t, resp) != idem.TypeInvalidRequest {
				t.Fatalf("%s: %+v, %v; want a 400 invalid-request", tc.name, resp, err)
			}
			var rows int
			if err := pool.QueryRow(ctx, `SELECT count(*) FROM idempotency_keys WHERE key = $1`, key).Scan(&rows); err != nil || rows != 0 {
				t.Fatalf("%s: %d key rows (%v), want the key left free", tc.name, rows, err)
			}
			if resp, err := serve(key, `SELECT $1::text`, "ok"); err != nil || resp.Status != 201 || resp.Replayed {
				t.Fatalf("%s: the corrected request under the key: %+v, %v; want it run", tc.name, resp, err)
			}
		}
		if resp, err := serve("k-div", `SELECT 1 / $1::int`, 0); resp != nil || err == nil {
			t.Fatalf("a division by zero in the handler's query: %+v, %v; want the handler's error (its 500)", resp, err)
		}
	})

	t.Run("handler's own network error", func(t *testing.T) {
		pool := newPool(t, nil)
		e := idem.NewEngine(pgstore.New(pool, pgstore.Options{}), idem.Options{Logger: slog.New(&records{})})
		// A payment provider that accepts and never answers: the client's
		// timeout is a net.Error that has nothing to do with the store.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		client := &http.Client{Timeout: 50 * time.Millisecond}
		_, providerErr := client.Get("http://" + ln.Addr().String())
		if target := (net.Error)(nil); !errors.As(providerErr, &target) {
			t.Fatalf("provider error %v is not a net.Error", providerErr)
		}
		resp, err := request(t, e, "k1", providerErr)
		if err == nil || resp != nil {
			t.Fatalf("%+v, %v; want the handler's error back, for a 500", resp, err)
		}
		// The key is free: the retry runs.
		if resp, err := request(t, e, "k1", nil); err != nil || resp.Status != 201 {
			t.Fatalf("retry: %+v, %v", resp, err)
		}
	})

	t.Run("value the database refuses", func(t *testing.T) {
		s := pgstore.New(newPool(t, nil), pgstore.Options{})
		_, err := s.Lookup(ctx, idem.ID{Scope: "acct\x00", Operation: "createOrder", Key: "k1"})
		if !errors.Is(err, idem.ErrStoreRejectedInput) || errors.Is(err, idem.ErrStoreUnavailable) {
			t.Fatalf("Lookup with a NUL in the scope = %v, want idem.ErrStoreRejectedInput", err)
		}
	})
}

func randomHex(t *testing.T) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Check fails, naming the migration to apply, on a database without the
// key store or with an older one, and passes once it is migrated.
func TestCheck(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.NewPool(t)
	if err := pgstore.Check(ctx, pool); !errors.Is(err, pgstore.ErrSchema) || !strings.Contains(err.Error(), "idempotency_keys is missing") || !strings.Contains(err.Error(), "pgstore.Migrate") {
		t.Fatalf("Check on an empty database = %v, want ErrSchema saying the table is missing and what to run", err)
	}
	first, err := fs.ReadFile(schema.FS, "0001_idempotency_keys.up.sql")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, string(first)); err != nil {
		t.Fatal(err)
	}
	if err := pgstore.Check(ctx, pool); !errors.Is(err, pgstore.ErrSchema) || !strings.Contains(err.Error(), "older than this code") || !strings.Contains(err.Error(), "0002_phased_attempts") {
		t.Fatalf("Check on a database at migration 0001 = %v, want ErrSchema naming 0002_phased_attempts", err)
	}
	if err := pgstore.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	if err := pgstore.Check(ctx, pool); err != nil {
		t.Fatalf("Check after Migrate: %v", err)
	}
}
