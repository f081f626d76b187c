package generator_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/generator/annotation"
)

// header is the start of every spec below: the operation under test
// starts on line 7, at "    post:" or its like.
const header = `openapi: 3.0.3
info:
  title: errors
  version: "1"
paths:
  /things:
`

// components are appended to every spec below.
const components = `components:
  schemas:
    Thing:
      type: object
      properties:
        name:
          type: string
        metadata:
          type: object
          properties:
            trace_id:
              type: string
            source:
              type: string
`

// Bad annotations fail Generate with the spec's file, line and column and
// with what was expected.
func TestGenerateRejectsBadAnnotations(t *testing.T) {
	tests := []struct {
		name      string
		operation string // the operation of /things, from line 7
		line, col int
		msg       string // the message after "file:line:col: "
	}{
		{
			name: "get",
			operation: `    get:
      operationId: listThings
      x-idempotent: true
      responses:
        "200":
          description: ok
`,
			line: 9, col: 7,
			msg: "x-idempotent on GET: GET is idempotent already; expected x-idempotent on POST, PUT, PATCH or DELETE",
		},
		{
			name: "bad duration",
			operation: `    post:
      operationId: createThing
      x-idempotent:
        ttl: 3 days
      responses:
        "201":
          description: ok
`,
			line: 10, col: 14,
			msg: `x-idempotent.ttl: "3 days" is not a duration; expected a Go duration such as 90s, 15m or 24h, or days such as 7d`,
		},
		{
			name: "unknown option",
			operation: `    post:
      operationId: createThing
      x-idempotent:
        lease: 30s
        retries: 3
      responses:
        "201":
          description: ok
`,
			line: 11, col: 9,
			msg: `x-idempotent: unknown key "retries"; expected one of required, key, ttl, lease, mode, recovery-points, status, abandoned, complete-after, fingerprint, scope, max-body, validate`,
		},
		{
			name: "octet-stream request body",
			operation: `    post:
      operationId: uploadThing
      x-idempotent: true
      requestBody:
        content:
          application/octet-stream:
            schema:
              type: string
              format: binary
      responses:
        "201":
          description: ok
`,
			line: 9, col: 7,
			msg: "x-idempotent on POST /things: request body application/octet-stream is binary; expected a JSON, form-encoded or text body",
		},
		{
			name: "event-stream response",
			operation: `    post:
      operationId: watchThing
      x-idempotent: true
      responses:
        "200":
          description: events
          content:
            text/event-stream:
              schema:
                type: string
`,
			line: 9, col: 7,
			msg: "x-idempotent on POST /things: response 200 text/event-stream is a server-sent event stream and cannot be stored for replay; expected JSON, text or other bounded bodies",
		},
		{
			name: "undecoded request body",
			operation: `    post:
      operationId: createThing
      x-idempotent: true
      requestBody:
        content:
          application/json:
            schema:
              $ref: "#/components/schemas/Thing"
          application/xml:
            schema:
              $ref: "#/components/schemas/Thing"
      responses:
        "201":
          description: ok
`,
			line: 9, col: 7,
			msg: "x-idempotent on POST /things: request body application/xml reaches the handler undecoded, as an io.Reader, and cannot be fingerprinted; expected a JSON, form-encoded or text/plain body",
		},
		{
			name: "unknown fingerprint pointer",
			operation: `    post:
      operationId: createThing
      x-idempotent:
        fingerprint:
          exclude:
            - /metadata/source
            - /metadata/trace
      requestBody:
        content:
          application/json:
            schema:
              $ref: "#/components/schemas/Thing"
      responses:
        "201":
          description: ok
`,
			line: 13, col: 15,
			msg: `x-idempotent on POST /things: fingerprint.exclude /metadata/trace: the request body schema has no "trace" under "/metadata"; expected one of source, trace_id`,
		},
		{
			name: "fingerprint pointer without a JSON body",
			operation: `    post:
      operationId: createThing
      x-idempotent:
        fingerprint:
          exclude: [/name]
      requestBody:
        content:
          application/x-www-form-urlencoded:
            schema:
              $ref: "#/components/schemas/Thing"
      responses:
        "201":
          description: ok
`,
			line: 11, col: 21,
			msg: "x-idempotent on POST /things: fingerprint.exclude /name: the operation has no JSON request body to exclude from",
		},
		{
			name: "required contradicts the declared key",
			operation: `    post:
      x-idempotent:
        required: true
      parameters:
        - name: Idempotency-Key
          in: header
          schema:
            type: string
      responses:
        "201":
          description: ok
`,
			line: 9, col: 19,
			msg: "x-idempotent on POST /things: required: true contradicts the operation's own Idempotency-Key header parameter, which has required: false; expected the same value in both, or required only on the parameter",
		},
		{
			name: "declared key longer than the layer allows",
			operation: `    post:
      x-idempotent: true
      parameters:
        - name: idempotency-key
          in: header
          schema:
            type: string
            maxLength: 300
      responses:
        "201":
          description: ok
`,
			line: 8, col: 7,
			msg: "x-idempotent on POST /things: the operation's idempotency-key header parameter allows keys of 300 characters, over the layer's limit of 255; expected a maxLength of at most 255",
		},
		{
			name: "declared key pattern Go cannot compile",
			operation: `    post:
      x-idempotent: true
      parameters:
        - name: Idempotency-Key
          in: header
          schema:
            type: string
            pattern: "(?<=a)b"
      responses:
        "201":
          description: ok
`,
			line: 8, col: 7,
			msg: "x-idempotent on POST /things: the operation's Idempotency-Key header parameter has a pattern Go cannot compile (error parsing regexp: invalid named capture: `(?<=a)b`); expected a pattern in the syntax Go's regexp package shares with JSON Schema",
		},
		{
			name: "exclude names no parameter",
			operation: `    post:
      x-idempotent:
        fingerprint:
          exclude: [X-Trace]
      parameters:
        - name: X-Trace-Id
          in: header
          schema:
            type: string
      responses:
        "201":
          description: ok
`,
			line: 10, col: 21,
			msg: `x-idempotent on POST /things: fingerprint.exclude X-Trace: the operation has no parameter "X-Trace"; expected one of X-Trace-Id, or a JSON pointer into the body starting with /`,
		},
		{
			name: "scope header the operation does not declare",
			operation: `    post:
      operationId: createThing
      x-idempotent:
        scope: {header: X-Tenant, function: true}
      parameters:
        - name: X-Account-Id
          in: header
          schema:
            type: string
        - name: Idempotency-Key
          in: header
          schema:
            type: string
        - name: x-org-id
          in: header
          schema:
            type: string
      responses:
        "201":
          description: ok
`,
			line: 10, col: 25,
			msg: `x-idempotent on POST /things: scope.header X-Tenant: the operation declares no header parameter "X-Tenant"; expected one of X-Account-Id, x-org-id`,
		},
		{
			name: "scope header on an operation without header parameters",
			operation: `    post:
      operationId: createThing
      x-idempotent:
        scope:
          header: tenant
      parameters:
        - name: tenant
          in: query
          schema:
            type: string
      responses:
        "201":
          description: ok
`,
			line: 11, col: 19,
			msg: `x-idempotent on POST /things: scope.header tenant: the operation declares no header parameter "tenant"; expected a header parameter declared on the operation`,
		},
		{
			name: "phase method named like an operation",
			operation: `    post:
      operationId: createThing
      x-idempotent:
        mode: phased
        recovery-points: [thing_created, done]
      responses:
        "201":
          description: ok
  /things/done:
    post:
      operationId: createThingAfterDone
      responses:
        "201":
          description: ok
`,
			line: 9, col: 7,
			msg: `x-idempotent on POST /things: recovery point "done" makes the phase method CreateThingAfterDone of IdempotentServer, which is already the method of POST /things/done; expected a recovery point or operationId that makes another name`,
		},
		{
			name: "phase method named like another phase method",
			operation: `    post:
      operationId: createThing
      x-idempotent:
        mode: phased
        recovery-points: [done_after_paid]
      responses:
        "201":
          description: ok
  /things/done:
    post:
      operationId: createThingAfterDone
      x-idempotent:
        mode: phased
        recovery-points: [paid]
      responses:
        "201":
          description: ok
`,
			line: 18, col: 7,
			msg: `x-idempotent on POST /things/done: recovery point "paid" makes the phase method CreateThingAfterDoneAfterPaid of IdempotentServer, which is already the phase method of createThing after "done_after_paid"; expected a recovery point or operationId that makes another name`,
		},
		{
			name: "abandoned: complete with a multipart body",
			operation: `    post:
      operationId: uploadThing
      x-idempotent:
        mode: phased
        recovery-points: [stored]
        abandoned: complete
        complete-after: 30m
      requestBody:
        content:
          multipart/form-data:
            schema:
              type: object
              properties:
                caption:
                  type: string
                photo:
                  type: string
                  format: binary
      responses:
        "201":
          description: ok
`,
			line: 12, col: 20,
			msg: "x-idempotent on POST /things: abandoned: complete: request body multipart/form-data is a stream, which the completer cannot store to resume the attempt with; expected abandoned: fail, or a JSON request body",
		},
		{
			name: "abandoned: complete with a multipart body beside a JSON one",
			operation: `    put:
      operationId: replaceThing
      x-idempotent: {mode: phased, recovery-points: [stored], abandoned: complete}
      requestBody:
        content:
          application/json:
            schema:
              $ref: "#/components/schemas/Thing"
          multipart/form-data:
            schema:
              $ref: "#/components/schemas/Thing"
      responses:
        "200":
          description: ok
`,
			line: 9, col: 74,
			msg: "x-idempotent on PUT /things: abandoned: complete: request body multipart/form-data is a stream, which the completer cannot store to resume the attempt with; expected abandoned: fail, or a JSON request body",
		},
		{
			name: "recovery point named like a declaration",
			operation: `    post:
      operationId: createThing
      x-idempotent:
        mode: phased
        recovery-points: [created, step]
      responses:
        "201":
          description: ok
`,
			line: 9, col: 7,
			msg: `x-idempotent on POST /things: recovery point "step" makes the constant CreateThingStep, which the idempotency layer already declares for createThing's phases; expected a recovery point with another name`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			spec := filepath.Join(dir, "openapi.yaml")
			writeFile(t, spec, []byte(header+tt.operation+components))
			res, err := generateFrom(configFor(t, dir, "openapi.yaml", ""))
			if err == nil {
				t.Fatalf("Generate succeeded with %d files; want an error", len(res.Files))
			}
			want := fmt.Sprintf("%s:%d:%d: %s", spec, tt.line, tt.col, tt.msg)
			if err.Error() != want {
				t.Errorf("got error\n\t%v\nwant\n\t%s", err, want)
			}
			var ae *annotation.Error
			if !errors.As(err, &ae) {
				t.Fatalf("got %T, want an *annotation.Error", err)
			}
			if ae.Pos != (annotation.Position{File: spec, Line: tt.line, Column: tt.col}) {
				t.Errorf("position %v, want %s:%d:%d", ae.Pos, spec, tt.line, tt.col)
			}
		})
	}
}

// An annotated operation that oapi-codegen leaves out is reported at its
// annotation, not silently left unguarded.
func TestGenerateRejectsExcludedAnnotatedOperation(t *testing.T) {
	dir := t.TempDir()
	spec := filepath.Join(dir, "openapi.yaml")
	writeFile(t, spec, []byte(header+`    post:
      operationId: createThing
      x-idempotent: true
      responses:
        "201":
          description: ok
    put:
      operationId: replaceThing
      x-idempotent: true
      responses:
        "200":
          description: ok
`+components))
	cfg := configFor(t, dir, "openapi.yaml", "oapi-codegen:\n  output-options:\n    exclude-operation-ids: [createThing]\n")
	_, err := generateFrom(cfg)
	want := spec + ":9:7: x-idempotent on POST /things: oapi-codegen generated no handler for this operation (is it excluded by output-options?)"
	if err == nil || err.Error() != want {
		t.Fatalf("got error %v, want %s", err, want)
	}
}

// Every problem of a spec is reported at once, in the order of the text.
func TestGenerateReportsAllProblems(t *testing.T) {
	dir := t.TempDir()
	spec := filepath.Join(dir, "openapi.yaml")
	writeFile(t, spec, []byte(header+`    get:
      x-idempotent: true
      responses:
        "200":
          description: ok
    post:
      x-idempotent:
        ttl: soon
        lease: 1m
      responses:
        "201":
          description: ok
`+components))
	_, err := generateFrom(configFor(t, dir, "openapi.yaml", ""))
	if err == nil {
		t.Fatal("Generate succeeded")
	}
	lines := strings.Split(err.Error(), "\n")
	want := []string{spec + ":8:7: x-idempotent on GET", spec + ":14:14: x-idempotent.ttl"}
	if len(lines) != len(want) {
		t.Fatalf("got %d problems, want %d:\n%v", len(lines), len(want), err)
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("problem %d: got %q, want it to start with %q", i, lines[i], w)
		}
	}
}

// A $ref that names nothing is reported at the reference's own line and
// column, with what the target lacks, not only by its target.
func TestBrokenRefNamesItsLine(t *testing.T) {
	dir := t.TempDir()
	spec := filepath.Join(dir, "openapi.yaml")
	writeFile(t, spec, []byte(header+`    post:
      x-idempotent: true
      requestBody:
        content:
          application/json:
            schema:
              $ref: "#/components/schemas/Missing"
      responses:
        "201":
          description: ok
`+components))
	_, err := generateFrom(configFor(t, dir, spec, ""))
	want := spec + `:13:21: $ref "#/components/schemas/Missing" names nothing: #/components/schemas has no "Missing"; expected one of Thing`
	if err == nil {
		t.Fatal("Generate succeeded")
	}
	lines := strings.Split(err.Error(), "\n")
	if !strings.HasPrefix(lines[0], spec+": load spec: ") || !slices.Contains(lines[1:], want) {
		t.Fatalf("got error\n%v\nwant the loader's cause first, then\n%s", err, want)
	}
}

// A spec the loader refuses for another cause is refused with that cause
// first, and references into arrays (a oneOf's item) are not called broken.
func TestRefIntoArrays(t *testing.T) {
	dir := t.TempDir()
	spec := filepath.Join(dir, "openapi.yaml")
	writeFile(t, spec, []byte(header+`    post:
      x-idempotent: true
      requestBody:
        content:
          application/json:
            schema:
              $ref: "#/components/schemas/Either/oneOf/0"
      responses:
        "201":
          description: ok
          content:
            application/json:
              schema:
                $ref: "#/components/schemas/Either/oneOf/2"
`+components+`    Either:
      required: name
      oneOf:
        - $ref: "#/components/schemas/Thing"
        - type: string
`))
	_, err := generateFrom(configFor(t, dir, spec, ""))
	if err == nil {
		t.Fatal("Generate succeeded")
	}
	lines := strings.Split(err.Error(), "\n")
	if !strings.HasPrefix(lines[0], spec+": load spec: ") {
		t.Errorf("the first line is %q; want the loader's cause", lines[0])
	}
	want := spec + `:20:23: $ref "#/components/schemas/Either/oneOf/2" names nothing: #/components/schemas/Either/oneOf has 2 items, numbered from 0; expected an index below 2`
	if got := lines[1:]; !slices.Equal(got, []string{want}) {
		t.Errorf("reference errors\n%q\nwant only\n%q", got, want)
	}
}
