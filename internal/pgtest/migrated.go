package pgtest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// A store's tests migrate each database before using it, and on the
// smallest tests the migration costs the server more than the test. So a
// database migrated for a kind of test is reused in its migrated state:
// when its test ends and nothing but rows changed in it, the tables that
// were empty after migrating are emptied again, and the next test of that
// kind takes it as it is. Anything else changed (a dropped function, a
// changed row the migration wrote, a setting) and it is reset to fresh.
type migrated struct {
	kind   string   // the kind of test it is kept for
	digest string   // schema and migration-written rows, after migrating
	empty  []string // tables that were empty after migrating
}

// NewMigratedDatabase gives this test a database on which migrate has run
// and returns its URL, as NewDatabase does. kind names migrate: databases
// are only reused for the same kind, which must always be migrated by the
// same function.
func NewMigratedDatabase(t testing.TB, kind string, migrate func(ctx context.Context, url string) error) string {
	t.Helper()
	admin := adminURL(t)
	name := takeMigrated(kind)
	if name == "" {
		var err error
		if name, err = acquire(t.Context(), admin); err != nil {
			t.Fatalf("pgtest: %v", err)
		}
		u, err := withDatabase(admin, name)
		if err == nil {
			err = migrate(t.Context(), u)
		}
		var m *migrated
		if err == nil {
			m, err = inspectMigrated(t.Context(), u)
		}
		if err != nil {
			release(admin, name)
			t.Fatalf("pgtest: migrating database %s: %v", name, err)
		}
		m.kind = kind
		dbs.mu.Lock()
		if dbs.migrated == nil {
			dbs.migrated = map[string]*migrated{}
		}
		dbs.migrated[name] = m
		dbs.mu.Unlock()
	}
	t.Cleanup(func() { release(admin, name) })
	u, err := withDatabase(admin, name)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	return u
}

// takeMigrated returns a free database migrated for kind, or "".
func takeMigrated(kind string) string {
	dbs.mu.Lock()
	defer dbs.mu.Unlock()
	for {
		for i, name := range dbs.freeMigrated {
			if dbs.migrated[name].kind == kind {
				dbs.freeMigrated = slices.Delete(dbs.freeMigrated, i, i+1)
				return name
			}
		}
		// One being released may come back migrated, which is quicker
		// than migrating another.
		if dbs.releasing[kind] == 0 {
			return ""
		}
		dbs.done.Wait()
	}
}

// reuseMigrated makes name, renamed from was, ready for the next test of
// its kind, and reports whether it could; false sends it the fresh way.
func reuseMigrated(ctx context.Context, admin, was, name string) (bool, error) {
	dbs.mu.Lock()
	m := dbs.migrated[was]
	delete(dbs.migrated, was)
	dbs.mu.Unlock()
	if m == nil {
		return false, nil
	}

	u, err := withDatabase(admin, name)
	if err != nil {
		return false, err
	}
	conn, err := connect(ctx, u)
	if err != nil {
		return false, err
	}
	defer conn.Close(context.Background())
	digest, err := migratedDigest(ctx, conn, m.empty)
	if err != nil || digest != m.digest {
		return false, err
	}
	// Only those the test wrote to: TRUNCATE makes each table's files
	// anew, which costs more than looking.
	var written []string
	if len(m.empty) > 0 {
		cases := make([]string, len(m.empty))
		for i, table := range m.empty {
			// table is regclass's text, quoted where SQL needs it.
			cases[i] = fmt.Sprintf("CASE WHEN EXISTS (SELECT FROM %s) THEN '%s' END", table, strings.ReplaceAll(table, "'", "''"))
		}
		q := "SELECT array_remove(ARRAY[" + strings.Join(cases, ", ") + "]::text[], NULL)"
		if err := conn.QueryRow(ctx, q).Scan(&written); err != nil {
			return false, fmt.Errorf("inspecting the tables: %w", err)
		}
	}
	if len(written) > 0 {
		// Without CASCADE: a table the migration filled that refers to
		// one of these is a change this does not undo.
		if _, err := conn.Exec(ctx, "TRUNCATE "+strings.Join(written, ", ")+" RESTART IDENTITY"); err != nil {
			return false, nil
		}
	}
	// A sequence is used without a row to show for it when an insert
	// fails or is deleted.
	rows, err := conn.Query(ctx, `SELECT c.oid::regclass::text, d.refobjid::regclass::text FROM pg_class c
		JOIN pg_depend d ON d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.deptype IN ('a', 'i')
		WHERE c.relkind = 'S' AND CASE WHEN c.relkind = 'S' THEN pg_sequence_last_value(c.oid) END IS NOT NULL`)
	if err != nil {
		return false, fmt.Errorf("listing sequences: %w", err)
	}
	type owned struct{ Seq, Table string }
	used, err := pgx.CollectRows(rows, pgx.RowToStructByPos[owned])
	if err != nil {
		return false, fmt.Errorf("listing sequences: %w", err)
	}
	for _, seq := range used {
		if slices.Contains(m.empty, seq.Table) {
			if _, err := conn.Exec(ctx, "ALTER SEQUENCE "+seq.Seq+" RESTART"); err != nil {
				return false, fmt.Errorf("restarting %s: %w", seq.Seq, err)
			}
		}
	}
	dbs.mu.Lock()
	dbs.migrated[name] = m
	dbs.freeMigrated = append(dbs.freeMigrated, name)
	dbs.mu.Unlock()
	return true, nil
}

func connect(ctx context.Context, u string) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(u)
	if err != nil {
		return nil, err
	}
	cfg.RuntimeParams["synchronous_commit"] = "off"
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connecting: %w", err)
	}
	return conn, nil
}

// inspectMigrated records what the database at u is right after migrating.
func inspectMigrated(ctx context.Context, u string) (*migrated, error) {
	conn, err := connect(ctx, u)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.Background())
	all, err := tables(ctx, conn)
	if err != nil {
		return nil, err
	}
	m := &migrated{}
	for _, table := range all {
		var filled bool
		if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT FROM "+table+")").Scan(&filled); err != nil {
			return nil, fmt.Errorf("inspecting %s: %w", table, err)
		}
		if !filled {
			m.empty = append(m.empty, table)
		}
	}
	if m.digest, err = migratedDigest(ctx, conn, m.empty); err != nil {
		return nil, err
	}
	return m, nil
}

// schemaSQL lists the objects a test can change in a database, by name
// and definition, each on a line. Any other object made or dropped
// shows in the dependencies: nearly every object depends on another (its
// schema, its type, its table) or on a role, and gets a new OID when
// made again. It reads few catalogs, as the session that runs it is new
// and each catalog it reads must first be loaded into its caches: the
// fresh database's check reads them all and costs several times more.
const schemaSQL = `SELECT coalesce(string_agg(x, E'\n' ORDER BY x), '') FROM (
	SELECT format('dependencies %s %s', count(*), sum(objid::int8)) FROM pg_depend WHERE objid >= 16384
	UNION ALL SELECT format('shared dependencies %s %s', count(*), sum(objid::int8)) FROM pg_shdepend WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
	UNION ALL SELECT format('settings %s', count(*)) FROM pg_db_role_setting WHERE setdatabase = (SELECT oid FROM pg_database WHERE datname = current_database())
	UNION ALL SELECT format('prepared transactions %s', count(*)) FROM pg_prepared_xacts WHERE database = current_database()
	UNION ALL SELECT format('relation %s %s %s %s %s %s %s', c.oid::regclass, c.relkind, c.relpersistence, c.relacl, c.reloptions, c.relrowsecurity, c.relreplident)
		FROM pg_class c WHERE c.oid >= 16384
	UNION ALL SELECT format('column %s %s %s %s %s %s', a.attrelid::regclass, a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull, a.attisdropped, pg_get_expr(d.adbin, d.adrelid))
		FROM pg_attribute a LEFT JOIN pg_attrdef d ON (d.adrelid, d.adnum) = (a.attrelid, a.attnum)
		WHERE a.attrelid >= 16384 AND a.attnum > 0
	UNION ALL SELECT format('constraint %s %s %s', conrelid::regclass, conname, pg_get_constraintdef(oid)) FROM pg_constraint WHERE oid >= 16384
	UNION ALL SELECT format('index %s', pg_get_indexdef(indexrelid)) FROM pg_index WHERE indexrelid >= 16384
	UNION ALL SELECT format('function %s %s %s', oid::regprocedure, md5(pg_get_functiondef(oid)), proacl) FROM pg_proc WHERE oid >= 16384 AND prokind <> 'a'
	UNION ALL SELECT format('aggregate %s', oid::regprocedure) FROM pg_proc WHERE oid >= 16384 AND prokind = 'a'
	UNION ALL SELECT format('trigger %s %s', pg_get_triggerdef(oid), tgenabled) FROM pg_trigger WHERE oid >= 16384
	UNION ALL SELECT format('view %s %s', oid::regclass, md5(pg_get_viewdef(oid))) FROM pg_class WHERE relkind IN ('v', 'm') AND oid >= 16384
	UNION ALL SELECT format('type %s %s', oid::regtype, typtype) FROM pg_type WHERE oid >= 16384
	UNION ALL SELECT format('enum %s %s %s', enumtypid::regtype, enumlabel, enumsortorder) FROM pg_enum WHERE oid >= 16384
	UNION ALL SELECT format('policy %s %s', polrelid::regclass, polname) FROM pg_policy
	UNION ALL SELECT format('comment %s %s %s %s', classoid, objoid, objsubid, md5(description)) FROM pg_description WHERE objoid >= 16384
	-- Where a table's column owns it, emptying the table restarts it.
	UNION ALL SELECT format('sequence %s %s', c.oid::regclass,
			CASE WHEN NOT EXISTS (SELECT FROM pg_depend d WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.deptype IN ('a', 'i'))
				THEN pg_sequence_last_value(c.oid) END)
		FROM pg_class c WHERE c.relkind = 'S'
) s(x)`

// migratedDigest sums up what must be as the migration left it: the
// schema and the rows of every table but the empty ones.
func migratedDigest(ctx context.Context, conn *pgx.Conn, empty []string) (string, error) {
	var schema string
	if err := conn.QueryRow(ctx, schemaSQL).Scan(&schema); err != nil {
		return "", fmt.Errorf("inspecting the schema: %w", err)
	}
	parts := []string{schema}
	all, err := tables(ctx, conn)
	if err != nil {
		return "", err
	}
	for _, table := range all {
		if slices.Contains(empty, table) {
			continue
		}
		var sum string
		if err := conn.QueryRow(ctx, "SELECT coalesce(md5(string_agg(t::text, E'\\n' ORDER BY t::text)), '') FROM "+table+" t").Scan(&sum); err != nil {
			return "", fmt.Errorf("inspecting %s: %w", table, err)
		}
		parts = append(parts, table+" "+sum)
	}
	return strings.Join(parts, "\n"), nil
}

// tables lists the tables outside the system's schemas.
func tables(ctx context.Context, conn *pgx.Conn) ([]string, error) {
	rows, err := conn.Query(ctx, `SELECT c.oid::regclass::text FROM pg_class c
		WHERE c.relkind IN ('r', 'p') AND c.relnamespace NOT IN ('pg_catalog'::regnamespace, 'information_schema'::regnamespace)
		ORDER BY 1`)
	if err != nil {
		return nil, fmt.Errorf("listing tables: %w", err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("listing tables: %w", err)
	}
	return names, nil
}
