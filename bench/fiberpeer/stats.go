package main

import (
	"context"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// dbStats counts the statements sent to PostgreSQL, in the JSON the
// orders-api's -db-stats serves, so that the bench reads both alike:
// statements by first keyword, commits, and statements outside a
// transaction, which commit on their own. Those of requests (contexts
// marked with requestMark) are counted apart from the others.
type dbStats struct {
	mu     sync.Mutex
	counts [2]dbCounts // requests, background
}

type dbCounts struct {
	Statements       map[string]int64 `json:"statements"`
	Commits          int64            `json:"commits"`
	Rollbacks        int64            `json:"rollbacks"`
	AutocommitWrites int64            `json:"autocommit_writes"`
	AutocommitReads  int64            `json:"autocommit_reads"`
	RoundTrips       int64            `json:"round_trips"`
}

func newDBStats() *dbStats {
	d := &dbStats{}
	for i := range d.counts {
		d.counts[i].Statements = map[string]int64{}
	}
	return d
}

func (d *dbStats) snapshot() map[string]dbCounts {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := map[string]dbCounts{}
	for i, name := range []string{"requests", "background"} {
		c := d.counts[i]
		c.Statements = make(map[string]int64, len(d.counts[i].Statements))
		for k, v := range d.counts[i].Statements {
			c.Statements[k] = v
		}
		out[name] = c
	}
	return out
}

func (d *dbStats) TraceQueryStart(ctx context.Context, conn *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	verb, writes := firstWord(data.SQL)
	d.mu.Lock()
	defer d.mu.Unlock()
	c := &d.counts[1]
	if ctx.Value(requestMark{}) != nil {
		c = &d.counts[0]
	}
	c.RoundTrips++
	c.Statements[verb]++
	switch {
	case verb == "commit":
		c.Commits++
	case verb == "rollback":
		c.Rollbacks++
	case conn.PgConn().TxStatus() != 'I' || verb == "begin":
		// Inside a transaction: it commits, or not, at COMMIT.
	case writes:
		c.AutocommitWrites++
	default:
		c.AutocommitReads++
	}
	return ctx
}

func (d *dbStats) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// firstWord is a statement's first keyword, and whether it writes.
func firstWord(sql string) (string, bool) {
	words := strings.FieldsFunc(sql, func(r rune) bool { return !unicode.IsLetter(r) && r != '_' })
	if len(words) == 0 {
		return "", false
	}
	first := strings.ToLower(words[0])
	switch first {
	case "insert", "update", "delete", "merge":
		return first, true
	}
	return first, false
}

// flushPGStats makes the pool's idle connections publish their
// pg_stat_database counts now (PostgreSQL 15 and later), as the
// orders-api's flush does.
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
