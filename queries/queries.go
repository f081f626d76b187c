// Package queries holds the key store's sqlc queries, which sqlc compiles
// into the Postgres store and the generator copies next to a user's own
// queries.
package queries

import "embed"

// FS holds the query files.
//
//go:embed *.sql
var FS embed.FS
