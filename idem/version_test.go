package idem_test

import (
	"io/fs"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/schema"
)

// The changelog's newest section is the release the code says it is, and
// it names the newest key-store migration: a migration never lands
// without the changelog saying what an upgrade must do about it.
func TestChangelogNamesReleaseAndMigration(t *testing.T) {
	b, err := os.ReadFile("../CHANGELOG.md")
	if err != nil {
		t.Fatal(err)
	}
	changelog := string(b)
	sections := regexp.MustCompile(`(?m)^## \[(v[^\]]+)\]`).FindAllStringSubmatchIndex(changelog, -1)
	if len(sections) == 0 {
		t.Fatal("CHANGELOG.md has no release section (## [vX.Y.Z] - date)")
	}
	newest := changelog[sections[0][2]:sections[0][3]]
	if newest != idem.Release {
		t.Errorf("CHANGELOG.md's newest section is %s, idem.Release is %s: bump both together", newest, idem.Release)
	}
	end := len(changelog)
	if len(sections) > 1 {
		end = sections[1][0]
	}
	section := changelog[sections[0][0]:end]
	ups, err := fs.Glob(schema.FS, "*.up.sql")
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(ups)
	latest, _, _ := strings.Cut(ups[len(ups)-1], "_")
	if !strings.Contains(section, latest) {
		t.Errorf("CHANGELOG.md's %s section does not name migration %s, the newest: say what it does and what an upgrade must do", newest, latest)
	}
	upgrading, err := os.ReadFile("../docs/UPGRADING.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(upgrading), "| "+idem.Release+" |") {
		t.Errorf("docs/UPGRADING.md's table has no row ending at %s", idem.Release)
	}
}
