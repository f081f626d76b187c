// Package templates holds the text/template sources of every file kind
// idemgen emits, embedded so the generator is a single binary.
package templates

import "embed"

// FS holds the templates, one per emitted file kind.
//
//go:embed *.tmpl
var FS embed.FS
