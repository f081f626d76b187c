package pgstore

import (
	"bytes"
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/idemgen/idemgen/idem"
)

// An entry opens to the response it sealed, for its key and fingerprint
// only; any change to it, or a cut, is refused and never panics.
func FuzzOpenEntry(f *testing.F) {
	mac := []byte("0123456789abcdef0123456789abcdef")
	id := idem.ID{Scope: "acme", Operation: "createOrder", Key: "k1"}
	resp := &idem.Response{Status: 201, Header: http.Header{"Content-Type": {"application/json"}, "Vary": {"A", "B"}}, Body: []byte(`{"id":1}`)}
	// Fixed instants: every fuzzing process must seal the same entry.
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	sealed, err := sealEntry(mac, id, 7, []byte("fp"), resp, now.Add(time.Hour))
	if err != nil {
		f.Fatal(err)
	}
	for range 10 {
		again, err := sealEntry(mac, id, 7, []byte("fp"), resp, now.Add(time.Hour))
		if err != nil || !bytes.Equal(again, sealed) {
			f.Fatalf("one response sealed to two entries: %v", err)
		}
	}
	got, ok := openEntry(mac, sealed, id, 7, []byte("fp"), now)
	if !ok || got.Status != 201 || !bytes.Equal(got.Body, resp.Body) || got.Header.Get("Content-Type") != "application/json" || len(got.Header["Vary"]) != 2 {
		f.Fatalf("round trip: %+v, %v", got, ok)
	}
	for _, other := range []struct {
		id idem.ID
		fp string
	}{{idem.ID{Scope: "other", Operation: "createOrder", Key: "k1"}, "fp"}, {id, "fp2"}} {
		if _, ok := openEntry(mac, sealed, other.id, 7, []byte(other.fp), now); ok {
			f.Fatalf("the entry opened for %v %q", other.id, other.fp)
		}
	}
	if _, ok := openEntry(mac, sealed, id, 8, []byte("fp"), now); ok {
		f.Fatal("the entry opened under another epoch than its own")
	}
	f.Add(sealed, 0, byte(0))
	f.Add(sealed, len(sealed)-1, byte('x'))
	f.Add(sealed, len(entryMagic)+40, byte(1))
	f.Add(tombstoneValue, 0, byte(0))
	f.Fuzz(func(t *testing.T, value []byte, at int, b byte) {
		if len(value) == 0 {
			return
		}
		changed := bytes.Clone(value)
		at = (at%len(changed) + len(changed)) % len(changed)
		changed[at] ^= b | 1
		if _, ok := openEntry(mac, changed, id, 7, []byte("fp"), now); ok && !bytes.Equal(changed, sealed) {
			t.Fatalf("a changed entry opened: byte %d", at)
		}
		_, _ = openEntry(mac, value[:at], id, 7, []byte("fp"), now)
	})
}

// An entry answers until the instant it carries and not from then on,
// whatever TTL the cache gave it.
func TestEntryNotAfter(t *testing.T) {
	mac := []byte("0123456789abcdef0123456789abcdef")
	id := idem.ID{Scope: "acme", Operation: "createOrder", Key: "k1"}
	resp := &idem.Response{Status: 201, Body: []byte(`{"id":1}`)}
	notAfter := time.Now().Add(time.Minute)
	sealed, err := sealEntry(mac, id, 7, []byte("fp"), resp, notAfter)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := openEntry(mac, sealed, id, 7, []byte("fp"), notAfter.Add(-time.Millisecond)); !ok {
		t.Error("the entry did not open before its instant")
	}
	for _, at := range []time.Time{notAfter, notAfter.Add(time.Millisecond), notAfter.Add(time.Hour)} {
		if _, ok := openEntry(mac, sealed, id, 7, []byte("fp"), at); ok {
			t.Errorf("the entry opened %v after its instant", at.Sub(notAfter))
		}
	}
}

// recordingCache is a ReplayCache in memory that keeps what was added,
// with its TTL.
type recordingCache struct {
	values map[string][]byte
	ttls   map[string]time.Duration
}

func (c *recordingCache) Get(_ context.Context, key string) ([]byte, error) {
	return c.values[key], nil
}

func (c *recordingCache) Add(_ context.Context, key string, value []byte, ttl time.Duration) error {
	if _, ok := c.values[key]; !ok {
		c.values[key], c.ttls[key] = value, ttl
	}
	return nil
}

func (c *recordingCache) Set(_ context.Context, key string, value []byte, ttl time.Duration) error {
	c.values[key], c.ttls[key] = value, ttl
	return nil
}

// A fill counts the row's TTL from when its lookup was sent: a lookup
// whose answer came too late to leave time adds nothing, and an entry
// added carries the row's expiry, less the margin, so that it stops
// answering then even if the cache kept it longer.
func TestFillCountsFromTheLookupsSend(t *testing.T) {
	mac := []byte("0123456789abcdef0123456789abcdef")
	cache := &recordingCache{values: map[string][]byte{}, ttls: map[string]time.Duration{}}
	f := &filter{cache: cache}
	f.mac.Store(&mac)
	ctx := context.Background()
	rec := idem.Record{Found: true, Completed: true, Fingerprint: []byte("fp"), Response: &idem.Response{Status: 201, Body: []byte("{}")}}

	late := idem.ID{Scope: "acme", Operation: "createOrder", Key: "late"}
	f.fill(ctx, late, rec, 10*time.Second, filterStamp{sent: time.Now().Add(-10*time.Second + filterMargin/2), epoch: 7, ok: true})
	if _, ok := cache.values[entryKey(late, 7)]; ok {
		t.Fatal("a lookup sent longer ago than its row's TTL less the margin filled the cache")
	}

	id := idem.ID{Scope: "acme", Operation: "createOrder", Key: "k1"}
	before := time.Now()
	sent := before.Add(-30 * time.Second)
	f.fill(ctx, id, rec, time.Hour, filterStamp{sent: sent, epoch: 7, ok: true})
	value, ok := cache.values[entryKey(id, 7)]
	if !ok {
		t.Fatal("a completed row with an hour left did not fill the cache")
	}
	expires := sent.Add(time.Hour - filterMargin)
	if ttl := cache.ttls[entryKey(id, 7)]; ttl > expires.Sub(before) || ttl < expires.Sub(before)-time.Minute {
		t.Errorf("the cache's TTL is %v, where the row's expiry less the margin was %v away", ttl, expires.Sub(before))
	}
	if _, ok := openEntry(mac, value, id, 7, []byte("fp"), time.Now()); !ok {
		t.Error("the entry does not answer while the row is within its TTL")
	}
	if _, ok := openEntry(mac, value, id, 7, []byte("fp"), expires); ok {
		t.Error("the entry answers at the row's expiry less the margin")
	}
}
