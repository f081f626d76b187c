package generator_test

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/generator"
)

// contractSpec is an annotated operation whose scope and fingerprint the
// steps of TestScopeChangeWarns change, one edit at a time.
const contractSpec = `openapi: 3.0.3
info:
  title: contract
  version: "1"
paths:
  /things:
    post:
      operationId: createThing
      x-idempotent:
        scope: {header: X-Account-Id}
      parameters:
        - {name: X-Account-Id, in: header, required: true, schema: {type: string}}
        - {name: X-Tenant-Id, in: header, schema: {type: string}}
      requestBody:
        required: true
        content:
          application/json:
            schema:
              $ref: "#/components/schemas/Thing"
      responses:
        "201":
          description: created
components:
  schemas:
    Thing:
      type: object
      required: [name]
      properties:
        name:
          type: string
        metadata:
          type: object
          properties:
            trace_id:
              type: string
`

// Changing how an annotated operation's keys are scoped or what its
// fingerprint covers warns, naming the operation, what changed and what
// it does to retries in flight; a first generation, a regeneration of
// the same spec and edits that leave keys alone say nothing.
func TestScopeChangeWarns(t *testing.T) {
	dir := t.TempDir()
	spec := filepath.Join(dir, "openapi.yaml")
	cfg := configFor(t, dir, "openapi.yaml", "")
	src := contractSpec
	// step edits the spec, generates, writes the output as go generate
	// would, and returns the warnings.
	step := func(name string, edits ...string) []string {
		t.Helper()
		for i := 0; i < len(edits); i += 2 {
			if !strings.Contains(src, edits[i]) {
				t.Fatalf("%s: the spec has no %q", name, edits[i])
			}
			src = strings.Replace(src, edits[i], edits[i+1], 1)
		}
		writeFile(t, spec, []byte(src))
		res := generate(t, cfg)
		if _, err := res.Write(dir); err != nil {
			t.Fatal(err)
		}
		return res.Warnings
	}
	quiet := func(name string, edits ...string) {
		t.Helper()
		if w := step(name, edits...); len(w) != 0 {
			t.Errorf("%s: warnings\n%s\nwant none", name, strings.Join(w, "\n"))
		}
	}
	op := "createThing"
	warns := func(name string, want []string, edits ...string) {
		t.Helper()
		w := step(name, edits...)
		if len(w) != 1 {
			t.Errorf("%s: %d warnings, want 1:\n%s", name, len(w), strings.Join(w, "\n"))
			return
		}
		at := regexp.MustCompile("^" + regexp.QuoteMeta(spec) + `:\d+:7: warning: x-idempotent on POST /things \(` + op + `\): changed from gen/idempotency.gen.go: `)
		if !at.MatchString(w[0]) {
			t.Errorf("%s: the warning does not match %s:\n%s", name, at, w[0])
		}
		for _, s := range append(want, `"Changing an operation's scope or fingerprint" in idemgen's README`) {
			if !strings.Contains(w[0], s) {
				t.Errorf("%s: the warning does not say %q:\n%s", name, s, w[0])
			}
		}
	}
	const rerun = "Its keys change: a request sent with an Idempotency-Key before this is deployed and retried with the same key after it runs again, as a new request"
	const holding = "Its fingerprint changes for requests that hold what changed: such a request sent with an Idempotency-Key before this is deployed and retried with the same key after it gets 422"
	const unprocessable = "Its fingerprint changes: a request sent with an Idempotency-Key before this is deployed and retried with the same key after it gets 422, as a different request under the same key"

	quiet("first generation")
	quiet("regenerated unchanged")
	quiet("descriptions and the order of properties",
		"      operationId: createThing\n", "      operationId: createThing\n      description: Creates a thing.\n      summary: Create\n",
		"        name:\n          type: string\n        metadata:\n          type: object\n          properties:\n            trace_id:\n              type: string\n",
		"        metadata:\n          type: object\n          properties:\n            trace_id:\n              type: string\n              description: for tracing\n        name:\n          type: string\n")
	quiet("the scope header's name in another case", "scope: {header: X-Account-Id}", "scope: {header: x-account-id}")

	warns("scope header renamed", []string{"scope header X-Account-Id → header X-Tenant-Id",
		"Its keys change: a request sent with an Idempotency-Key before this is deployed and retried with the same key after it is scoped by its X-Tenant-Id header instead of its X-Account-Id header, and runs again, as a new request, unless the two hold the same value (without X-Tenant-Id it gets 400)"},
		"scope: {header: x-account-id}", "scope: {header: X-Tenant-Id}")
	quiet("regenerated after the change")
	warns("scoped by Go too", []string{"scope header X-Tenant-Id → idem.Options.Scope and header X-Tenant-Id", "If idem.Options.Scope is set or unset in the same deploy, the keys of every annotated operation change"},
		"scope: {header: X-Tenant-Id}", "scope: {header: X-Tenant-Id, function: true}")
	warns("scope none", []string{"scope idem.Options.Scope and header X-Tenant-Id → none", "is no longer scoped by its X-Tenant-Id header, and runs again, as a new request"},
		"scope: {header: X-Tenant-Id, function: true}", "scope: none")
	warns("scope header added", []string{"scope none → header X-Account-Id", "is scoped by its X-Account-Id header now, and runs again, as a new request (without X-Account-Id it gets 400)"},
		"scope: none", "scope: {header: X-Account-Id}")

	warns("fingerprint.exclude of a body member", []string{"fingerprint: fingerprint.exclude /metadata/trace_id added", holding},
		"        scope: {header: X-Account-Id}\n", "        scope: {header: X-Account-Id}\n        fingerprint: {exclude: [/metadata/trace_id]}\n")
	warns("fingerprint.exclude of a header", []string{`fingerprint: header parameter "X-Tenant-Id" now left out (fingerprint.exclude)`, unprocessable},
		"exclude: [/metadata/trace_id]", "exclude: [/metadata/trace_id, x-tenant-id]")
	warns("a query parameter added", []string{`fingerprint: query parameter "expand" added`, unprocessable},
		"        - {name: X-Tenant-Id,", "        - {name: expand, in: query, schema: {type: string}}\n        - {name: X-Tenant-Id,")
	quiet("regenerated after the query parameter")
	warns("a query parameter's type", []string{`fingerprint: query parameter "expand" type string → [string]`, holding},
		"{name: expand, in: query, schema: {type: string}}", "{name: expand, in: query, schema: {type: array, items: {type: string}}}")
	warns("a body member added", []string{`fingerprint: request body application/json: member "note" added`, holding},
		"        name:\n          type: string\n", "        name:\n          type: string\n        note:\n          type: string\n")
	warns("a body member required", []string{`fingerprint: request body application/json: member "note" now written when empty`, unprocessable},
		"required: [name]", "required: [name, note]")
	warns("a body member's type", []string{"fingerprint: request body application/json: the Go type it is read into changed (shape #", holding},
		"        note:\n          type: string\n", "        note:\n          type: integer\n")
	warns("key read from the body", []string{"key the Idempotency-Key header → /name in the body",
		"Its keys change: a request sent before this is deployed and retried after it is keyed by /name in the body instead of the Idempotency-Key header, and runs again, as a new request, or gets 400 without /name in the body"},
		"        scope: {header: X-Account-Id}\n", "        scope: {header: X-Account-Id}\n        key: {body: /name}\n")
	warns("key read from the header again", []string{"key /name in the body → the Idempotency-Key header"},
		"        key: {body: /name}\n", "")
	warns("a media type added", []string{"fingerprint: request body media types application/json → application/json, application/x-www-form-urlencoded", unprocessable},
		"          application/json:\n            schema:\n              $ref: \"#/components/schemas/Thing\"\n",
		"          application/json:\n            schema:\n              $ref: \"#/components/schemas/Thing\"\n          application/x-www-form-urlencoded:\n            schema:\n              $ref: \"#/components/schemas/Thing\"\n")
	op = "placeThing"
	warns("operationId renamed", []string{"operationId createThing → placeThing (the keys' namespace)", rerun},
		"operationId: createThing\n", "operationId: placeThing\n")
	quiet("regenerated at the end")
}

// An idempotency file written before contracts were, or one whose code
// or whose contract's layout alone differs, is no reason to warn: an
// upgrade of idemgen that changes only how the file is written says
// nothing.
func TestContractReformatIsQuiet(t *testing.T) {
	dir := t.TempDir()
	spec := filepath.Join(dir, "openapi.yaml")
	writeFile(t, spec, []byte(contractSpec))
	cfg := configFor(t, dir, "openapi.yaml", "")
	res := generate(t, cfg)
	if _, err := res.Write(dir); err != nil {
		t.Fatal(err)
	}
	layer := filepath.Join(dir, "gen", "idempotency.gen.go")
	written, err := os.ReadFile(layer)
	if err != nil {
		t.Fatal(err)
	}
	marker := []byte("\n// idemgen:contract v1\n")
	i := bytes.Index(written, marker)
	if i < 0 {
		t.Fatalf("the idempotency file records no contract:\n%s", written)
	}
	code, contract := written[:i], written[i:]

	// Other code before the contract, its lines indented otherwise, and
	// its prose reworded.
	reformatted := regexp.MustCompile(`(?m)^//\t`).ReplaceAll(contract, []byte("//    "))
	reformatted = bytes.Replace(reformatted, []byte("How the keys"), []byte("What the keys"), 1)
	code = append(bytes.Replace(code, []byte("func "), []byte("// a comment\nfunc "), 3), "\nvar _ = 1\n"...)
	writeFile(t, layer, append(code, reformatted...))
	if w := generate(t, cfg).Warnings; len(w) != 0 {
		t.Errorf("a reformatted file: warnings\n%s\nwant none", strings.Join(w, "\n"))
	}

	// No contract at all, and a scope changed since: nothing to compare.
	writeFile(t, layer, code)
	writeFile(t, spec, []byte(strings.Replace(contractSpec, "scope: {header: X-Account-Id}", "scope: {header: X-Tenant-Id}", 1)))
	if w := generate(t, cfg).Warnings; len(w) != 0 {
		t.Errorf("a file without a contract: warnings\n%s\nwant none", strings.Join(w, "\n"))
	}

	// A contract of another version is not compared either.
	writeFile(t, layer, append(code, bytes.Replace(contract, []byte("contract v1"), []byte("contract v2"), 1)...))
	if w := generate(t, cfg).Warnings; len(w) != 0 {
		t.Errorf("a contract of another version: warnings\n%s\nwant none", strings.Join(w, "\n"))
	}

	// While the contract as written is: the same change warns.
	writeFile(t, layer, written)
	if w := generate(t, cfg).Warnings; len(w) != 1 || !strings.Contains(w[0], "scope header X-Account-Id → header X-Tenant-Id") {
		t.Errorf("the scope changed: warnings\n%s\nwant one naming it", strings.Join(w, "\n"))
	}
}

// Every golden case's contract reads back as written, and records every
// annotated operation.
func TestContractRoundTrip(t *testing.T) {
	for _, dir := range goldenCases(t) {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			res := generate(t, loadConfig(t, filepath.Join(dir, "idemgen.yaml")))
			written, reread, ok := generator.ContractRoundTrip(res)
			if !ok {
				t.Fatalf("the contract does not read back:\n%s", written)
			}
			if reread != written {
				t.Errorf("the contract reads back as\n%s\nwant\n%s", reread, written)
			}
			if n := strings.Count(written, "\n// operation "); n != res.Idempotent {
				t.Errorf("the contract records %d operations, want %d:\n%s", n, res.Idempotent, written)
			}
		})
	}
}
