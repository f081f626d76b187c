package pgstore

import "testing"

// firstRelease is the newest migration of v0.1.0, the first release that
// reads compatible-from lines; every migration after it must declare one.
const firstRelease = 8

// Every migration after the first release says which older code may
// serve it (schema/README.md's rule), naming a migration before it, and
// every migration has a down file.
func TestMigrationsDeclareCompatibility(t *testing.T) {
	all, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range all {
		if m.version != i+1 {
			t.Errorf("migration %s is numbered %d, want %d: numbers have no gaps", m.name, m.version, i+1)
		}
		if m.down == "" {
			t.Errorf("migration %s has an empty down file", m.name)
		}
		if m.version <= firstRelease {
			continue
		}
		if m.compatibleFrom == 0 {
			t.Errorf("migration %s has no -- compatible-from: line; say which release's code may serve it (schema/README.md)", m.name)
		} else if m.compatibleFrom >= m.version {
			t.Errorf("migration %s is compatible from %d, not a migration before it", m.name, m.compatibleFrom)
		}
	}
}
