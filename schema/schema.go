// Package schema holds the key-store migrations, numbered up/down files
// that the Postgres store applies and the generator copies into a user's
// migration directory.
package schema

import (
	"embed"
	"strings"
)

// FS holds the migration files, NNNN_name.up.sql and NNNN_name.down.sql.
//
//go:embed *.sql
var FS embed.FS

// OutsideTransaction reports whether a migration file must run outside a
// transaction: it says "-- no-transaction" on a line of its own. Such a
// file holds one statement, such as a CREATE INDEX CONCURRENTLY, which
// cannot run in a transaction (nor in a string of several statements,
// which PostgreSQL runs as one).
func OutsideTransaction(sql string) bool {
	for line := range strings.Lines(sql) {
		if strings.TrimSpace(line) == "-- no-transaction" {
			return true
		}
	}
	return false
}
