package pgstore

import (
	"bytes"
	"net/http"
	"testing"

	"github.com/idemgen/idemgen/idem"
)

// An entry opens to the response it sealed, for its key and fingerprint
// only; any change to it, or a cut, is refused and never panics.
func FuzzOpenEntry(f *testing.F) {
	mac := []byte("0123456789abcdef0123456789abcdef")
	id := idem.ID{Scope: "acme", Operation: "createOrder", Key: "k1"}
	resp := &idem.Response{Status: 201, Header: http.Header{"Content-Type": {"application/json"}, "Vary": {"A", "B"}}, Body: []byte(`{"id":1}`)}
	sealed, err := sealEntry(mac, id, []byte("fp"), resp)
	if err != nil {
		f.Fatal(err)
	}
	got, ok := openEntry(mac, sealed, id, []byte("fp"))
	if !ok || got.Status != 201 || !bytes.Equal(got.Body, resp.Body) || got.Header.Get("Content-Type") != "application/json" || len(got.Header["Vary"]) != 2 {
		f.Fatalf("round trip: %+v, %v", got, ok)
	}
	for _, other := range []struct {
		id idem.ID
		fp string
	}{{idem.ID{Scope: "other", Operation: "createOrder", Key: "k1"}, "fp"}, {id, "fp2"}} {
		if _, ok := openEntry(mac, sealed, other.id, []byte(other.fp)); ok {
			f.Fatalf("the entry opened for %v %q", other.id, other.fp)
		}
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
		if _, ok := openEntry(mac, changed, id, []byte("fp")); ok && !bytes.Equal(changed, sealed) {
			t.Fatalf("a changed entry opened: byte %d", at)
		}
		_, _ = openEntry(mac, value[:at], id, []byte("fp"))
	})
}
