package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// monitor reads PostgreSQL's counters over a connection of its own to the
// administrative database, so that its reads do not count in the run's.
type monitor struct {
	conn   *pgx.Conn
	dbName string
	// local is true when PostgreSQL runs on this machine, whose /proc
	// then shows its processes' CPU time.
	local bool
}

// pgSettings describe the server, for the report.
type pgSettings struct {
	Version           string `json:"version"`
	VersionNum        int    `json:"version_num"`
	Fsync             string `json:"fsync"`
	SynchronousCommit string `json:"synchronous_commit"`
	FullPageWrites    string `json:"full_page_writes"`
	WalSyncMethod     string `json:"wal_sync_method"`
	SharedBuffers     string `json:"shared_buffers"`
	MaxConnections    string `json:"max_connections"`
	// Throwaway is true when the run started its own cluster (pglocal),
	// which runs with fsync off.
	Throwaway bool `json:"throwaway_cluster"`
}

func (m *monitor) settings(ctx context.Context) (pgSettings, error) {
	var s pgSettings
	err := m.conn.QueryRow(ctx, `SELECT current_setting('server_version'), current_setting('server_version_num')::int,
		current_setting('fsync'), current_setting('synchronous_commit'), current_setting('full_page_writes'),
		current_setting('wal_sync_method'), current_setting('shared_buffers'), current_setting('max_connections')`).
		Scan(&s.Version, &s.VersionNum, &s.Fsync, &s.SynchronousCommit, &s.FullPageWrites, &s.WalSyncMethod, &s.SharedBuffers, &s.MaxConnections)
	if err != nil {
		return s, fmt.Errorf("read PostgreSQL's settings: %w", err)
	}
	if s.VersionNum < 130000 {
		return s, fmt.Errorf("PostgreSQL %s is too old: the benchmark reads pg_current_snapshot() and drops databases WITH (FORCE), PostgreSQL 13 and later", s.Version)
	}
	var pid int
	if err := m.conn.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err == nil {
		m.local = isPostgres(pid)
	}
	return s, nil
}

// createDatabase creates an empty database for the run.
func createDatabase(ctx context.Context, conn *pgx.Conn) (string, error) {
	var b [6]byte
	_, _ = rand.Read(b[:]) // never fails, per crypto/rand
	name := "idemgen_bench_" + hex.EncodeToString(b[:])
	// template0: empty even if template1 on a shared server is not.
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()+" TEMPLATE template0"); err != nil {
		return "", fmt.Errorf("create the run's database: %w", err)
	}
	return name, nil
}

func dropDatabase(ctx context.Context, conn *pgx.Conn, name string) error {
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("drop the run's database %s: %w", name, err)
	}
	return nil
}

// withDatabase returns admin, a URL or a keyword/value string, with its
// database replaced by name and, when poolConns > 0, pgxpool's pool size
// set.
func withDatabase(admin, name string, poolConns int) (string, error) {
	if strings.HasPrefix(admin, "postgres://") || strings.HasPrefix(admin, "postgresql://") {
		u, err := url.Parse(admin)
		if err != nil {
			return "", fmt.Errorf("parse the server's URL: %w", err)
		}
		u.Path, u.RawPath = "/"+name, ""
		if poolConns > 0 {
			q := u.Query()
			q.Set("pool_max_conns", strconv.Itoa(poolConns))
			u.RawQuery = q.Encode()
		}
		return u.String(), nil
	}
	// In keyword/value strings a later keyword overrides an earlier one.
	s := admin + " dbname=" + name
	if poolConns > 0 {
		s += " pool_max_conns=" + strconv.Itoa(poolConns)
	}
	return s, nil
}

// withParam returns connString, a URL or a keyword/value string, with
// the connection parameter key set to value (a word).
func withParam(connString, key, value string) (string, error) {
	if strings.HasPrefix(connString, "postgres://") || strings.HasPrefix(connString, "postgresql://") {
		u, err := url.Parse(connString)
		if err != nil {
			return "", err
		}
		q := u.Query()
		q.Set(key, value)
		u.RawQuery = q.Encode()
		return u.String(), nil
	}
	return connString + " " + key + "=" + value, nil
}

// xactCounts are pg_stat_database's counters.
type xactCounts struct {
	// Commits and Rollbacks are xact_commit and xact_rollback of the run's
	// database.
	Commits, Rollbacks int64
	// Rows are the rows inserted, updated and deleted in the run's
	// database.
	Rows int64
	// Others are the transactions of the other databases, but the
	// monitor's own: activity this run did not cause.
	Others int64
}

func (m *monitor) xact(ctx context.Context) (xactCounts, error) {
	var x xactCounts
	// Each statement outside a transaction reads fresh statistics:
	// stats_fetch_consistency caches them only within a transaction.
	err := m.conn.QueryRow(ctx, `SELECT
		coalesce(sum(xact_commit) FILTER (WHERE datname = $1), 0)::bigint,
		coalesce(sum(xact_rollback) FILTER (WHERE datname = $1), 0)::bigint,
		coalesce(sum(tup_inserted + tup_updated + tup_deleted) FILTER (WHERE datname = $1), 0)::bigint,
		coalesce(sum(xact_commit + xact_rollback) FILTER (WHERE datname <> $1 AND datname <> current_database()), 0)::bigint
		FROM pg_stat_database`, m.dbName).Scan(&x.Commits, &x.Rollbacks, &x.Rows, &x.Others)
	if err != nil {
		return x, fmt.Errorf("read pg_stat_database: %w", err)
	}
	return x, nil
}

// position is where the cluster's transaction IDs and WAL stand.
type position struct {
	// NextXID is the next transaction ID to be assigned: the difference of
	// two is the number of transactions that wrote in between.
	NextXID uint64
	// WAL is the WAL insert position in bytes: the difference of two is
	// the WAL written in between, flushed or not.
	WAL uint64
	// Databases identifies the set of databases: it changes when another
	// client creates or drops one, which writes much WAL.
	Databases string
}

func (m *monitor) position(ctx context.Context) (position, error) {
	var xid, lsn string
	var p position
	// Neither function assigns a transaction ID or writes WAL.
	err := m.conn.QueryRow(ctx, `SELECT pg_snapshot_xmax(pg_current_snapshot())::text, pg_current_wal_insert_lsn()::text,
		(SELECT count(*) || '/' || sum(oid::bigint) FROM pg_database)`).Scan(&xid, &lsn, &p.Databases)
	if err != nil {
		return position{}, fmt.Errorf("read the transaction ID and WAL positions: %w", err)
	}
	if p.NextXID, err = strconv.ParseUint(xid, 10, 64); err != nil {
		return p, fmt.Errorf("transaction ID %q: %w", xid, err)
	}
	p.WAL, err = parseLSN(lsn)
	return p, err
}

// parseLSN reads a WAL position such as 16/B374D848: two hex halves of a
// byte offset.
func parseLSN(s string) (uint64, error) {
	hi, lo, ok := strings.Cut(s, "/")
	h, err1 := strconv.ParseUint(hi, 16, 32)
	l, err2 := strconv.ParseUint(lo, 16, 32)
	if !ok || err1 != nil || err2 != nil {
		return 0, fmt.Errorf("WAL position %q is not of the form X/Y", s)
	}
	return h<<32 | l, nil
}

// pids returns the PostgreSQL processes that work for the run: the
// backends connected to its database and the server's own processes
// (WAL writer, checkpointer, ...), which have no database. It also counts
// the client connections to the run's database of application app (a
// server's, see appName).
func (m *monitor) pids(ctx context.Context, app string) (pids []int, clients int, err error) {
	rows, err := m.conn.Query(ctx, `SELECT pid, datname IS NOT NULL AND backend_type = 'client backend' AND application_name = $2
		FROM pg_stat_activity WHERE datname = $1 OR datname IS NULL`, m.dbName, app)
	if err != nil {
		return nil, 0, fmt.Errorf("read pg_stat_activity: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var pid int
		var client bool
		if err := rows.Scan(&pid, &client); err != nil {
			return nil, 0, err
		}
		pids = append(pids, pid)
		if client {
			clients++
		}
	}
	return pids, clients, rows.Err()
}
