package generator

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/idemgen/idemgen/generator/annotation"
	"github.com/oapi-codegen/oapi-codegen/v2/pkg/codegen"
)

// model is what idempotency.go.tmpl renders.
type model struct {
	Spec       string // the spec's path relative to the output directory
	Package    string
	Idempotent bool   // whether any operation is annotated
	Phased     bool   // whether any operation runs in phases
	Async      bool   // whether any operation is annotated with mode: async
	Client     bool   // whether to write IdempotentClient
	Server     string // the server kind: std-http, chi, echo, gin
	Operations []operation
	// Tests asks for the conformance helpers, in package KitPackage; Import
	// is the generated package's import path, which they import.
	Tests      bool
	KitPackage string
	Import     string
	// Fingerprints are the fingerprint writers, as canonicalGen prints
	// them from oapi-codegen's types.
	Fingerprints string
	// Contract is the comment that records how the annotated operations'
	// keys are scoped and fingerprinted (see contract.go); contracts
	// holds what it records, one per annotated operation, in order.
	Contract  string
	contracts []opContract
	// ScopePanic is the message NewIdempotentStrictServer panics with
	// when an operation's spec says idem.Options.Scope scopes its keys
	// and it is nil; "" when no operation says so.
	ScopePanic string
	// Warnings are for Result.Warnings.
	Warnings []string
	// ErrorShape is the API's own error shape, from the config; nil
	// answers with problem+json.
	ErrorShape *Errors
	// RequestSchemas is the document, JSON, that the gates check
	// requests against; nil when no operation validates.
	RequestSchemas []byte
}

// operation is one operation of the spec, as the layer sees it.
type operation struct {
	GoName     string // oapi-codegen's name: CreateOrder
	Name       string // the key namespace: the spec's operationId
	Method     string
	Path       string
	Field      string // the adapter's field for its idem.Operation
	Answer     string // the type of the responses the protocol produces
	Idempotent bool

	KeyOptional bool
	// KeyFrom are where the key is read from when that is not the
	// Idempotency-Key header (see keyplacement.go), and KeyReader the
	// function that reads them from the typed request; none for the
	// header.
	KeyFrom   []keySource
	KeyReader string
	// KeyDoc says where the key is read from, for the interface's
	// comment; "" for the Idempotency-Key header.
	KeyDoc string
	// The limits of an Idempotency-Key parameter the operation declares
	// itself; zero values when it declares none.
	KeyDeclared          bool
	KeyMinLen, KeyMaxLen int
	KeyPattern           string
	TTL, Lease           time.Duration
	MaxBody              int64 // the annotation's max-body; 0 for the handler's option
	// Validate is whether the gate checks requests against the spec
	// (see requestschemas.go).
	Validate bool
	// ScopeHeader is the header parameter that scopes keys, as the spec
	// spells it; "" when there is none.
	ScopeHeader string
	// ScopeDoc describes the scope for the interface's comment; "" when
	// the spec sets none.
	ScopeDoc string
	// Fingerprint is what the operation's fingerprint is made of, and
	// FingerprintWriter the name of its writer (see canonical.go).
	Fingerprint       fingerprintSource
	FingerprintWriter string
	// Multipart is the request field holding a multipart body, read
	// before the fingerprint; "" when there is none.
	Multipart string
	// Accept are the media types of the operation's request bodies, as the
	// spec spells them and the strict handler tells them apart, and
	// AcceptJSON those of them that are JSON: decoded as they arrive and
	// fingerprinted from the decoded value, with no buffer of the raw body.
	Accept, AcceptJSON []string
	// Route is the operation's path as oapi-codegen registers it on the
	// server kind's router, after the BaseURL: /orders/:id on echo and
	// gin, /orders/{id} on chi and std-http.
	Route string

	// Example is the request the conformance helpers send by default,
	// built from the spec's examples.
	Example kitExample

	// ClientMethods are the client methods IdempotentClient wraps, when
	// the config asks for the client.
	ClientMethods []clientMethod

	// Points are the recovery points of a phased operation, in order;
	// nil for an atomic one.
	Points []recoveryPoint

	// Async is set on an operation annotated with mode: async, whose
	// status resource is at StatusPath and is served by the operation
	// StatusGoName, which the layer adds to the spec.
	Async        bool
	StatusPath   string
	StatusGoName string
	// StatusOf, on that status operation, is the field of the async
	// operation it reports on: the generated code serves it itself.
	StatusOf string

	// Abandoned is what the completer does with an attempt of a phased
	// operation whose lease has passed and whose client has not come back
	// for CompleteAfter: "complete" resumes it at its recovery point and
	// stores the final response, "fail" stores the attempt-abandoned
	// problem; "" leaves it for a retry and the sweeper.
	Abandoned string
	// CompleteAfter is zero when Abandoned is "".
	CompleteAfter time.Duration

	pos annotation.Position         // the x-idempotent key, for errors
	def codegen.OperationDefinition // oapi-codegen's, for the request schemas

	// What the operation's contract records besides the fields above
	// (see contract.go): whether idem.Options.Scope scopes its keys, the
	// parameters fingerprint.exclude leaves out (or include does not
	// list), as location and name, exclude's JSON pointers into the body
	// and include's entries, as written.
	scopeFunction   bool
	excludedParams  [][2]string
	excludePointers []string
	include         []string
	// includeBody are include's JSON pointers with their positions, for
	// the fingerprint writers' check that they can pick them.
	includeBody []annotation.Pointer
}

// recoveryPoint is one recovery point of a phased operation.
type recoveryPoint struct {
	Name  string // as written in the spec: payment_created
	Const string // its constant: CreatePaymentPaymentCreated
	Phase string // the method of the phase after it: CreatePaymentAfterPaymentCreated
}

// routePath is path as oapi-codegen registers it on the router of the
// server kind: its own conversion, so that the two never differ.
func routePath(server, path string) string {
	switch server {
	case "echo":
		return codegen.SwaggerUriToEchoUri(path)
	case "gin":
		return codegen.SwaggerUriToGinUri(path)
	case "chi":
		return codegen.SwaggerUriToChiUri(path)
	}
	return codegen.SwaggerUriToStdHttpUri(path)
}

// Phased reports whether the operation runs in phases.
func (op operation) Phased() bool { return len(op.Points) > 0 }

// The names of a phased operation's declarations; see idempotency.go.tmpl.
func (op operation) PointType() string { return op.GoName + "Point" }
func (op operation) Step() string      { return op.GoName + "Step" }
func (op operation) Next() string      { return op.GoName + "Next" }
func (op operation) Respond() string   { return op.GoName + "Respond" }
func (op operation) Phases() string    { return op.GoName + "Phases" }

// StatusAnswer is the type a status operation answers with.
func (op operation) StatusAnswer() string { return lowerFirst(op.GoName) + "Answer" }

// Last is the last recovery point, whose phase responds.
func (op operation) Last() recoveryPoint { return op.Points[len(op.Points)-1] }

// buildModel is the stage after readSource: the model of src's
// operations, with the settings of cfg that the templates render.
func buildModel(cfg *Config, src source) (*model, error) {
	annotated, defs, security := src.annotated, src.oapi.defs, src.oapi.security
	m := &model{Spec: src.paths.specFromOutput, Package: cfg.Output.Package, Client: cfg.Client, Server: cfg.Server, Tests: cfg.Tests, ErrorShape: cfg.Errors}
	byRoute := make(map[string]annotation.Operation, len(annotated))
	for _, a := range annotated {
		byRoute[a.Method+" "+a.Path] = a
	}
	matched := make(map[string]bool, len(annotated))
	var errs []error
	var warnings []warning
	var scopedByGo []string
	for _, d := range defs {
		if d.IsAlias {
			continue
		}
		op := operation{
			GoName: d.OperationId,
			Name:   d.SpecOperationId,
			Method: strings.ToUpper(d.Method),
			Path:   d.Path,
			Route:  routePath(cfg.Server, d.Path),
		}
		if op.Name == "" && d.Spec != nil {
			op.Name = d.Spec.OperationID
		}
		if op.Name == "" {
			op.Name = op.GoName
		}
		a, ok := byRoute[op.Method+" "+op.Path]
		if ok {
			matched[op.Method+" "+op.Path] = true
			if err := annotate(cfg, &op, a, d); err != nil {
				errs = append(errs, err)
			}
			if cfg.Tests {
				op.Example = requestExample(d, op.KeyFrom)
			}
			if w := scopeWarning(a, d, security); w != "" {
				warnings = append(warnings, warning{a.Pos, w})
			}
			if a.Scope.Function {
				scopedByGo = append(scopedByGo, op.Name)
			}
			m.Idempotent = true
			m.Phased = m.Phased || op.Phased()
			m.Async = m.Async || op.Async
		}
		m.Operations = append(m.Operations, op)
	}
	statusOf := map[string]string{}
	for _, op := range m.Operations {
		if op.Async {
			statusOf[op.StatusGoName] = op.Field
		}
	}
	for i, op := range m.Operations {
		m.Operations[i].StatusOf = statusOf[op.GoName]
	}
	for _, a := range annotated { // in the spec's order, unlike byRoute
		if matched[a.Method+" "+a.Path] {
			continue
		}
		errs = append(errs, &annotation.Error{Pos: a.Pos, Msg: fmt.Sprintf("x-idempotent on %s %s: oapi-codegen generated no handler for this operation (is it excluded by output-options?)", a.Method, a.Path)})
	}
	errs = append(errs, checkPhaseNames(m.Operations)...)
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if len(scopedByGo) > 0 {
		m.ScopePanic = scopePanic(m.Package, scopedByGo)
	}
	// In the order of the spec's text, like the annotation errors.
	slices.SortStableFunc(warnings, func(a, b warning) int {
		return cmp.Or(cmp.Compare(a.pos.Line, b.pos.Line), cmp.Compare(a.pos.Column, b.pos.Column))
	})
	for _, w := range warnings {
		m.Warnings = append(m.Warnings, w.text)
	}
	return m, nil
}

func lowerFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToLower(s[:1]) + s[1:]
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
