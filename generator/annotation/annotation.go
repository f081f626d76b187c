// Package annotation reads idemgen's idempotency annotations from an
// OpenAPI 3 document and validates them, keeping the line and column of
// every value so that each problem points at the text the user must fix.
//
// The annotations are:
//
//	x-idempotency:              # document root, optional: defaults for every annotated operation
//	  ttl: 24h                  # how long a stored response is kept (default 24h)
//	  lease: 1m                 # how long an attempt holds the key (default 1m)
//	  required: true            # is the key required (default true)
//	  key: {header: Webhook-Id} # where the key is read from (default: the Idempotency-Key header)
//	  scope: {header: X-Account-Id}  # what keys are scoped by (default: nothing)
//	paths:
//	  /orders:
//	    post:
//	      x-idempotent: true    # or false (not annotated), or a mapping as below
//	      x-idempotency-ttl: 24h
//	  /payments:
//	    post:
//	      x-idempotent:
//	        required: false
//	        ttl: 7d
//	        lease: 30s
//	        mode: phased        # atomic (default), phased, or async (run on a River worker)
//	        recovery-points: [payment_created, charge_created]  # phased, or async with phases
//	        status: /exports/requests/{key}  # async only: the status resource's path
//	        abandoned: complete # phased only: complete or fail (default: left for a retry)
//	        complete-after: 30m # with abandoned (default 1h)
//	        fingerprint:
//	          exclude: [/metadata/trace_id, /note]
//	          # or include: [/id, /data, X-Account-Id]: only these count
//	        scope: {function: true}   # or {header: NAME}, both keys, or none
//	        key: [{header: X-Account-Id}, {body: /po_number}]  # or {query: NAME}; a list is a composite key
//
// An operation's scope replaces the document's as a whole: the two are not
// merged key by key.
//
// The document is walked as a yaml.v3 node tree instead of being loaded by
// an OpenAPI library, because only the node tree keeps positions; the rest
// of the spec is checked elsewhere. yaml.v3 reads JSON too, since JSON is
// nearly a subset of YAML. The few valid JSON documents yaml.v3 rejects (a
// "\/" escape, a key longer than 1024 characters, a key and its colon on
// different lines) are rebuilt from encoding/json tokens with the same
// positions.
//
// Only the operations of path items directly under paths are read.
// A path item that is a $ref is skipped: resolving references, possibly to
// other files, is the spec loader's job, so annotations inside a referenced
// path item are not seen here. Webhooks and callbacks are skipped as well:
// they describe requests the API sends, which idemgen does not guard.
//
// YAML anchors, aliases and merge keys (<<) are followed, so an annotation
// shared through an anchor reads as if it were written out in each place.
package annotation

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Modes of an annotated operation.
const (
	// ModeAtomic runs the handler as one unit: a retry after a crash
	// starts it again from the beginning.
	ModeAtomic = "atomic"
	// ModePhased lets the handler record recovery points, so a retry
	// after a crash resumes from the last one reached.
	ModePhased = "phased"
	// ModeAsync answers 202 Accepted once the key is claimed and runs the
	// handler later, on a River worker; the client polls the status
	// resource. It may have recovery points, as a phased handler does.
	ModeAsync = "async"
)

// What becomes of an attempt of a phased operation whose lease has passed
// and whose client has not come back for its CompleteAfter: the
// completer running inside the service drives it to the end.
const (
	// AbandonedComplete resumes the attempt at its recovery point with
	// the request as the handler first received it and stores the final
	// response, so the client's eventual retry replays it.
	AbandonedComplete = "complete"
	// AbandonedFail stores the terminal attempt-abandoned problem, as
	// idemgen sweep -fail does.
	AbandonedFail = "fail"
)

// Built-in defaults, used when neither the operation nor x-idempotency
// sets a value.
const (
	DefaultTTL   = 24 * time.Hour
	DefaultLease = time.Minute
	// DefaultCompleteAfter applies when abandoned is set without
	// complete-after.
	DefaultCompleteAfter = time.Hour
)

// MinCompleteAfter is the shortest complete-after.
const MinCompleteAfter = time.Second

// Position is a place in a spec file. Line and Column start at 1; Column
// counts characters, not bytes.
type Position struct {
	File         string
	Line, Column int
}

// String returns "file:line:col", the form editors and terminals link.
func (p Position) String() string {
	return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Column)
}

// Operation is one annotated operation.
type Operation struct {
	Path        string // as written in the spec, e.g. "/orders/{id}"
	Method      string // upper case, e.g. "POST"
	OperationID string // raw operationId from the spec, "" when absent
	Required    bool   // whether the key is required
	// Key is where the key is read from when that is not the
	// Idempotency-Key header; its zero value is that header.
	Key Key
	// RequiredAt is where required is written (the operation's or the
	// document's), nil when it is the built-in default.
	RequiredAt *Position
	TTL, Lease time.Duration
	// MaxBody bounds the operation's request bodies, in bytes; 0 leaves
	// the bound to the handler's options.
	MaxBody int64
	// Validate is whether requests are checked against the operation's
	// declared parameters and body before a key is claimed; true unless
	// validate: false is written.
	Validate       bool
	Mode           string   // ModeAtomic, ModePhased or ModeAsync
	ModePos        Position // where mode is written; zero when it is not
	RecoveryPoints []string // as written; see GoName for the Go names
	// Status is the path of an async operation's status resource, with
	// {key} where the key goes, and StatusPos where it is written; ""
	// for the other modes.
	Status             string
	StatusPos          Position
	FingerprintExclude []Pointer
	// FingerprintInclude, when set, lists what alone counts in the
	// fingerprint besides the operation's name: the other parameters and
	// body members do not. An operation has exclude or include, not both.
	FingerprintInclude []Pointer
	Scope              Scope
	Pos                Position // position of the x-idempotent key

	// Abandoned is what the completer does with an attempt of a phased
	// operation abandoned partway: AbandonedComplete, AbandonedFail, or
	// "" to leave it for a retry to take over and the sweeper to report.
	Abandoned string
	// AbandonedAt is where abandoned is written, nil when it is not.
	AbandonedAt *Position
	// CompleteAfter is how long after its lease ended, with no retry, an
	// attempt counts as abandoned; 0 when Abandoned is "".
	CompleteAfter time.Duration
}

// Scope says what an operation's keys are scoped by: a request header,
// the Go function idem.Options.Scope, both, or deliberately nothing.
// The zero value is a scope the spec does not set.
type Scope struct {
	// Set is true when the operation's x-idempotent or the document's
	// x-idempotency has a scope.
	Set bool
	// Default is true when the scope comes from x-idempotency.
	Default bool
	// None is scope: none: the keys are shared by all callers on purpose.
	None bool
	// Header is the header named by scope: {header: NAME}, as written.
	Header string
	// HeaderPos is where Header is written, for the checks against the
	// operation's parameters.
	HeaderPos Position
	// Function is scope: {function: true}: idem.Options.Scope must be set.
	Function bool
}

// Pointer is an entry of fingerprint.exclude or include and where it is
// written: a JSON pointer (RFC 6901) into the request body when it starts
// with "/", else the name of a parameter.
type Pointer struct {
	Value string
	Pos   Position
}

// Error is one problem in a spec, at a position. Msg says what is wrong
// and what was expected.
type Error struct {
	Pos Position
	Msg string
}

func (e *Error) Error() string { return e.Pos.String() + ": " + e.Msg }

// Read reads the annotated operations of the OpenAPI document src, YAML or
// JSON; file is used only in positions. Operations are sorted by Path,
// then Method.
//
// When anything is wrong, Read returns no operations and an error made by
// errors.Join of every *Error found, sorted by line and column, so that a
// user sees all problems at once. A document without annotations yields
// neither operations nor an error.
func Read(file string, src []byte) ([]Operation, error) {
	root, perr := parse(file, src)
	if perr != nil {
		return nil, errors.Join(perr)
	}
	r := newReader(file)
	ops := r.document(root)
	if err := r.err(); err != nil {
		return nil, err
	}
	slices.SortFunc(ops, func(a, b Operation) int {
		return cmp.Or(strings.Compare(a.Path, b.Path), strings.Compare(a.Method, b.Method))
	})
	return ops, nil
}

// Parse returns the YAML node tree of the OpenAPI document src, YAML or
// JSON, as Read reads it: for tools that rewrite the document while
// keeping everything else in it as it was.
func Parse(file string, src []byte) (*yaml.Node, error) {
	doc, err := parse(file, src)
	if err != nil {
		return nil, err
	}
	return doc, nil
}
