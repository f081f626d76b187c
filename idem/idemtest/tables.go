package idemtest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
)

// Tables is a digest of an application's tables as committed in its
// database: each table's row count and a checksum of its rows. The error
// check reads one before and one after the run it makes fail (see
// Hooks.Tables): a table the failed run changed was written outside the
// attempt's transaction.
type Tables struct {
	digests map[string]tableDigest // by schema-qualified name
}

type tableDigest struct {
	rows int64
	sum  string // the sum of the rows' hashes
}

// Querier is what ReadTables needs of a database: *pgxpool.Pool,
// *pgx.Conn and pgx.Tx are ones.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// storeTables are the key store's own tables, which ReadTables leaves
// out: a failed phased attempt's claim, for one, commits before its first
// phase runs.
var storeTables = []string{"idempotency_keys", "idempotency_secret", "idemgen_schema_migrations", "idemgen_filter_epoch"}

// ReadTables reads the digest of every table of db's database that db
// may read, but the system catalogs and the key store's own tables
// (idempotency_keys, idempotency_secret, idemgen_schema_migrations,
// idemgen_filter_epoch), in one statement.
// Each table is read whole, so keep a test's database to what the test
// needs.
func ReadTables(ctx context.Context, db Querier) (*Tables, error) {
	rows, err := db.Query(ctx, `SELECT n.nspname, c.relname
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE c.relkind = 'r' AND n.nspname <> 'information_schema' AND n.nspname !~ '^pg_'
		  AND c.relname <> ALL ($1) AND has_table_privilege(c.oid, 'SELECT')
		ORDER BY 1, 2`, storeTables)
	if err != nil {
		return nil, fmt.Errorf("idemtest: list the application's tables: %w", err)
	}
	names, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (pgx.Identifier, error) {
		var schema, table string
		err := r.Scan(&schema, &table)
		return pgx.Identifier{schema, table}, err
	})
	if err != nil {
		return nil, fmt.Errorf("idemtest: list the application's tables: %w", err)
	}
	t := &Tables{digests: make(map[string]tableDigest, len(names))}
	if len(names) == 0 {
		return t, nil
	}
	// ONLY: a row of an inherited or partitioned table counts once, in
	// the table that holds it.
	var q strings.Builder
	for i, name := range names {
		if i > 0 {
			q.WriteString("\nUNION ALL ")
		}
		fmt.Fprintf(&q, "SELECT %d, count(*), coalesce(sum(hashtextextended(t::text, 0)), 0)::text FROM ONLY %s AS t", i, name.Sanitize())
	}
	rows, err = db.Query(ctx, q.String())
	if err != nil {
		return nil, fmt.Errorf("idemtest: read the application's tables: %w", err)
	}
	var (
		i int
		d tableDigest
	)
	_, err = pgx.ForEachRow(rows, []any{&i, &d.rows, &d.sum}, func() error {
		t.digests[displayName(names[i])] = d
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("idemtest: read the application's tables: %w", err)
	}
	return t, nil
}

// displayName is a table's name as messages give it: without the schema
// when that is public.
func displayName(id pgx.Identifier) string {
	if id[0] == "public" {
		return id[1]
	}
	return id[0] + "." + id[1]
}

// changed lists the tables whose rows differ in after, in name order, each
// with its row counts, leaving out the tables named in ignore ("audit" or
// "schema.audit").
func (t *Tables) changed(after *Tables, ignore []string) []string {
	var names []string
	for name := range t.digests {
		names = append(names, name)
	}
	for name := range after.digests {
		if _, ok := t.digests[name]; !ok {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	var changed []string
	for _, name := range names {
		if ignored(name, ignore) {
			continue
		}
		b, inBefore := t.digests[name]
		a, inAfter := after.digests[name]
		switch {
		case !inBefore:
			changed = append(changed, fmt.Sprintf("%s (created, %s)", name, rows(a.rows)))
		case !inAfter:
			changed = append(changed, fmt.Sprintf("%s (dropped)", name))
		case a.rows != b.rows:
			changed = append(changed, fmt.Sprintf("%s (%s before the run, %d after)", name, rows(b.rows), a.rows))
		case a.sum != b.sum:
			changed = append(changed, fmt.Sprintf("%s (%s, some changed)", name, rows(a.rows)))
		}
	}
	return changed
}

func rows(n int64) string {
	if n == 1 {
		return "1 row"
	}
	return fmt.Sprintf("%d rows", n)
}

func ignored(name string, ignore []string) bool {
	for _, i := range ignore {
		if i == name || i == "public."+name {
			return true
		}
	}
	return false
}

// AttemptDB learns from an operation's attempts which database they run
// on, so that the checks can read the application's tables there
// (Hooks.Tables) without being handed a pool. The generated conformance
// helpers keep one per operation and show it each attempt's transaction.
type AttemptDB struct {
	cfg atomic.Pointer[pgx.ConnConfig]
}

// Observe records the database of tx, an attempt's transaction (at.Tx()),
// when it is a pgx.Tx, as the Postgres store's are; the in-memory store's
// memstore.NoTx records nothing. It sends no statement.
func (d *AttemptDB) Observe(tx any) {
	if d.cfg.Load() != nil {
		return
	}
	c, ok := tx.(interface{ Conn() *pgx.Conn })
	if !ok {
		return
	}
	if conn := c.Conn(); conn != nil {
		cfg := conn.Config()
		cfg.Tracer = nil // the kit's reads are not the application's statements
		d.cfg.CompareAndSwap(nil, cfg)
	}
}

// Tables reads the application's tables (ReadTables) on a connection of
// its own to the database observed. It returns nil, and no error, when no
// attempt with a database was observed.
func (d *AttemptDB) Tables(ctx context.Context) (*Tables, error) {
	cfg := d.cfg.Load()
	if cfg == nil {
		return nil, nil
	}
	conn, err := pgx.ConnectConfig(ctx, cfg.Copy())
	if err != nil {
		return nil, fmt.Errorf("idemtest: connect to read the application's tables: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return ReadTables(ctx, conn)
}
