package pgstore

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/pgstore/internal/dbsqlc"
)

// ReplayCache is where a store's replay filter keeps completed responses,
// in front of PostgreSQL: Redis, through the redisfilter package. Each
// call must return within a bound of its own (a slow cache is a failed
// one), and a failure costs only the cache's help, never an answer.
type ReplayCache interface {
	// Get returns the value stored under key; nil and no error when there
	// is none.
	Get(ctx context.Context, key string) ([]byte, error)
	// Add stores value under key for ttl unless key holds a value already.
	Add(ctx context.Context, key string, value []byte, ttl time.Duration) error
	// Set stores value under key for ttl, replacing what it holds.
	Set(ctx context.Context, key string, value []byte, ttl time.Duration) error
}

// The replay filter (Options.ReplayCache) answers replays of completed
// keys without PostgreSQL, and nothing else:
//
//   - An entry is written only from a completed row that PostgreSQL
//     returned to a lookup, with that row's fingerprint and response, for
//     no longer than the row's TTL has left, less a margin: it expires
//     before PostgreSQL would start the key's next generation. It also
//     carries that instant, counted from when the lookup was sent, and is
//     a miss after it, so that a write the cache took late (a process
//     paused between the read and the write) cannot outlive the row.
//   - It is found by the key's full identity (scope, operation, key) and
//     answers only a request with the same fingerprint: any other goes to
//     PostgreSQL, which decides the 422.
//   - It is signed with a key derived from the store's secret, which only
//     the database holds, and names its identity: an entry that was
//     altered, or written under another key, is a miss.
//   - Entries are kept under an epoch, which PostgreSQL moves on whenever
//     a completed row is removed before its TTL (ForgetKey, or a DELETE
//     by hand; migration 0011). A server reads entries only under the
//     epoch it knows, read again every filterTrust/2, and reads none while
//     what it knows is older than filterTrust; it writes them under the
//     epoch it knew when it sent the lookup that read the row. ForgetKey
//     holds the key for forgetHold after it commits, so that by then
//     every server that reads the filter knows the new epoch: no entry of
//     the key's forgotten use is read again, even one that Redis kept
//     through a restart from an older snapshot, a failover to a replica
//     that missed later writes, or any other loss of its recent writes.
//     Correctness never depends on Redis keeping a write.
//   - Forgetting a key also replaces its entry of the epochless kind that
//     the previous release reads with a tombstone, for as long as the
//     row's TTL had left, for that release's servers while both run.

// filterMargin is taken off the TTL an entry gets, so that it is gone
// before its row expires, with room for the clocks of the servers that
// share the cache to differ.
const filterMargin = time.Second

// filterTrust is how long a server reads the filter under an epoch it
// read: past it, replays go to PostgreSQL until it has read the epoch
// again, which it does every filterTrust/2.
const filterTrust = 2 * time.Second

// forgetHold is how long ForgetKey holds a key after forgetting it, with
// the replay filter on: longer than filterTrust, with room for the
// clocks of servers to run at different rates.
const forgetHold = filterTrust + time.Second

// The entries' formats: a tombstone, or a response after its MAC.
var (
	entryMagic     = []byte("idemgen-replay-3\n")
	tombstoneValue = []byte("idemgen-forgotten\n")
)

// filter is the store's replay filter, when it has a cache.
type filter struct {
	cache ReplayCache
	s     *Store

	mu  sync.Mutex             // held while the MAC key is read
	mac atomic.Pointer[[]byte] // the entries' MAC key, once read

	epoch   atomic.Pointer[epochRead] // the epoch last read
	reading sync.Mutex                // held while the epoch is read
}

// epochRead is an epoch the filter read, and when the read was sent.
type epochRead struct {
	epoch int64
	at    time.Time
}

// known returns the epoch last read and whether it is still trusted,
// starting a read of it when half its trust has passed; ok is false
// before any read.
func (f *filter) known() (epoch int64, trusted, ok bool) {
	e := f.epoch.Load()
	if e == nil || time.Since(e.at) >= filterTrust/2 {
		f.readEpoch()
	}
	if e == nil {
		return 0, false, false
	}
	return e.epoch, time.Since(e.at) < filterTrust, true
}

// readEpoch reads the epoch in the background, unless a read is under
// way: replays never wait on it.
func (f *filter) readEpoch() {
	if !f.reading.TryLock() {
		return
	}
	go func() {
		defer f.reading.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), filterTrust)
		defer cancel()
		f.read(ctx)
	}()
}

// read reads the epoch now; when it fails, replays go to PostgreSQL
// until a read succeeds.
func (f *filter) read(ctx context.Context) {
	sent := time.Now()
	var epoch int64
	err := f.s.read(ctx, func(q *dbsqlc.Queries) (err error) {
		epoch, err = q.GetFilterEpoch(ctx)
		return err
	})
	if err == nil {
		f.epoch.Store(&epochRead{epoch: epoch, at: sent})
	}
}

// stamp is what a lookup sent now records. A process's first lookup
// reads the epoch first, once, so that its row can fill the filter.
func (f *filter) stamp(ctx context.Context) filterStamp {
	if f.epoch.Load() == nil {
		f.reading.Lock()
		if f.epoch.Load() == nil {
			f.read(ctx)
		}
		f.reading.Unlock()
	}
	epoch, _, ok := f.known()
	return filterStamp{sent: time.Now(), epoch: epoch, ok: ok}
}

// filterStamp is what a lookup records for the replay filter when it is
// sent: when, and the epoch its server knew then.
type filterStamp struct {
	sent  time.Time
	epoch int64
	ok    bool
}

// FilteredReplay answers a replay of id from the replay cache, when the
// store has one (see Options.ReplayCache): it implements idem.ReplayFilter.
func (s *Store) FilteredReplay(ctx context.Context, id idem.ID, fingerprint []byte) (*idem.Response, idem.FilterResult) {
	if s.filter == nil {
		return nil, idem.FilterNone
	}
	return s.filter.replay(ctx, id, fingerprint)
}

var _ idem.ReplayFilter = (*Store)(nil)

func (f *filter) replay(ctx context.Context, id idem.ID, fingerprint []byte) (*idem.Response, idem.FilterResult) {
	mac, err := f.macKey(ctx)
	if err != nil {
		return nil, idem.FilterFailed
	}
	epoch, trusted, _ := f.known()
	if !trusted {
		return nil, idem.FilterMiss
	}
	value, err := f.cache.Get(ctx, entryKey(id, epoch))
	if err != nil {
		return nil, idem.FilterFailed
	}
	resp, ok := openEntry(mac, value, id, epoch, fingerprint, time.Now())
	if !ok {
		return nil, idem.FilterMiss
	}
	return resp, idem.FilterHit
}

// macKey returns the key that signs entries, derived from the store's
// secret, read once.
func (f *filter) macKey(ctx context.Context) ([]byte, error) {
	if mac := f.mac.Load(); mac != nil {
		return *mac, nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if mac := f.mac.Load(); mac != nil {
		return *mac, nil
	}
	secret, err := f.s.Secret(ctx)
	if err != nil {
		return nil, err
	}
	h := hmac.New(sha256.New, secret)
	h.Write([]byte("idemgen replay filter"))
	mac := h.Sum(nil)
	f.mac.Store(&mac)
	return mac, nil
}

// fill adds the completed row that a lookup read, as rec, to the cache,
// unless its TTL is nearly over. ttlLeft is what the row had left when
// PostgreSQL read it, after the lookup's stamp: the row expires no sooner
// than stamp.sent+ttlLeft by this server's clock, and no forget after the
// epoch the stamp knew has removed it. A cache that fails is left alone:
// the next replay reads PostgreSQL again.
func (f *filter) fill(ctx context.Context, id idem.ID, rec idem.Record, ttlLeft time.Duration, stamp filterStamp) {
	notAfter := stamp.sent.Add(ttlLeft - filterMargin)
	ttl := time.Until(notAfter)
	if !stamp.ok || ttl <= 0 || rec.Response == nil || rec.Expired {
		return
	}
	mac, err := f.macKey(ctx)
	if err != nil {
		return
	}
	value, err := sealEntry(mac, id, stamp.epoch, rec.Fingerprint, rec.Response, notAfter)
	if err != nil {
		return
	}
	_ = f.cache.Add(ctx, entryKey(id, stamp.epoch), value, ttl)
}

// ErrFilterForget is returned, wrapped, by ForgetKey when the replay
// filter could not forget the key: nothing was forgotten.
var ErrFilterForget = errors.New("pgstore: the replay filter's cache did not take the key's tombstone, so the key was not forgotten; run it again once the cache answers")

// forget puts a tombstone in place of id's entry for ttlLeft, the most
// its entry could still live.
func (f *filter) forget(ctx context.Context, id idem.ID, ttlLeft time.Duration) error {
	if ttlLeft <= 0 {
		return nil
	}
	if err := f.cache.Set(ctx, FilterKey(id), tombstoneValue, ttlLeft+filterMargin); err != nil {
		return fmt.Errorf("%w: %w", ErrFilterForget, err)
	}
	return nil
}

// dropTombstone is how long drop's tombstone lasts: longer than a replay
// that read the forgotten row could take to fill its entry, short enough
// that the key's next use soon replays from the filter again.
const dropTombstone = time.Minute

// drop replaces id's entry, if any, with a tombstone, for a key that has
// no row.
func (f *filter) drop(ctx context.Context, id idem.ID) error {
	if err := f.cache.Set(ctx, FilterKey(id), tombstoneValue, dropTombstone); err != nil {
		return fmt.Errorf("%w: %w", ErrFilterForget, err)
	}
	return nil
}

// FilterKey is where, after the cache's own prefix, the replay filter
// keeps id's entries: a hash of its identity, so that keys, which clients
// may treat as secrets, are not stored in clear. The entries' own keys
// add the epoch they were written under (FilterKey(id) + "." + epoch);
// FilterKey(id) itself holds the previous release's entry, or its
// tombstone.
func FilterKey(id idem.ID) string {
	sum := identityHash(id)
	return hex.EncodeToString(sum[:16])
}

// entryKey is the key of id's entry under epoch.
func entryKey(id idem.ID, epoch int64) string {
	return FilterKey(id) + "." + strconv.FormatInt(epoch, 10)
}

// identityHash hashes id's parts, each with its length.
func identityHash(id idem.ID) [sha256.Size]byte {
	h := sha256.New()
	for _, part := range []string{id.Scope, id.Operation, id.Key} {
		var n [4]byte
		binary.BigEndian.PutUint32(n[:], uint32(len(part)))
		h.Write(n[:])
		h.Write([]byte(part))
	}
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return sum
}

// sealEntry encodes a response for id and fingerprint, written under
// epoch and good until notAfter, signed with mac: the identity's hash,
// the epoch, notAfter in Unix milliseconds, the fingerprint, the status,
// the header and the body, each length-prefixed, after the MAC.
func sealEntry(mac []byte, id idem.ID, epoch int64, fingerprint []byte, r *idem.Response, notAfter time.Time) ([]byte, error) {
	identity := identityHash(id)
	payload := make([]byte, 0, 90+len(fingerprint)+len(r.Body)+64*len(r.Header))
	payload = append(payload, identity[:]...)
	payload = binary.AppendUvarint(payload, uint64(max(epoch, 0)))
	payload = binary.AppendUvarint(payload, uint64(max(notAfter.UnixMilli(), 0)))
	payload = appendBytes(payload, fingerprint)
	payload = binary.AppendUvarint(payload, uint64(r.Status))
	payload = binary.AppendUvarint(payload, uint64(len(r.Header)))
	// In order, so that one response always seals to the same entry.
	for _, name := range slices.Sorted(maps.Keys(r.Header)) {
		values := r.Header[name]
		payload = appendBytes(payload, []byte(name))
		payload = binary.AppendUvarint(payload, uint64(len(values)))
		for _, v := range values {
			payload = appendBytes(payload, []byte(v))
		}
	}
	payload = appendBytes(payload, r.Body)
	h := hmac.New(sha256.New, mac)
	h.Write(payload)
	out := make([]byte, 0, len(entryMagic)+sha256.Size+len(payload))
	out = append(out, entryMagic...)
	out = h.Sum(out)
	return append(out, payload...), nil
}

func appendBytes(b, v []byte) []byte {
	return append(binary.AppendUvarint(b, uint64(len(v))), v...)
}

// reader reads what sealEntry wrote; ok turns false at the first thing
// that is not there.
type reader struct {
	b  []byte
	ok bool
}

func (r *reader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.ok = false
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) bytes() []byte {
	n := r.uvarint()
	if !r.ok || n > uint64(len(r.b)) {
		r.ok = false
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

// openEntry returns the response in value when it is an entry signed
// with mac, for id and fingerprint, written under epoch and still good at
// now; anything else, a tombstone included, is not.
func openEntry(mac, value []byte, id idem.ID, epoch int64, fingerprint []byte, now time.Time) (*idem.Response, bool) {
	rest, ok := bytes.CutPrefix(value, entryMagic)
	if !ok || len(rest) < 2*sha256.Size {
		return nil, false
	}
	sum, payload := rest[:sha256.Size], rest[sha256.Size:]
	h := hmac.New(sha256.New, mac)
	h.Write(payload)
	if !hmac.Equal(h.Sum(nil), sum) {
		return nil, false
	}
	identity := identityHash(id)
	if !bytes.Equal(payload[:sha256.Size], identity[:]) {
		return nil, false
	}
	r := &reader{b: payload[sha256.Size:], ok: true}
	if written := r.uvarint(); !r.ok || written != uint64(max(epoch, 0)) {
		return nil, false
	}
	if notAfter := r.uvarint(); !r.ok || uint64(now.UnixMilli()) >= notAfter {
		return nil, false
	}
	if !bytes.Equal(r.bytes(), fingerprint) || !r.ok {
		return nil, false
	}
	resp := &idem.Response{Status: int(r.uvarint())}
	if n := r.uvarint(); r.ok && n > 0 && n <= uint64(len(r.b)) {
		resp.Header = make(http.Header, n)
		for range n {
			name := string(r.bytes())
			values := make([]string, 0, min(r.uvarint(), uint64(len(r.b))))
			for range cap(values) {
				values = append(values, string(r.bytes()))
			}
			resp.Header[name] = values
		}
	}
	resp.Body = r.bytes()
	if !r.ok || len(r.b) != 0 || resp.Status == 0 {
		return nil, false
	}
	return resp, true
}
