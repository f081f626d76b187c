package generator

import (
	"bytes"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"

	"github.com/idemgen/idemgen/queries"
	"github.com/idemgen/idemgen/schema"
)

// sqlFiles renders the migrations in the configured format and the sqlc
// query file.
func sqlFiles(cfg *Config) ([]File, error) {
	files, err := MigrationFiles(cfg.Migrations)
	if err != nil {
		return nil, err
	}
	qs, err := fs.Glob(queries.FS, "*.sql")
	if err != nil {
		return nil, err
	}
	slices.Sort(qs)
	for _, q := range qs {
		sql, err := readTrimmed(queries.FS, q)
		if err != nil {
			return nil, err
		}
		out, err := render("queries.sql.tmpl", map[string]string{"Name": q, "SQL": sql})
		if err != nil {
			return nil, err
		}
		files = append(files, File{filepath.Join(cfg.Queries.Dir, q), out})
	}
	return files, nil
}

// MigrationFiles renders the key store's migrations into m.Dir in
// m.Format (golang-migrate when empty).
func MigrationFiles(m Migrations) ([]File, error) {
	if m.Format != "" && m.Format != FormatGolangMigrate && m.Format != FormatGoose {
		return nil, fmt.Errorf("%w: migration format %q is unknown; expected %s or %s", ErrConfig, m.Format, FormatGolangMigrate, FormatGoose)
	}
	ups, err := fs.Glob(schema.FS, "*.up.sql")
	if err != nil {
		return nil, err
	}
	slices.Sort(ups)
	var files []File
	for _, up := range ups {
		name := strings.TrimSuffix(up, ".up.sql")
		upSQL, err := readTrimmed(schema.FS, up)
		if err != nil {
			return nil, err
		}
		downSQL, err := readTrimmed(schema.FS, name+".down.sql")
		if err != nil {
			return nil, err
		}
		if m.Format == FormatGoose {
			out, err := render("goose.sql.tmpl", map[string]string{"Name": name, "Up": upSQL, "Down": downSQL})
			if err != nil {
				return nil, err
			}
			files = append(files, File{filepath.Join(m.Dir, name+".sql"), out})
			continue
		}
		for _, f := range []struct{ file, sql string }{{up, upSQL}, {name + ".down.sql", downSQL}} {
			out, err := render("migration.sql.tmpl", map[string]string{"Name": f.file, "SQL": f.sql})
			if err != nil {
				return nil, err
			}
			files = append(files, File{filepath.Join(m.Dir, f.file), out})
		}
	}
	return files, nil
}

func readTrimmed(fsys fs.FS, name string) (string, error) {
	b, err := fs.ReadFile(fsys, name)
	if err != nil {
		return "", fmt.Errorf("embedded %s: %w", name, err)
	}
	return strings.TrimSpace(string(b)), nil
}

func render(name string, data any) ([]byte, error) {
	var buf bytes.Buffer
	if err := tmpl.ExecuteTemplate(&buf, name, data); err != nil {
		return nil, fmt.Errorf("render %s: %w", name, err)
	}
	return buf.Bytes(), nil
}
