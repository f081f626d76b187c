package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/pgstore/internal/dbsqlc"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// ErrKeyNotFound reports that the key store has no such key.
var ErrKeyNotFound = errors.New("pgstore: no such key")

// ErrKeyHeld reports that a live attempt holds the key, so ForgetKey left
// it as it was.
var ErrKeyHeld = errors.New("pgstore: the key is held by a live attempt")

// KeyStatus is what a key's row holds.
type KeyStatus string

const (
	// StatusInFlight: an attempt holds the key, or held it and stopped
	// partway (its lease passed), for a retry to take over.
	StatusInFlight KeyStatus = "in_flight"
	// StatusCompleted: the row holds the response that retries replay.
	StatusCompleted KeyStatus = "completed"
	// StatusExpired: the row was emptied, by the reaper past its TTL or
	// by ForgetKey, and keeps only the key's generation: the key's next
	// use runs as new, in the next generation.
	StatusExpired KeyStatus = statusEmptied
)

const (
	defaultListLimit = 100
	// MaxListLimit bounds KeyFilter.Limit.
	MaxListLimit   = 1000
	defaultMaxBody = 64 << 10
)

// KeyFilter selects the keys ListKeys lists. The zero value lists the
// newest 100 keys of every scope, operation and status.
type KeyFilter struct {
	// Scope, when not nil, lists only the keys of that scope; "" is the
	// scope of operations that have none.
	Scope *string
	// Operation, when set, lists only the keys of that operation.
	Operation string
	// Status, when set, lists only the keys in that status.
	Status KeyStatus
	// Limit bounds how many keys are listed, newest first. Zero means 100;
	// more than MaxListLimit means MaxListLimit.
	Limit int
}

// KeyInfo is what the key store holds of a key, less its response.
type KeyInfo struct {
	Scope, Operation, Key string
	// Hash is idem.KeyHash of the key: what logs carry instead of it.
	Hash   string
	Status KeyStatus
	// Held reports that a live attempt holds the key: an in-flight row
	// whose lease has not passed, or an attempt holding the key's
	// advisory lock right now (an atomic attempt, or a running phase).
	Held bool
	// Generation counts the uses of the key (see idem.Record.Generation);
	// Attempt counts the claims of its row, takeovers included.
	Generation, Attempt int64
	// Derived reports that an attempt on the key derived a key, so that
	// its row is emptied rather than deleted when it expires or is
	// forgotten, keeping its generation.
	Derived bool
	// CreatedAt is when the key's current use was claimed; ExpiresAt,
	// when its TTL passes; LeaseEnds, when an in-flight attempt's lease
	// passes (zero when there is none).
	CreatedAt, ExpiresAt, LeaseEnds time.Time
	// RecoveryPoint is the last point a phased attempt committed.
	RecoveryPoint string
	// ResponseStatus is the stored response's status; 0 when there is
	// none.
	ResponseStatus int
	// Now is the database's clock when the key was read: the one clock
	// that leases and TTLs are counted by.
	Now time.Time
}

// Age is how long ago the key's current use was claimed, by the
// database's clock.
func (k KeyInfo) Age() time.Duration {
	if k.CreatedAt.IsZero() {
		return 0
	}
	return k.Now.Sub(k.CreatedAt)
}

// TTLLeft is how long the key's response is still kept; zero or less once
// its TTL has passed, when the key's next use runs as new.
func (k KeyInfo) TTLLeft() time.Duration {
	if k.ExpiresAt.IsZero() {
		return 0
	}
	return k.ExpiresAt.Sub(k.Now)
}

// LeaseLeft is how long an in-flight attempt's lease still runs; zero or
// less once it has passed, when a retry may take over.
func (k KeyInfo) LeaseLeft() time.Duration {
	if k.LeaseEnds.IsZero() {
		return 0
	}
	return k.LeaseEnds.Sub(k.Now)
}

// ShowOptions configure ShowKey; the zero value works.
type ShowOptions struct {
	// MaxBody bounds the bytes of the stored body returned. Zero means
	// 64 KiB; negative returns none (BodyLen still tells its length).
	MaxBody int
}

// KeyDetail is a key with its stored response.
type KeyDetail struct {
	KeyInfo
	// Header and Body are the stored response's; nil when there is none.
	Header http.Header
	Body   []byte
	// BodyLen is the stored body's whole length; Truncated reports that
	// Body is only its first ShowOptions.MaxBody bytes.
	BodyLen   int
	Truncated bool
}

// ForgetOptions configure ForgetKey; the zero value forgets only a key no
// live attempt holds.
type ForgetOptions struct {
	// Force forgets a key that a phased attempt holds: that attempt is
	// fenced off, and its later phases fail with idem.ErrLeaseLost (when
	// a phase is running, ForgetKey first waits for it to commit or roll
	// back, as long as ctx allows). What it already did stays done: the
	// phases it committed and its calls to others, such as a charge. The
	// key's next request runs as new, in the next generation, and does all
	// of it again; so does the fenced attempt's own request if its server
	// is still serving it. An atomic attempt that is running cannot be
	// fenced, Force or not: it commits its response or rolls back on its
	// own, within its lease.
	Force bool
	// Logger receives what was forgotten; nil uses the store's.
	Logger *slog.Logger
}

// ListKeys lists the keys that f selects, newest first. A running atomic
// attempt on a key without a row (its first use) has nothing to list: its
// row is written with its response.
func (s *Store) ListKeys(ctx context.Context, f KeyFilter) ([]KeyInfo, error) {
	limit := f.Limit
	switch {
	case limit < 0:
		return nil, fmt.Errorf("pgstore: list keys: negative Limit %d", limit)
	case limit == 0:
		limit = defaultListLimit
	case limit > MaxListLimit:
		limit = MaxListLimit
	}
	switch f.Status {
	case "", StatusInFlight, StatusCompleted, StatusExpired:
	default:
		return nil, fmt.Errorf("pgstore: list keys: unknown Status %q; want %s, %s or %s", f.Status, StatusInFlight, StatusCompleted, StatusExpired)
	}
	params := dbsqlc.ListKeysParams{Operation: f.Operation, Status: string(f.Status), MaxRows: int32(limit)}
	if f.Scope != nil {
		params.ByScope, params.Scope = true, *f.Scope
	}
	var keys []KeyInfo
	err := s.read(ctx, func(q *dbsqlc.Queries) error {
		rows, err := q.ListKeys(ctx, params)
		if err != nil || len(rows) == 0 {
			return err
		}
		ids := make([]int64, len(rows))
		for i, r := range rows {
			ids[i] = lockID(idem.ID{Scope: r.Scope, Operation: r.Operation, Key: r.Key})
		}
		held, err := locksHeld(ctx, q, ids)
		if err != nil {
			return err
		}
		keys = make([]KeyInfo, len(rows))
		for i, r := range rows {
			keys[i] = keyInfo(r, held[ids[i]])
		}
		return nil
	})
	if err != nil {
		return nil, classify("list keys", err)
	}
	attrs := []slog.Attr{slog.String("operation", f.Operation), slog.String("status", string(f.Status)),
		slog.Int("limit", limit), slog.Int("listed", len(keys))}
	if f.Scope != nil {
		attrs = append(attrs, slog.String("scope", *f.Scope))
	}
	s.log.LogAttrs(ctx, slog.LevelDebug, "idem: listed keys", attrs...)
	return keys, nil
}

// locksHeld reports which of the advisory locks ids an attempt holds.
func locksHeld(ctx context.Context, q *dbsqlc.Queries, ids []int64) (map[int64]bool, error) {
	held, err := q.KeyLocksHeld(ctx, ids)
	if err != nil {
		return nil, err
	}
	m := make(map[int64]bool, len(held))
	for _, id := range held {
		m[id] = true
	}
	return m, nil
}

// ShowKey reads one key with its stored response. A key that has no row
// but whose advisory lock an attempt holds (an atomic attempt running its
// first use) is shown in flight and held, without times. A key the store
// does not know returns an error matching ErrKeyNotFound.
func (s *Store) ShowKey(ctx context.Context, id idem.ID, opts ShowOptions) (KeyDetail, error) {
	maxBody := opts.MaxBody
	switch {
	case maxBody == 0:
		maxBody = defaultMaxBody
	case maxBody < 0:
		maxBody = 0
	}
	hash := idem.KeyHash(id)
	var row dbsqlc.ShowKeyRow
	var found, held bool
	err := s.read(ctx, func(q *dbsqlc.Queries) (err error) {
		row, err = q.ShowKey(ctx, dbsqlc.ShowKeyParams{Scope: id.Scope, Operation: id.Operation, Key: id.Key, MaxBody: int32(min(maxBody, 1<<30))})
		found = err == nil
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		locks, err := locksHeld(ctx, q, []int64{lockID(id)})
		held = locks[lockID(id)]
		return err
	})
	if err != nil {
		return KeyDetail{}, classify("show key "+hash, err)
	}
	s.log.LogAttrs(ctx, slog.LevelDebug, "idem: showed key",
		slog.String("operation", id.Operation),
		slog.String("scope", id.Scope),
		slog.String("key_hash", hash),
		slog.Bool("found", found))
	if !found {
		if held {
			return KeyDetail{KeyInfo: KeyInfo{Scope: id.Scope, Operation: id.Operation, Key: id.Key, Hash: hash, Status: StatusInFlight, Held: true}}, nil
		}
		return KeyDetail{}, fmt.Errorf("pgstore: show key %s: %w", hash, ErrKeyNotFound)
	}
	d := KeyDetail{
		KeyInfo: keyInfo(shownRow(row), held),
		BodyLen: int(row.BodyLen),
	}
	if row.ResponseStatus.Valid {
		d.Body = row.ResponseBody
		d.Truncated = len(row.ResponseBody) < d.BodyLen
		if err := json.Unmarshal(row.ResponseHeaders, &d.Header); err != nil {
			return KeyDetail{}, fmt.Errorf("pgstore: show key %s: stored response headers: %w", hash, err)
		}
	}
	return d, nil
}

// ForgetKey forgets a key so that the next request with it runs as new: a
// completed key, one past its TTL, or one in flight whose attempt stopped
// partway (its lease passed). It returns the key as it was. A key whose
// attempts derived keys (KeyInfo.Derived), or one in flight, keeps its
// row, emptied as the reaper empties an expired key: its next use counts
// the next generation, so derives keys never used before, and the attempt
// that held it can commit no further phase. Any other key's row is
// deleted. A key already expired is left as it is.
//
// A key that a live attempt holds is refused with an error matching
// ErrKeyHeld, and the key as read, unless opts.Force (see
// ForgetOptions.Force). The key's advisory lock is taken for the forget's
// transaction, so a claim cannot interleave with it. A lookup of the key
// at that very moment reads as held too: run it again. A key the store
// does not know returns an error matching ErrKeyNotFound; with a replay
// filter, its entry there, if any, is dropped all the same, so that a key
// forgotten through a store without the filter stops being replayed.
//
// With a replay filter, the key stays held (409) for a few seconds after
// it is forgotten (forgetHold), and ForgetKey returns then: by that time
// every server reading the filter has learnt that the key's entries are
// gone, whatever Redis kept or lost (see the filter's rules). The hold
// keeps one of the store's connections for those seconds: forget through
// a pool of its own (as idemgen keys forget does), not a serving pool of
// one. Forgotten through a store without the filter, a key's old answer
// may still be replayed from the filter for those few seconds.
func (s *Store) ForgetKey(ctx context.Context, id idem.ID, opts ForgetOptions) (KeyInfo, error) {
	if s.filter == nil {
		return s.forgetKey(ctx, s.db, s.q, id, opts)
	}
	db, q, release, err := s.session(ctx)
	if err != nil {
		return KeyInfo{}, classify("forget key "+idem.KeyHash(id)+": connect", err)
	}
	defer release()
	lock := lockID(id)
	held, err := q.HoldKey(ctx, lock)
	if err != nil {
		return KeyInfo{}, classify("forget key "+idem.KeyHash(id)+": hold", err)
	}
	k, err := s.forgetKey(ctx, db, q, id, opts)
	if held {
		// Also when the row was gone or emptied already: a forget without
		// the filter may have removed it a moment ago.
		if err == nil || errors.Is(err, ErrKeyNotFound) {
			select {
			case <-time.After(forgetHold):
			case <-ctx.Done():
			}
		}
		_ = q.UnholdKey(context.WithoutCancel(ctx), lock)
	}
	return k, err
}

// session returns a connection of the store's own, on which session
// locks outlive transactions, with its queries; release gives it back.
func (s *Store) session(ctx context.Context) (DB, *dbsqlc.Queries, func(), error) {
	if s.pool == nil {
		return s.db, s.q, func() {}, nil
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	return conn, dbsqlc.New(conn), conn.Release, nil
}

func (s *Store) forgetKey(ctx context.Context, db DB, q *dbsqlc.Queries, id idem.ID, opts ForgetOptions) (KeyInfo, error) {
	log := opts.Logger
	if log == nil {
		log = s.log
	}
	hash := idem.KeyHash(id)
	tx, err := db.Begin(ctx)
	if err != nil {
		return KeyInfo{}, classify("forget key "+hash+": begin", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	k, action, err := forget(ctx, q.WithTx(tx), id, opts.Force)
	switch {
	case err == nil && s.filter != nil && action == "none":
		// Emptied already, by a forget without the filter or by the
		// reaper: its entry, if any, was filled before, and its row no
		// longer says how long that entry may last. Drop it.
		err = s.filter.drop(ctx, id)
	case err == nil && s.filter != nil:
		// Before the commit, so that a replay that read the row before it
		// is forgotten cannot put its entry back, and a filter that fails
		// leaves the key as it was.
		err = s.filter.forget(ctx, id, k.ExpiresAt.Sub(k.Now))
	case errors.Is(err, ErrKeyNotFound) && s.filter != nil:
		// The row may have been forgotten by a store without the filter,
		// whose entry would go on replaying it: drop that entry.
		if ferr := s.filter.drop(ctx, id); ferr != nil {
			err = fmt.Errorf("%w; %w", err, ferr)
		}
	}
	if err == nil && action != "none" {
		err = commit(ctx, tx, "forget key "+hash)
	}
	attrs := []slog.Attr{
		slog.String("operation", id.Operation),
		slog.String("scope", id.Scope),
		slog.String("key_hash", hash),
		slog.String("status", string(k.Status)),
		slog.Int64("generation", k.Generation),
		slog.Bool("held", k.Held),
		slog.Bool("forced", opts.Force),
	}
	if err != nil {
		log.LogAttrs(ctx, slog.LevelDebug, "idem: key not forgotten", append(attrs, slog.String("error", err.Error()))...)
		return k, err
	}
	log.LogAttrs(ctx, slog.LevelInfo, "idem: forgot key", append(attrs, slog.String("action", action))...)
	return k, nil
}

// forget runs ForgetKey's statements in its transaction q and returns the
// key as it was and what was done to its row: "emptied", "deleted", or
// "none" when it had expired already.
func forget(ctx context.Context, q *dbsqlc.Queries, id idem.ID, force bool) (KeyInfo, string, error) {
	hash := idem.KeyHash(id)
	fail := func(k KeyInfo, err error) (KeyInfo, string, error) {
		if !errors.Is(err, ErrKeyHeld) && !errors.Is(err, ErrKeyNotFound) {
			err = classify("forget key "+hash, err)
		}
		return k, "", err
	}
	got, err := q.LockKeyToForget(ctx, lockID(id))
	if err != nil {
		return fail(KeyInfo{}, err)
	}
	noRow := KeyInfo{Scope: id.Scope, Operation: id.Operation, Key: id.Key, Hash: hash, Status: StatusInFlight, Held: true}
	if !got && !force {
		// Read without locking the row, which a running phase holds.
		row, err := q.ShowKey(ctx, dbsqlc.ShowKeyParams{Scope: id.Scope, Operation: id.Operation, Key: id.Key})
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return fail(noRow, held(hash, noRow))
		case err != nil:
			return fail(KeyInfo{}, err)
		}
		k := keyInfo(shownRow(row), true)
		return fail(k, held(hash, k))
	}
	row, err := q.KeyToForget(ctx, dbsqlc.KeyToForgetParams{Scope: id.Scope, Operation: id.Operation, Key: id.Key})
	switch {
	case errors.Is(err, pgx.ErrNoRows) && got:
		return fail(KeyInfo{}, fmt.Errorf("pgstore: forget key %s: %w", hash, ErrKeyNotFound))
	case errors.Is(err, pgx.ErrNoRows):
		return fail(noRow, held(hash, noRow))
	case err != nil:
		return fail(KeyInfo{}, err)
	}
	k := keyInfo(dbsqlc.ListKeysRow(row), !got)
	switch {
	case !got && k.Status != StatusInFlight:
		// An atomic attempt holds the key: it writes the key's row when it
		// commits, whatever the row holds now, so there is nothing to fence.
		return fail(k, held(hash, k))
	case k.Held && !force:
		return fail(k, held(hash, k))
	case k.Status == StatusExpired:
		return k, "none", nil
	}
	key := dbsqlc.EmptyKeyParams{Scope: id.Scope, Operation: id.Operation, Key: id.Key}
	// An in-flight row stays whatever its attempts derived: a new claim
	// would number its attempts from 1 again, and a fenced attempt's
	// phase could pass for one of them.
	if k.Derived || k.Status == StatusInFlight {
		if err := q.EmptyKey(ctx, key); err != nil {
			return fail(k, err)
		}
		return k, "emptied", nil
	}
	if err := q.DeleteKey(ctx, dbsqlc.DeleteKeyParams(key)); err != nil {
		return fail(k, err)
	}
	return k, "deleted", nil
}

// held is ForgetKey's error for a key k that a live attempt holds.
func held(hash string, k KeyInfo) error {
	if left := k.LeaseLeft(); left > 0 {
		return fmt.Errorf("pgstore: forget key %s: %w (lease ends in %v)", hash, ErrKeyHeld, left.Round(time.Second))
	}
	return fmt.Errorf("pgstore: forget key %s: %w", hash, ErrKeyHeld)
}

// keyInfo is what a row of the key table says of its key; held: its
// advisory lock is held.
func keyInfo(r dbsqlc.ListKeysRow, held bool) KeyInfo {
	k := KeyInfo{
		Scope: r.Scope, Operation: r.Operation, Key: r.Key,
		Hash:           idem.KeyHash(idem.ID{Scope: r.Scope, Operation: r.Operation, Key: r.Key}),
		Status:         KeyStatus(r.Status),
		Generation:     r.Generation,
		Attempt:        int64(r.Attempt),
		Derived:        r.Derived,
		CreatedAt:      timeOf(r.CreatedAt),
		ExpiresAt:      timeOf(r.ExpiresAt),
		RecoveryPoint:  r.RecoveryPoint,
		ResponseStatus: int(r.ResponseStatus.Int32),
		Now:            timeOf(r.Now),
	}
	if k.Status == StatusInFlight {
		k.LeaseEnds = timeOf(r.LockedUntil)
	}
	k.Held = held || (k.Status == StatusInFlight && k.LeaseLeft() > 0)
	return k
}

// shownRow is a ShowKey row less its response.
func shownRow(r dbsqlc.ShowKeyRow) dbsqlc.ListKeysRow {
	return dbsqlc.ListKeysRow{
		Scope: r.Scope, Operation: r.Operation, Key: r.Key, Status: r.Status,
		Generation: r.Generation, Attempt: r.Attempt, Derived: r.Derived, RecoveryPoint: r.RecoveryPoint,
		ResponseStatus: r.ResponseStatus, CreatedAt: r.CreatedAt, ExpiresAt: r.ExpiresAt,
		LockedUntil: r.LockedUntil, Now: r.Now,
	}
}

func timeOf(t pgtype.Timestamptz) time.Time {
	if !t.Valid {
		return time.Time{}
	}
	return t.Time
}
