// Package pgtest gives tests their own empty PostgreSQL databases on a
// server found or started by pglocal.
//
// A package using it must have
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
//
// so that a throwaway cluster started for the test binary is stopped, and
// the databases kept for reuse are dropped.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/internal/pglocal"
)

// One server per test binary, started on first use so packages whose tests
// never touch the database pay nothing.
var (
	serverOnce sync.Once
	server     *pglocal.Server
	serverErr  error

	// mainUsed records that Main will stop the server; without it a
	// throwaway cluster would outlive the test binary.
	mainUsed bool
)

// Main runs the tests, then the cleanups, drops the databases kept for
// reuse, stops a cluster started for the tests, and exits with the tests'
// exit code.
//
// Unless -test.parallel is given, it runs four parallel tests per CPU
// rather than one: tests on a database spend most of their time waiting
// for it, for a lease to end or for a timeout, not computing.
func Main(m *testing.M, cleanups ...func()) {
	mainUsed = true
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		if err := flag.Set("test.parallel", strconv.Itoa(4*runtime.GOMAXPROCS(0))); err != nil {
			fmt.Fprintln(os.Stderr, "pgtest:", err)
		}
	}
	code := m.Run()
	for _, f := range cleanups {
		f()
	}
	if err := dropAll(); err != nil {
		fmt.Fprintln(os.Stderr, "pgtest:", err)
		if code == 0 {
			code = 1
		}
	}
	if server != nil {
		if err := server.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "pgtest:", err)
			if code == 0 {
				code = 1
			}
		}
	}
	os.Exit(code)
}

func adminURL(t testing.TB) string {
	t.Helper()
	if !mainUsed {
		// Required everywhere, not only where a cluster gets started, so a
		// missing TestMain shows up on every machine.
		t.Fatal("add `func TestMain(m *testing.M) { idemtest.Main(m) }` to this package's tests, so that a throwaway PostgreSQL cluster started for them gets stopped")
	}
	serverOnce.Do(func() {
		// Stderr output is only shown for failing packages or with -v,
		// which is when knowing the server's source helps.
		log := slog.New(slog.NewTextHandler(os.Stderr, nil))
		server, serverErr = pglocal.Start(context.Background(), pglocal.Options{Logger: log})
	})
	if serverErr != nil {
		t.Fatalf("pgtest: no PostgreSQL server for tests: %v", serverErr)
	}
	return server.URL
}

// NewDatabase gives this test an empty database of its own and returns its
// URL. When the test ends the database's sessions are ended and it is
// renamed, so that its URL stops working, then emptied for a later test of
// this binary, or dropped if it cannot be made exactly as fresh again.
func NewDatabase(t testing.TB) string {
	t.Helper()
	admin := adminURL(t)
	name, err := acquire(t.Context(), admin)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() { release(admin, name) })

	u, err := withDatabase(admin, name)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	return u
}

// NewPool returns a pool connected to a database from NewDatabase. The
// pool is closed, then the database released, when the test ends.
func NewPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	u := NewDatabase(t)
	pool, err := pgxpool.New(t.Context(), u)
	if err != nil {
		t.Fatalf("pgtest: creating pool: %v", err)
	}
	t.Cleanup(pool.Close)
	// pgxpool connects lazily; fail here rather than in the test body.
	if err := pool.Ping(t.Context()); err != nil {
		t.Fatalf("pgtest: connecting pool: %v", err)
	}
	return pool
}

// Databases are reused within a test binary: CREATE DATABASE copies
// template0, which takes hundreds of milliseconds on a slow disk, while
// emptying a used database takes tens. That is done in the background, so
// that the next test takes another database meanwhile.
var dbs struct {
	mu    sync.Mutex
	admin *pgxpool.Pool
	free  []string        // emptied, ready to hand out
	held  map[string]bool // every database of this binary, for Main to drop
	busy  int             // databases being created or emptied in the background

	migrated     map[string]*migrated // by database, those NewMigratedDatabase made
	freeMigrated []string             // migrated and emptied of rows, ready to hand out
	releasing    map[string]int       // by kind, migrated databases being released
	errs         []error              // of databases that could not be dropped
	done         *sync.Cond           // busy went down

	// What a fresh database looks like, learnt from the first one created;
	// reuse is off when that failed.
	freshOnce sync.Once
	freshErr  error
	check     string // query returning a database's fingerprint
	want      string // a fresh database's fingerprint
}

func init() { dbs.done = sync.NewCond(&dbs.mu) }

func adminPool(admin string) (*pgxpool.Pool, error) {
	dbs.mu.Lock()
	defer dbs.mu.Unlock()
	if dbs.admin == nil {
		cfg, err := pgxpool.ParseConfig(admin)
		if err != nil {
			return nil, fmt.Errorf("parsing server URL: %w", err)
		}
		// Few, as each test binary keeps its own while others run.
		cfg.MaxConns = 3
		cfg.ConnConfig.RuntimeParams["synchronous_commit"] = "off"
		p, err := pgxpool.NewWithConfig(context.Background(), cfg)
		if err != nil {
			return nil, fmt.Errorf("connecting to admin database: %w", err)
		}
		dbs.admin = p
	}
	return dbs.admin, nil
}

func newName() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails, per crypto/rand docs
	return "idemgen_test_" + hex.EncodeToString(b[:])
}

func ident(name string) string { return pgx.Identifier{name}.Sanitize() }

func hold(name string, held bool) {
	dbs.mu.Lock()
	defer dbs.mu.Unlock()
	if dbs.held == nil {
		dbs.held = map[string]bool{}
	}
	if held {
		dbs.held[name] = true
	} else {
		delete(dbs.held, name)
	}
}

// acquire returns a free database, or a new one.
func acquire(ctx context.Context, admin string) (string, error) {
	pool, err := adminPool(admin)
	if err != nil {
		return "", err
	}
	dbs.mu.Lock()
	// Waiting for one being emptied is quicker than creating one.
	for len(dbs.free) == 0 && dbs.busy > 0 {
		dbs.done.Wait()
	}
	var name string
	if n := len(dbs.free); n > 0 {
		name, dbs.free = dbs.free[n-1], dbs.free[:n-1]
	}
	// A spare, so that the next test need not wait while this one's
	// database is emptied.
	spare := len(dbs.free) == 0 && dbs.busy == 0
	if spare {
		dbs.busy++
	}
	dbs.mu.Unlock()
	if spare {
		background(func(ctx context.Context) error {
			name, err := create(ctx, admin, pool)
			if err != nil {
				// Not the tests' failure: acquire creates one itself.
				fmt.Fprintln(os.Stderr, "pgtest: creating a spare database:", err)
				return nil
			}
			dbs.mu.Lock()
			dbs.free = append(dbs.free, name)
			dbs.mu.Unlock()
			return nil
		})
	}
	if name != "" {
		return name, nil
	}
	return create(ctx, admin, pool)
}

func create(ctx context.Context, admin string, pool *pgxpool.Pool) (string, error) {
	name := newName()
	// template0 guarantees an empty database even if template1 on a shared
	// server has been modified, and nobody can be connected to it, which
	// would make concurrent CREATE DATABASE calls fail.
	if _, err := pool.Exec(ctx, "CREATE DATABASE "+ident(name)+" TEMPLATE template0"); err != nil {
		return "", fmt.Errorf("creating database %s: %w", name, err)
	}
	hold(name, true)
	// Learnt before any test has used the database.
	dbs.freshOnce.Do(func() { dbs.freshErr = learnFresh(ctx, admin, name) })
	return name, nil
}

// background runs f, counted in dbs.busy; its error is reported by Main.
func background(f func(context.Context) error) {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		err := f(ctx)
		dbs.mu.Lock()
		defer dbs.mu.Unlock()
		if err != nil {
			dbs.errs = append(dbs.errs, err)
		}
		dbs.busy--
		dbs.done.Broadcast()
	}()
}

// settle waits for the work in the background to end.
func settle() {
	dbs.mu.Lock()
	defer dbs.mu.Unlock()
	for dbs.busy > 0 {
		dbs.done.Wait()
	}
}

// release empties name for reuse in the background, or drops it.
func release(admin, name string) {
	dbs.mu.Lock()
	dbs.busy++
	m := dbs.migrated[name]
	if m != nil {
		if dbs.releasing == nil {
			dbs.releasing = map[string]int{}
		}
		dbs.releasing[m.kind]++
	}
	dbs.mu.Unlock()
	background(func(ctx context.Context) error {
		if m != nil {
			// After it is back among the free ones, or not.
			defer func() {
				dbs.mu.Lock()
				dbs.releasing[m.kind]--
				dbs.mu.Unlock()
			}()
		}
		pool, err := adminPool(admin)
		if err != nil {
			return err
		}
		err = dbs.freshErr // set: acquire ran freshOnce
		if err == nil {
			var renamed string
			if renamed, err = detach(ctx, pool, name); err == nil {
				hold(name, false)
				hold(renamed, true)
				was := name
				name = renamed
				var reused bool
				if reused, err = reuseMigrated(ctx, admin, was, name); reused {
					return nil
				}
				if err == nil {
					err = empty(ctx, admin, name)
				}
				if err == nil {
					dbs.mu.Lock()
					dbs.free = append(dbs.free, name)
					dbs.mu.Unlock()
					return nil
				}
			}
		}
		// Shown with -v or when the package fails.
		fmt.Fprintf(os.Stderr, "pgtest: dropping database %s rather than reusing it: %v\n", name, err)
		return drop(ctx, pool, name)
	})
}

// detach ends the sessions on name and renames it, so that no client of
// the test that used it, such as a pool reconnecting late, can reach it.
func detach(ctx context.Context, pool *pgxpool.Pool, name string) (string, error) {
	renamed := newName()
	for attempt := 1; ; attempt++ {
		// The timeout makes it wait until they have exited, releasing their
		// session advisory locks and temporary tables.
		if _, err := pool.Exec(ctx, `SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()`, name); err != nil {
			return "", fmt.Errorf("ending sessions: %w", err)
		}
		_, err := pool.Exec(ctx, "ALTER DATABASE "+ident(name)+" RENAME TO "+ident(renamed))
		if err == nil {
			return renamed, nil
		}
		// A client connected again in between.
		var pgErr *pgconn.PgError
		if attempt == 3 || !errors.As(err, &pgErr) || pgErr.Code != "55006" {
			return "", fmt.Errorf("renaming: %w", err)
		}
	}
}

// resetSQL drops what a test can leave in a database, found in its
// catalogs; anything it misses makes the fingerprint differ, and the
// database dropped.
const resetSQL = `SET client_min_messages = warning;
DO $pgtest$
DECLARE s text;
BEGIN
	-- Listed before any runs, so that each names an object that existed.
	FOREACH s IN ARRAY ARRAY(
		SELECT stmt FROM (
			SELECT 1, format('ALTER DATABASE %I RESET ALL', current_database())
			UNION ALL SELECT 2, format('ALTER ROLE %s IN DATABASE %I RESET ALL', setrole::regrole, current_database())
				FROM pg_db_role_setting WHERE setrole <> 0 AND setdatabase = (SELECT oid FROM pg_database WHERE datname = current_database())
			-- Before any DDL they could fire on.
			UNION ALL SELECT 3, format('DROP EVENT TRIGGER %I', evtname) FROM pg_event_trigger
			UNION ALL SELECT 4, format('DROP PUBLICATION %I', pubname) FROM pg_publication
			UNION ALL SELECT 5, format('SELECT lo_unlink(%s)', oid) FROM pg_largeobject_metadata
			UNION ALL SELECT 6, format('DROP EXTENSION IF EXISTS %I CASCADE', extname) FROM pg_extension WHERE oid >= 16384
			UNION ALL SELECT 7, format('DROP FOREIGN DATA WRAPPER IF EXISTS %I CASCADE', fdwname) FROM pg_foreign_data_wrapper WHERE oid >= 16384
			UNION ALL SELECT 8, format('DROP SCHEMA IF EXISTS %I CASCADE', nspname) FROM pg_namespace
				WHERE nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast', 'public')
			-- Schema public is kept, with template0's OID and initial
			-- privileges; what is in it goes.
			UNION ALL SELECT 9, format('DROP %s IF EXISTS %s CASCADE',
					CASE o.type WHEN 'composite type' THEN 'TYPE' WHEN 'statistics object' THEN 'STATISTICS'
						WHEN 'partitioned table' THEN 'TABLE' WHEN 'partitioned index' THEN 'INDEX' ELSE upper(o.type) END,
					o.identity)
				FROM pg_depend d, pg_identify_object(d.classid, d.objid, 0) o
				WHERE d.refclassid = 'pg_namespace'::regclass AND d.refobjid = 'public'::regnamespace AND d.deptype = 'n'
					-- Parts of another object go with it.
					AND NOT EXISTS (SELECT FROM pg_depend p WHERE p.classid = d.classid AND p.objid = d.objid
						AND p.deptype IN ('i', 'e') AND (p.refclassid, p.refobjid) <> (p.classid, p.objid))
		) s(ord, stmt)
		ORDER BY ord)
	LOOP
		EXECUTE s;
	END LOOP;
END
$pgtest$;
`

// empty resets name to what a fresh database is, or says how it differs.
func empty(ctx context.Context, admin, name string) error {
	u, err := withDatabase(admin, name)
	if err != nil {
		return err
	}
	conn, err := connect(ctx, u)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	// One implicit transaction: a failure leaves nothing half done.
	if _, err := conn.Exec(ctx, resetSQL); err != nil {
		return fmt.Errorf("emptying: %w", err)
	}
	var got string
	if err := conn.QueryRow(ctx, dbs.check).Scan(&got); err != nil {
		return fmt.Errorf("inspecting: %w", err)
	}
	if got != dbs.want {
		return fmt.Errorf("unlike a fresh one after emptying: %s", diff(got, dbs.want))
	}
	return nil
}

// diff lists the lines of got that are not in want.
func diff(got, want string) string {
	var d []string
	for _, line := range strings.Split(got, "\n") {
		if !slices.Contains(strings.Split(want, "\n"), line) {
			d = append(d, line)
		}
	}
	return strings.Join(d, "; ")
}

// learnFresh records the fingerprint of the fresh database name, which a
// reused database must match.
func learnFresh(ctx context.Context, admin, name string) error {
	u, err := withDatabase(admin, name)
	if err != nil {
		return err
	}
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		return fmt.Errorf("connecting to %s: %w", name, err)
	}
	defer conn.Close(context.Background())

	// Objects made by initdb, all of template0's, have OIDs below
	// FirstNormalObjectId (16384); any other is a test's.
	rows, err := conn.Query(ctx, `
		SELECT format('SELECT %L, count(*) FROM pg_catalog.%I WHERE oid >= 16384', c.relname, c.relname)
		FROM pg_class c
		WHERE c.relnamespace = 'pg_catalog'::regnamespace AND c.relkind = 'r' AND NOT c.relisshared
		  AND EXISTS (SELECT FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname = 'oid' AND NOT a.attisdropped)
		ORDER BY c.relname`)
	if err != nil {
		return fmt.Errorf("listing catalogs: %w", err)
	}
	counts, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("listing catalogs: %w", err)
	}
	check := `WITH db AS (SELECT * FROM pg_database WHERE datname = current_database())
SELECT concat_ws(E'\n',
	'objects: ' || coalesce((SELECT string_agg(c || ' ' || n, ', ' ORDER BY c) FROM (` + strings.Join(counts, " UNION ALL ") + `) o(c, n) WHERE n > 0), 'none'),
	'schemas: ' || (SELECT string_agg(format('%s owner %s acl %s comment %s', nspname, nspowner::regrole, nspacl, obj_description(oid, 'pg_namespace')), ', ' ORDER BY nspname) FROM pg_namespace),
	(SELECT format('database: owner %s acl %s connlimit %s allowconn %s template %s tablespace %s comment %s labels %s',
		datdba::regrole, datacl, datconnlimit, datallowconn, datistemplate, dattablespace, shobj_description(oid, 'pg_database'),
		(SELECT count(*) FROM pg_shseclabel l WHERE l.objoid = db.oid AND l.classoid = 'pg_database'::regclass)) FROM db),
	'settings: ' || (SELECT count(*) FROM pg_db_role_setting WHERE setdatabase = (SELECT oid FROM db)),
	'shared dependencies: ' || (SELECT count(*) FROM pg_shdepend WHERE dbid = (SELECT oid FROM db)),
	'subscriptions: ' || (SELECT count(*) FROM pg_subscription WHERE subdbid = (SELECT oid FROM db)),
	'prepared transactions: ' || (SELECT count(*) FROM pg_prepared_xacts WHERE database = current_database()),
	'replication slots: ' || (SELECT count(*) FROM pg_replication_slots WHERE database = current_database()),
	'other sessions: ' || (SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'))`

	var want string
	if err := conn.QueryRow(ctx, check).Scan(&want); err != nil {
		return fmt.Errorf("inspecting fresh database: %w", err)
	}
	dbs.check, dbs.want = check, want
	return nil
}

func drop(ctx context.Context, pool *pgxpool.Pool, name string) error {
	// FORCE ends connections the test left open.
	if _, err := pool.Exec(ctx, "DROP DATABASE IF EXISTS "+ident(name)+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("dropping database %s: %w", name, err)
	}
	hold(name, false)
	return nil
}

// dropAll waits for the work in the background, then drops every
// database of this binary, a few at a time.
func dropAll() error {
	settle()
	dbs.mu.Lock()
	pool := dbs.admin
	var names []string
	for name := range dbs.held {
		names = append(names, name)
	}
	dbs.free, dbs.freeMigrated = nil, nil
	errs := dbs.errs
	dbs.mu.Unlock()
	if pool == nil {
		return errors.Join(errs...)
	}
	defer pool.Close()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dropErrs := make([]error, len(names))
	sem := make(chan struct{}, 4)
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			dropErrs[i] = drop(ctx, pool, name)
		}()
	}
	wg.Wait()
	return errors.Join(append(errs, dropErrs...)...)
}

// withDatabase returns admin with its database replaced by name. admin may
// be a URL or, from DATABASE_URL, a keyword/value string.
func withDatabase(admin, name string) (string, error) {
	if strings.HasPrefix(admin, "postgres://") || strings.HasPrefix(admin, "postgresql://") {
		u, err := url.Parse(admin)
		if err != nil {
			return "", fmt.Errorf("parsing server URL: %w", err)
		}
		u.Path = "/" + name
		u.RawPath = ""
		return u.String(), nil
	}
	// In keyword/value strings a later keyword overrides an earlier one.
	return admin + " dbname=" + name, nil
}

// WaitForLockWait returns once another session, running a statement that
// contains query, waits for a lock: the moment a test wants to send what
// would queue behind it. It fails t when ctx ends first.
func WaitForLockWait(ctx context.Context, t testing.TB, pool *pgxpool.Pool, query string) {
	t.Helper()
	for {
		var waiting bool
		err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_stat_activity
			WHERE wait_event_type = 'Lock' AND position($1 IN query) > 0 AND pid <> pg_backend_pid())`, query).Scan(&waiting)
		if err != nil {
			t.Fatalf("waiting for %q to wait for a lock: %v", query, err)
		}
		if waiting {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no session ran %q waiting for a lock", query)
		case <-time.After(5 * time.Millisecond):
		}
	}
}
