package history

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/idemgen/idemgen/idem"
)

// A 503 store outage is refused where the store answered within the
// engine's bound on ending an attempt, and allowed for a request that the
// machine stalled for that long, or whose connection the checker killed.
func TestCheckStoreOutages(t *testing.T) {
	start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name      string
		took      time.Duration
		behaviour behaviour
		refused   bool
	}{
		{"fast", 50 * time.Millisecond, succeed, true},
		{"just under the bound", time.Second - time.Millisecond, succeed, true},
		{"stalled past the bound", 1400 * time.Millisecond, succeed, false},
		{"killed", 50 * time.Millisecond, kill, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hist := New(Config{Lease: 500 * time.Millisecond}) // the bound is a second even so
			hist.requests = []*request{{
				id:        idem.ID{Scope: "s1", Operation: "createOrder", Key: "k1"},
				behaviour: tc.behaviour,
				start:     start,
				end:       start.Add(tc.took),
				status:    http.StatusServiceUnavailable,
				problem:   "store-unavailable",
				body:      []byte(`{"detail":"may have run"}`),
			}}
			refused := false
			for _, msg := range hist.Check() {
				if strings.Contains(msg, "a store outage, though the store was reachable") {
					refused = true
				} else {
					t.Errorf("unexpected: %s", msg)
				}
			}
			if refused != tc.refused {
				t.Errorf("refused %v, want %v", refused, tc.refused)
			}
		})
	}
}
