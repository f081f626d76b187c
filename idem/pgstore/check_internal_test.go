package pgstore

import (
	"errors"
	"strings"
	"testing"
)

// An older server is refused at start with a message naming the version
// it has and the one it needs, rather than failing every new key later.
func TestServerVersionChecked(t *testing.T) {
	for _, tc := range []struct {
		num int
		ok  bool
	}{{130011, false}, {90624, false}, {140000, true}, {150020, true}, {180001, true}} {
		err := checkVersion(tc.num)
		if tc.ok != (err == nil) {
			t.Errorf("checkVersion(%d) = %v, want ok: %v", tc.num, err, tc.ok)
		}
		if err != nil && (!errors.Is(err, ErrServerVersion) || !strings.Contains(err.Error(), "PostgreSQL 13.11") && tc.num == 130011) {
			t.Errorf("checkVersion(%d) = %v, want ErrServerVersion naming the server's version", tc.num, err)
		}
	}
}
