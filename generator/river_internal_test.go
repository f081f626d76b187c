package generator

import (
	"strings"
	"testing"
)

// River's migrations are read from the River module, named as River's
// files, in order, and rendered for the default schema.
func TestRiverMigrations(t *testing.T) {
	river, err := riverMigrations()
	if err != nil {
		t.Fatal(err)
	}
	if len(river) == 0 || river[0].file != "001_create_river_migration" || river[0].name() != "river_001_create_river_migration" {
		t.Fatalf("River's first migration: %+v", river[:min(1, len(river))])
	}
	for i, r := range river {
		if r.version != i+1 {
			t.Errorf("migration %d is River's version %d", i, r.version)
		}
		if r.up == "" || r.down == "" || strings.Contains(r.up+r.down, "TEMPLATE") {
			t.Errorf("%s: empty, or its schema template left in", r.file)
		}
	}
}

// SQL that the files could not carry, or that names a template other than
// the schema's, is refused rather than written.
func TestRiverSQLRefused(t *testing.T) {
	got, err := riverSQL(3, "  CREATE TABLE /* TEMPLATE: schema */river_x (id int);\n")
	if err != nil || got != "CREATE TABLE river_x (id int);" {
		t.Fatalf("riverSQL = %q, %v", got, err)
	}
	for _, sql := range []string{
		"SELECT * FROM river_job WHERE /* TEMPLATE_BEGIN: where */ true /* TEMPLATE_END */;",
		"DO $river$ BEGIN END $river$;",
		"SELECT '$idemgen$';",
		"-- +goose Down",
		"-- migrate:down",
		"---- create above / drop below ----",
		"SELECT '{{.x}}';",
	} {
		if _, err := riverSQL(9, sql); err == nil || !strings.Contains(err.Error(), "River's migration 009") {
			t.Errorf("riverSQL(%q) = %v, want an error naming the version", sql, err)
		}
	}
}

// The records written with River's SQL are River's migrator's: no line
// before version 5, none on the way down from version 1.
func TestRiverRecords(t *testing.T) {
	for _, tt := range []struct {
		version  int
		up, down string
	}{
		{1, "INSERT INTO river_migration (version) VALUES (1);", ""},
		{4, "INSERT INTO river_migration (version) VALUES (4);", "DELETE FROM river_migration WHERE version = 4;"},
		{5, "INSERT INTO river_migration (line, version) VALUES ('main', 5);", "DELETE FROM river_migration WHERE version = 5;"},
		{6, "INSERT INTO river_migration (line, version) VALUES ('main', 6);", "DELETE FROM river_migration WHERE line = 'main' AND version = 6;"},
	} {
		r := riverMigration{version: tt.version, file: "x", up: "SELECT 1;", down: "SELECT 2;"}
		up, down := riverBlock(r, true), riverBlock(r, false)
		if !strings.Contains(up, "\n\t"+tt.up+"\n") || strings.Contains(up, "DELETE") {
			t.Errorf("version %d up does not record %q:\n%s", tt.version, tt.up, up)
		}
		if tt.down == "" && (strings.Contains(down, "DELETE") || strings.Contains(down, "INSERT")) ||
			tt.down != "" && !strings.Contains(down, "\n\t"+tt.down+"\n") {
			t.Errorf("version %d down does not record %q:\n%s", tt.version, tt.down, down)
		}
	}
}
