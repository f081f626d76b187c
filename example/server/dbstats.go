package server

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// dbStats is the pgx tracer of Config.DBStats. It counts statements by
// their first SQL keyword, and commits: COMMIT statements, plus statements
// sent outside a transaction that write, since PostgreSQL commits each of
// those on its own. Statements made while serving a request are counted
// apart from the others (migrations, the janitor), so that the benchmark
// can divide them by the requests it sent.
type dbStats struct {
	mu     sync.Mutex
	counts [2]dbCounts // [0]: requests, [1]: background
	verbs  map[string]sqlVerb
}

type dbCounts struct {
	// Statements counts statements by first keyword: begin, select, ...
	Statements map[string]int64 `json:"statements"`
	// Commits counts COMMIT statements.
	Commits int64 `json:"commits"`
	// Rollbacks counts ROLLBACK statements.
	Rollbacks int64 `json:"rollbacks"`
	// AutocommitWrites counts statements outside a transaction that
	// insert, update, delete or merge (or lock rows FOR UPDATE): each
	// commits a write.
	AutocommitWrites int64 `json:"autocommit_writes"`
	// AutocommitReads counts the other statements outside a transaction:
	// each is a transaction of its own that writes nothing.
	AutocommitReads int64 `json:"autocommit_reads"`
	// RoundTrips counts the messages that wait for an answer: a query,
	// several statements in one simple-protocol message, or a batch.
	RoundTrips int64 `json:"round_trips"`
}

type sqlVerb struct {
	first  string
	writes bool
}

type requestMark struct{}

func newDBStats() *dbStats {
	d := &dbStats{verbs: map[string]sqlVerb{}}
	for i := range d.counts {
		d.counts[i].Statements = map[string]int64{}
	}
	return d
}

// mount serves the counts beside srv's handler, and marks the contexts of
// srv's requests so that their statements can be told from the others.
func (d *dbStats) mount(srv *http.Server, pool *pgxpool.Pool) {
	api := srv.Handler
	srv.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodGet && r.URL.Path == "/debug/db-stats":
			d.serve(w)
		case r.Method == http.MethodPost && r.URL.Path == "/debug/db-stats/flush":
			if err := flushPGStats(pool); err != nil {
				http.Error(w, err.Error(), http.StatusServiceUnavailable)
				return
			}
			d.serve(w)
		default:
			api.ServeHTTP(w, r)
		}
	})
	srv.BaseContext = func(net.Listener) context.Context {
		return context.WithValue(context.Background(), requestMark{}, true)
	}
}

// flushPGStats makes each idle connection of pool publish the statistics
// PostgreSQL (15 and later) holds back for up to 10 s after a busy second,
// so that pg_stat_database is exact at once. Its context is not the
// request's, so that the tracer counts these statements as background.
func flushPGStats(pool *pgxpool.Pool) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var first error
	for _, c := range pool.AcquireAllIdle(ctx) {
		if _, err := c.Exec(ctx, `SELECT pg_stat_force_next_flush()`); err != nil && first == nil {
			first = err
		}
		c.Release()
	}
	return first
}

func (d *dbStats) serve(w http.ResponseWriter) {
	d.mu.Lock()
	body, err := json.Marshal(map[string]dbCounts{"requests": d.counts[0], "background": d.counts[1]})
	d.mu.Unlock()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(body)
}

func (d *dbStats) TraceQueryStart(ctx context.Context, conn *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	d.count(ctx, conn, data.SQL)
	return ctx
}

// TraceBatchStart counts a batch, one round trip, and its statements.
func (d *dbStats) TraceBatchStart(ctx context.Context, conn *pgx.Conn, data pgx.TraceBatchStartData) context.Context {
	var sqls []string
	for _, q := range data.Batch.QueuedQueries {
		sqls = append(sqls, q.SQL)
	}
	d.count(ctx, conn, sqls...)
	return ctx
}

func (d *dbStats) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (d *dbStats) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// count counts one round trip that sends sqls.
func (d *dbStats) count(ctx context.Context, conn *pgx.Conn, sqls ...string) {
	// 'I': no transaction is open, so a statement is one of its own.
	autocommit := conn.PgConn().TxStatus() == 'I'
	background := ctx.Value(requestMark{}) == nil
	d.mu.Lock()
	defer d.mu.Unlock()
	c := &d.counts[0]
	if background {
		c = &d.counts[1]
	}
	c.RoundTrips++
	for _, sql := range sqls {
		for _, v := range d.parse(sql) {
			c.Statements[v.first]++
			switch {
			case v.first == "commit":
				c.Commits++
				autocommit = true
			case v.first == "rollback":
				c.Rollbacks++
				autocommit = true
			case v.first == "begin":
				autocommit = false
			case !autocommit:
				// Inside a transaction: it commits, or not, at COMMIT.
			case v.writes:
				c.AutocommitWrites++
			default:
				c.AutocommitReads++
			}
		}
	}
}

// parse returns the verbs of the statements in sql. A message of several
// statements (BEGIN with a claim, its values written into it) is parsed
// each time; others are cached.
func (d *dbStats) parse(sql string) []sqlVerb {
	if !strings.Contains(sql, ";\n") {
		v, ok := d.verbs[sql]
		if !ok {
			v = parseVerb(sql)
			d.verbs[sql] = v
		}
		return []sqlVerb{v}
	}
	var out []sqlVerb
	for _, st := range strings.Split(sql, ";\n") {
		if v := parseVerb(st); v.first != "" {
			out = append(out, v)
		}
	}
	return out
}

func (d *dbStats) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// parseVerb finds a statement's first keyword, past comment lines such as
// sqlc's "-- name:", and whether any of its words is one that writes.
func parseVerb(sql string) sqlVerb {
	var v sqlVerb
	for line := range strings.Lines(sql) {
		line, _, _ = strings.Cut(line, "--")
		for _, w := range strings.FieldsFunc(line, func(r rune) bool { return !unicode.IsLetter(r) && r != '_' }) {
			w = strings.ToLower(w)
			if v.first == "" {
				v.first = w
			}
			switch w {
			case "insert", "update", "delete", "merge":
				// UPDATE also covers SELECT ... FOR UPDATE, which writes
				// row locks.
				v.writes = true
			}
		}
	}
	return v
}
