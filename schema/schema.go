// Package schema holds the key-store migrations, numbered up/down files
// that the Postgres store applies and the generator copies into a user's
// migration directory.
package schema

import "embed"

// FS holds the migration files, NNNN_name.up.sql and NNNN_name.down.sql.
//
//go:embed *.sql
var FS embed.FS
