package annotation

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

const file = "spec.yaml"

// spec drops the newline that follows the opening backquote, so that the
// first line of the literal is line 1 of the document.
func spec(s string) string { return strings.TrimPrefix(s, "\n") }

func at(line, col int) Position { return Position{File: file, Line: line, Column: col} }

func atp(line, col int) *Position { p := at(line, col); return &p }

// annotated is an operation with the built-in defaults.
func annotated(path, method string, pos Position) Operation {
	return Operation{Path: path, Method: method, Required: true, TTL: DefaultTTL, Lease: DefaultLease, Mode: ModeAtomic, Validate: true, Pos: pos}
}

func with(op Operation, change func(*Operation)) Operation {
	change(&op)
	return op
}

// errorLines returns each joined error's text, in order.
func errorLines(t *testing.T, err error) []string {
	t.Helper()
	if err == nil {
		return nil
	}
	joined, ok := err.(interface{ Unwrap() []error })
	if !ok {
		t.Fatalf("error %T is not a joined error: %v", err, err)
	}
	var lines []string
	for _, e := range joined.Unwrap() {
		var ae *Error
		if !errors.As(e, &ae) {
			t.Fatalf("error %T is not an *Error: %v", e, e)
		}
		lines = append(lines, ae.Error())
	}
	return lines
}

type readCase struct {
	name string
	src  string
	want []Operation
	errs []string // exact texts, in order; file:line:col: message
}

func runReadCases(t *testing.T, cases []readCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ops, err := Read(file, []byte(c.src))
			got := errorLines(t, err)
			if !reflect.DeepEqual(got, c.errs) {
				t.Errorf("errors:\n got  %s\n want %s", strings.Join(got, "\n      "), strings.Join(c.errs, "\n      "))
			}
			if err != nil && ops != nil {
				t.Errorf("operations returned with an error: %+v", ops)
			}
			if !reflect.DeepEqual(ops, c.want) {
				t.Errorf("operations:\n got  %+v\n want %+v", ops, c.want)
			}
		})
	}
}

func TestReadValid(t *testing.T) {
	runReadCases(t, []readCase{
		{
			name: "true uses the built-in defaults",
			src: spec(`
paths:
  /orders:
    post:
      operationId: createOrder
      x-idempotent: true
`),
			want: []Operation{with(annotated("/orders", "POST", at(5, 7)), func(o *Operation) { o.OperationID = "createOrder" })},
		},
		{
			name: "x-idempotency-ttl shorthand",
			src: spec(`
paths:
  /orders:
    put:
      x-idempotent: true
      x-idempotency-ttl: 1h30m
`),
			want: []Operation{with(annotated("/orders", "PUT", at(4, 7)), func(o *Operation) { o.TTL = 90 * time.Minute })},
		},
		{
			name: "every key of the mapping",
			src: spec(`
paths:
  /payments:
    post:
      x-idempotent:
        required: false
        ttl: 7d
        lease: 30s
        mode: phased
        recovery-points: [payment_created, charge_created]
        fingerprint:
          exclude: [/metadata/trace_id, /note]
        validate: false
`),
			want: []Operation{{
				Path: "/payments", Method: "POST", Required: false, RequiredAt: atp(5, 19),
				TTL: 7 * 24 * time.Hour, Lease: 30 * time.Second, Mode: ModePhased, ModePos: at(8, 15),
				RecoveryPoints:     []string{"payment_created", "charge_created"},
				FingerprintExclude: []Pointer{{"/metadata/trace_id", at(11, 21)}, {"/note", at(11, 41)}},
				Pos:                at(4, 7),
			}},
		},
		{
			name: "abandoned attempts of phased operations",
			src: spec(`
paths:
  /a:
    post:
      x-idempotent:
        mode: phased
        recovery-points: [payment_created, charge_created]
        abandoned: complete
        complete-after: 30m
  /b:
    post:
      x-idempotent: {mode: phased, recovery-points: [a], abandoned: fail}
    put:
      x-idempotent: {mode: phased, recovery-points: [a], abandoned: complete, complete-after: 1s}
    patch:
      x-idempotent: {mode: phased, recovery-points: [a], complete-after: 1d12h, abandoned: fail}
    delete:
      x-idempotent: {mode: phased, recovery-points: [a]}
`),
			want: []Operation{
				with(annotated("/a", "POST", at(4, 7)), func(o *Operation) {
					o.Mode, o.ModePos, o.RecoveryPoints = ModePhased, at(5, 15), []string{"payment_created", "charge_created"}
					o.Abandoned, o.AbandonedAt, o.CompleteAfter = AbandonedComplete, atp(7, 20), 30*time.Minute
				}),
				with(annotated("/b", "DELETE", at(17, 7)), func(o *Operation) {
					o.Mode, o.ModePos, o.RecoveryPoints = ModePhased, at(17, 28), []string{"a"}
				}),
				with(annotated("/b", "PATCH", at(15, 7)), func(o *Operation) {
					o.Mode, o.ModePos, o.RecoveryPoints = ModePhased, at(15, 28), []string{"a"}
					o.Abandoned, o.AbandonedAt, o.CompleteAfter = AbandonedFail, atp(15, 92), 36*time.Hour
				}),
				with(annotated("/b", "POST", at(11, 7)), func(o *Operation) {
					o.Mode, o.ModePos, o.RecoveryPoints = ModePhased, at(11, 28), []string{"a"}
					o.Abandoned, o.AbandonedAt, o.CompleteAfter = AbandonedFail, atp(11, 69), DefaultCompleteAfter
				}),
				with(annotated("/b", "PUT", at(13, 7)), func(o *Operation) {
					o.Mode, o.ModePos, o.RecoveryPoints = ModePhased, at(13, 28), []string{"a"}
					o.Abandoned, o.AbandonedAt, o.CompleteAfter = AbandonedComplete, atp(13, 69), time.Second
				}),
			},
		},
		{
			name: "abandoned in JSON",
			src:  `{"paths": {"/a": {"post": {"x-idempotent": {"mode": "phased", "recovery-points": ["a"], "abandoned": "complete", "complete-after": "45s"}}}}}`,
			want: []Operation{with(annotated("/a", "POST", at(1, 28)), func(o *Operation) {
				o.Mode, o.ModePos, o.RecoveryPoints = ModePhased, at(1, 53), []string{"a"}
				o.Abandoned, o.AbandonedAt, o.CompleteAfter = AbandonedComplete, atp(1, 102), 45*time.Second
			})},
		},
		{
			name: "document defaults apply and operations override them",
			src: spec(`
x-idempotency:
  ttl: 48h
  lease: 2m
  required: false
  validate: false
paths:
  /a:
    post:
      x-idempotent: true
    delete:
      x-idempotent:
        required: true
        lease: 10s
        validate: true
  /b:
    patch:
      x-idempotent: {ttl: 1h}
    put:
      x-idempotent: true
      x-idempotency-ttl: 3h
`),
			want: []Operation{
				{Path: "/a", Method: "DELETE", Required: true, RequiredAt: atp(12, 19), TTL: 48 * time.Hour, Lease: 10 * time.Second, Mode: ModeAtomic, Validate: true, Pos: at(11, 7)},
				{Path: "/a", Method: "POST", Required: false, RequiredAt: atp(4, 13), TTL: 48 * time.Hour, Lease: 2 * time.Minute, Mode: ModeAtomic, Pos: at(9, 7)},
				{Path: "/b", Method: "PATCH", Required: false, RequiredAt: atp(4, 13), TTL: time.Hour, Lease: 2 * time.Minute, Mode: ModeAtomic, Pos: at(17, 7)},
				{Path: "/b", Method: "PUT", Required: false, RequiredAt: atp(4, 13), TTL: 3 * time.Hour, Lease: 2 * time.Minute, Mode: ModeAtomic, Pos: at(19, 7)},
			},
		},
		{
			name: "scope: a document default, overridden whole by operations",
			src: spec(`
x-idempotency:
  scope: {header: X-Account-Id}
paths:
  /a:
    post:
      x-idempotent: true
    put:
      x-idempotent:
        scope: {function: true}
    patch:
      x-idempotent:
        scope:
          header: x-tenant
          function: true
    delete:
      x-idempotent: {scope: none}
  /b:
    post:
      x-idempotent:
        scope: {header: X-Org, function: false}
`),
			want: []Operation{
				with(annotated("/a", "DELETE", at(16, 7)), func(o *Operation) { o.Scope = Scope{Set: true, None: true} }),
				with(annotated("/a", "PATCH", at(11, 7)), func(o *Operation) {
					o.Scope = Scope{Set: true, Header: "x-tenant", HeaderPos: at(13, 19), Function: true}
				}),
				with(annotated("/a", "POST", at(6, 7)), func(o *Operation) {
					o.Scope = Scope{Set: true, Default: true, Header: "X-Account-Id", HeaderPos: at(2, 19)}
				}),
				with(annotated("/a", "PUT", at(8, 7)), func(o *Operation) { o.Scope = Scope{Set: true, Function: true} }),
				with(annotated("/b", "POST", at(19, 7)), func(o *Operation) {
					o.Scope = Scope{Set: true, Header: "X-Org", HeaderPos: at(20, 25)}
				}),
			},
		},
		{
			name: "scope: none as the document default",
			src: spec(`
x-idempotency: {scope: none}
paths:
  /a:
    post:
      x-idempotent: {ttl: 1h}
`),
			want: []Operation{with(annotated("/a", "POST", at(5, 7)), func(o *Operation) {
				o.TTL, o.Scope = time.Hour, Scope{Set: true, Default: true, None: true}
			})},
		},
		{
			name: "day durations",
			src: spec(`
x-idempotency:
  ttl: 30d
paths:
  /a:
    post:
      x-idempotent: {ttl: 7d, lease: 1d12h}
  /b:
    post:
      x-idempotent: true
`),
			want: []Operation{
				with(annotated("/a", "POST", at(6, 7)), func(o *Operation) { o.TTL, o.Lease = 7*24*time.Hour, 36*time.Hour }),
				with(annotated("/b", "POST", at(9, 7)), func(o *Operation) { o.TTL = 30 * 24 * time.Hour }),
			},
		},
		{
			name: "false, $ref path items and other keys are not annotations",
			src: spec(`
paths:
  /a:
    summary: s
    parameters: []
    servers: []
    x-internal: true
    get:
      x-idempotent: false
    post:
      operationId: a
      x-idempotent: false
  /b:
    $ref: '#/components/pathItems/b'
    post:
      x-idempotent: {mode: bogus}
  x-ext: {}
webhooks:
  /w:
    post:
      x-idempotent: false
`),
		},
		{
			name: "sorted by path then method",
			src: spec(`
paths:
  /z:
    post: {x-idempotent: true}
  /a/{id}:
    put: {x-idempotent: true}
    patch: {x-idempotent: true}
`),
			want: []Operation{
				annotated("/a/{id}", "PATCH", at(6, 13)),
				annotated("/a/{id}", "PUT", at(5, 11)),
				annotated("/z", "POST", at(3, 12)),
			},
		},
		{
			name: "JSON",
			src: spec(`
{
  "paths": {
    "/orders": {
      "post": {
        "operationId": "createOrder",
        "x-idempotent": {"ttl": "2h", "fingerprint": {"exclude": ["/a"]}}
      }
    }
  }
}
`),
			want: []Operation{with(annotated("/orders", "POST", at(6, 9)), func(o *Operation) {
				o.OperationID, o.TTL, o.FingerprintExclude = "createOrder", 2*time.Hour, []Pointer{{"/a", at(6, 67)}}
			})},
		},
		{
			// yaml.v3 rejects the "\/" escape; columns count characters, not bytes.
			name: "JSON that yaml.v3 cannot read",
			src: spec(`
{
  "paths": {
    "/orders": {
      "post": {
        "summary": "create \/ order",
        "x-idempotent": {"ttl": "2h", "fingerprint": {"exclude": ["/é", "/a"]}}
      }
    }
  }
}
`),
			want: []Operation{with(annotated("/orders", "POST", at(6, 9)), func(o *Operation) {
				o.TTL, o.FingerprintExclude = 2*time.Hour, []Pointer{{"/é", at(6, 67)}, {"/a", at(6, 73)}}
			})},
		},
		{
			name: "anchors, aliases and merge keys",
			src: spec(`
paths:
  /a:
    post:
      x-idempotent: &std
        ttl: 2h
        lease: 5m
  /b:
    post:
      x-idempotent:
        <<: *std
        lease: 10m
    put:
      <<: {x-idempotent: *std}
`),
			want: []Operation{
				with(annotated("/a", "POST", at(4, 7)), func(o *Operation) { o.TTL, o.Lease = 2*time.Hour, 5*time.Minute }),
				with(annotated("/b", "POST", at(9, 7)), func(o *Operation) { o.TTL, o.Lease = 2*time.Hour, 10*time.Minute }),
				with(annotated("/b", "PUT", at(13, 12)), func(o *Operation) { o.TTL, o.Lease = 2*time.Hour, 5*time.Minute }),
			},
		},
		{name: "empty document", src: ""},
		{name: "comment only", src: "# nothing\n"},
		{name: "no paths", src: "openapi: 3.0.3\n"},
		{name: "empty JSON object", src: "{}"},
		{name: "not a mapping", src: "[1, 2]"},
		{name: "paths is not a mapping", src: "paths: [1]\n"},
	})
}

func TestReadErrors(t *testing.T) {
	const anyType = "expected true, false or a mapping with keys required, key, ttl, lease, mode, recovery-points, status, abandoned, complete-after, fingerprint, scope, max-body, validate"
	const durationHint = "expected a Go duration such as 90s, 15m or 24h, or days such as 7d"
	const badPoint = "is not a valid recovery point; expected a name that starts with a letter and has only letters, digits, _ or -, such as payment_created"
	runReadCases(t, []readCase{
		{
			name: "x-idempotent of the wrong type",
			src: spec(`
paths:
  /a:
    post:
      x-idempotent: "yes"
    put:
      x-idempotent: 1
    patch:
      x-idempotent:
    delete:
      x-idempotent: [true]
`),
			errs: []string{
				`spec.yaml:4:21: x-idempotent: "yes" is a string; ` + anyType,
				`spec.yaml:6:21: x-idempotent: 1 is a number; ` + anyType,
				`spec.yaml:8:20: x-idempotent: the value is empty; ` + anyType,
				`spec.yaml:10:21: x-idempotent: the value is a list; ` + anyType,
			},
		},
		{
			name: "unknown keys",
			src: spec(`
x-idempotency:
  mode: phased
paths:
  /a:
    post:
      x-idempotent:
        retries: 3
        fingerprint:
          only: [/a]
`),
			errs: []string{
				`spec.yaml:2:3: x-idempotency: unknown key "mode"; expected one of ttl, lease, required, key, scope, max-body, validate`,
				`spec.yaml:7:9: x-idempotent: unknown key "retries"; expected one of required, key, ttl, lease, mode, recovery-points, status, abandoned, complete-after, fingerprint, scope, max-body, validate`,
				`spec.yaml:9:11: x-idempotent.fingerprint: unknown key "only"; expected exclude or include`,
			},
		},
		{
			name: "values of the wrong type",
			src: spec(`
x-idempotency: [24h]
paths:
  /a:
    post:
      x-idempotent:
        required: "no"
        ttl: 60
        lease: true
        mode: 1
        recovery-points: payment_created
        fingerprint: [/a]
  /b:
    post:
      x-idempotent:
        fingerprint:
          exclude: /a
`),
			errs: []string{
				`spec.yaml:1:16: x-idempotency: the value is a list; expected a mapping with keys ttl, lease, required, key, scope, max-body, validate`,
				`spec.yaml:6:19: x-idempotent.required: "no" is a string; expected true or false`,
				`spec.yaml:7:14: x-idempotent.ttl: 60 is a number; ` + durationHint,
				`spec.yaml:8:16: x-idempotent.lease: true is a bool; ` + durationHint,
				`spec.yaml:9:15: x-idempotent.mode: 1 is a number; expected atomic, phased or async`,
				`spec.yaml:10:26: x-idempotent.recovery-points: "payment_created" is a string; expected a list of names such as [payment_created, charge_created]`,
				`spec.yaml:11:22: x-idempotent.fingerprint: the value is a list; expected a mapping with keys exclude, include`,
				`spec.yaml:16:20: x-idempotent.fingerprint.exclude: "/a" is a string; expected a list of JSON pointers into the body, such as [/metadata/trace_id], or parameter names`,
			},
		},
		{
			name: "defaults of the wrong type",
			src: spec(`
x-idempotency:
  required: yes
  ttl: 1x
`),
			errs: []string{
				`spec.yaml:2:13: x-idempotency.required: "yes" is a string; expected true or false`,
				`spec.yaml:3:8: x-idempotency.ttl: "1x" is not a duration; ` + durationHint,
			},
		},
		{
			name: "scope values",
			src: spec(`
x-idempotency:
  scope: X-Account-Id
paths:
  /a:
    post:
      x-idempotent: {scope: true}
    put:
      x-idempotent: {scope: None}
    patch:
      x-idempotent: {scope: {}}
    delete:
      x-idempotent: {scope: {function: false}}
  /b:
    post:
      x-idempotent:
        scope: {header: "", function: "yes"}
    put:
      x-idempotent:
        scope:
          header: [X-Tenant-Id]
          query: tenant
    patch:
      x-idempotent:
        scope: {header: Idempotency-Key}
    delete:
      x-idempotent:
        scope: {header: "X Tenant"}
  /c:
    post:
      x-idempotent:
        scope: [header, X-Tenant-Id]
    put:
      x-idempotent:
        scope:
`),
			errs: []string{
				`spec.yaml:2:10: x-idempotency.scope: "X-Account-Id" is a string; expected none, or a mapping such as {header: X-Account-Id}, {function: true} or both`,
				`spec.yaml:6:29: x-idempotent.scope: true is a bool; expected none, or a mapping such as {header: X-Tenant-Id}, {function: true} or both`,
				`spec.yaml:8:29: x-idempotent.scope: "None" is a string; expected none, or a mapping such as {header: X-Tenant-Id}, {function: true} or both`,
				`spec.yaml:10:29: x-idempotent.scope: the mapping names no scope; expected header: NAME, function: true or both, or scope: none for keys shared by all callers`,
				`spec.yaml:12:29: x-idempotent.scope: the mapping names no scope; expected header: NAME, function: true or both, or scope: none for keys shared by all callers`,
				`spec.yaml:16:25: x-idempotent.scope.header: the value is empty; expected a header name such as X-Tenant-Id`,
				`spec.yaml:16:39: x-idempotent.scope.function: "yes" is a string; expected true or false`,
				`spec.yaml:20:19: x-idempotent.scope.header: the value is a list; expected a header name such as X-Tenant-Id`,
				`spec.yaml:21:11: x-idempotent.scope: unknown key "query"; expected header or function`,
				`spec.yaml:24:25: x-idempotent.scope.header: Idempotency-Key is the key itself, not its scope; expected the header that identifies the caller, such as X-Tenant-Id`,
				`spec.yaml:27:25: x-idempotent.scope.header: "X Tenant" is not a header name; expected a header name such as X-Tenant-Id`,
				`spec.yaml:31:16: x-idempotent.scope: the value is a list; expected none, or a mapping such as {header: X-Tenant-Id}, {function: true} or both`,
				`spec.yaml:34:15: x-idempotent.scope: the value is empty; expected none, or a mapping such as {header: X-Tenant-Id}, {function: true} or both`,
			},
		},
		{
			name: "duplicate scope keys",
			src: spec(`
paths:
  /a:
    post:
      x-idempotent:
        scope: {header: X-A, header: X-B}
`),
			errs: []string{
				`spec.yaml:5:30: x-idempotent.scope: duplicate key "header" (first at line 5); expected each key once`,
			},
		},
		{
			name: "x-idempotency-ttl without x-idempotent",
			src: spec(`
paths:
  /a:
    post:
      x-idempotency-ttl: 1h
    put:
      x-idempotent: false
      x-idempotency-ttl: 1h
`),
			errs: []string{
				`spec.yaml:4:7: x-idempotency-ttl has no effect without x-idempotent; expected x-idempotent: true or an x-idempotent mapping beside it`,
				`spec.yaml:7:7: x-idempotency-ttl has no effect without x-idempotent; expected x-idempotent: true or an x-idempotent mapping beside it`,
			},
		},
		{
			name: "ttl in both places",
			src: spec(`
paths:
  /a:
    post:
      x-idempotent:
        ttl: 2h
      x-idempotency-ttl: 1h
`),
			errs: []string{
				`spec.yaml:6:7: x-idempotency-ttl repeats the ttl set in x-idempotent at line 5; expected the ttl in only one of them`,
			},
		},
		{
			name: "methods that are idempotent already",
			src: spec(`
paths:
  /a:
    get:
      x-idempotent: true
    head:
      x-idempotent: {}
    options:
      x-idempotent: true
    trace:
      x-idempotent: true
`),
			errs: []string{
				`spec.yaml:4:7: x-idempotent on GET: GET is idempotent already; expected x-idempotent on POST, PUT, PATCH or DELETE`,
				`spec.yaml:6:7: x-idempotent on HEAD: HEAD is idempotent already; expected x-idempotent on POST, PUT, PATCH or DELETE`,
				`spec.yaml:8:7: x-idempotent on OPTIONS: OPTIONS is idempotent already; expected x-idempotent on POST, PUT, PATCH or DELETE`,
				`spec.yaml:10:7: x-idempotent on TRACE: TRACE is idempotent already; expected x-idempotent on POST, PUT, PATCH or DELETE`,
			},
		},
		{
			name: "lease longer than ttl",
			src: spec(`
x-idempotency:
  ttl: 1h
paths:
  /a:
    post:
      x-idempotent: {lease: 2h}
  /b:
    post:
      x-idempotent: {ttl: 30s}
  /c:
    post:
      x-idempotent: {ttl: 10m, lease: 20m}
  /d:
    post:
      x-idempotent: true
      x-idempotency-ttl: 30s
`),
			errs: []string{
				`spec.yaml:6:29: x-idempotent.lease: 2h is longer than the ttl 1h (x-idempotency.ttl); expected a lease no longer than the ttl`,
				`spec.yaml:9:27: x-idempotent.ttl: 30s is shorter than the lease 1m (the default); expected a ttl at least as long as the lease`,
				`spec.yaml:12:39: x-idempotent.lease: 20m is longer than the ttl 10m (x-idempotent.ttl); expected a lease no longer than the ttl`,
				`spec.yaml:16:26: x-idempotency-ttl: 30s is shorter than the lease 1m (the default); expected a ttl at least as long as the lease`,
			},
		},
		{
			name: "lease longer than ttl in the defaults is reported once",
			src: spec(`
x-idempotency:
  ttl: 30s
  lease: 1m
paths:
  /a:
    post:
      x-idempotent: true
    put:
      x-idempotent: {lease: 10s}
`),
			errs: []string{
				`spec.yaml:3:10: x-idempotency.lease: 1m is longer than the ttl 30s (x-idempotency.ttl); expected a lease no longer than the ttl`,
			},
		},
		{
			name: "default ttl shorter than the built-in lease",
			src:  "x-idempotency: {ttl: 30s}\n",
			errs: []string{
				`spec.yaml:1:22: x-idempotency.ttl: 30s is shorter than the lease 1m (the default); expected a ttl at least as long as the lease`,
			},
		},
		{
			name: "modes and recovery points",
			src: spec(`
paths:
  /a:
    post:
      x-idempotent: {mode: fast}
  /b:
    post:
      x-idempotent: {mode: phased}
  /c:
    post:
      x-idempotent: {mode: phased, recovery-points: []}
  /d:
    post:
      x-idempotent: {recovery-points: [a]}
  /e:
    post:
      x-idempotent: {mode: atomic, recovery-points: [a]}
`),
			errs: []string{
				`spec.yaml:4:28: x-idempotent.mode: "fast" is not a mode; expected atomic, phased or async`,
				`spec.yaml:7:28: x-idempotent.mode: phased needs recovery-points; expected a recovery-points list naming the steps, such as [payment_created, charge_created]`,
				`spec.yaml:10:53: x-idempotent.recovery-points: the list is empty; expected at least one recovery point when mode is phased`,
				`spec.yaml:13:39: x-idempotent.recovery-points: only allowed when mode is phased or async; expected mode: phased beside it, or no recovery-points`,
				`spec.yaml:16:53: x-idempotent.recovery-points: only allowed when mode is phased or async; expected mode: phased beside it, or no recovery-points`,
			},
		},
		{
			name: "abandoned and complete-after",
			src: spec(`
paths:
  /a:
    post:
      x-idempotent:
        mode: phased
        recovery-points: [a]
        abandoned: finish
        complete-after: 30m
    put:
      x-idempotent: {mode: phased, recovery-points: [a], abandoned: true, complete-after: 500ms}
    patch:
      x-idempotent: {mode: phased, recovery-points: [a], abandoned: Complete, complete-after: 30}
    delete:
      x-idempotent: {mode: phased, recovery-points: [a], abandoned: fail, complete-after: 0s}
  /b:
    post:
      x-idempotent: {mode: phased, recovery-points: [a], abandoned: fail, complete-after: soon}
    put:
      x-idempotent: {mode: phased, recovery-points: [a], abandoned: fail, complete-after: 999999999d}
    patch:
      x-idempotent:
        mode: phased
        recovery-points: [a]
        complete-after: 30m
  /c:
    post:
      x-idempotent: {abandoned: complete, complete-after: 30m}
    put:
      x-idempotent: {mode: atomic, abandoned: fail}
    patch:
      x-idempotent: {complete-after: 1h}
    delete:
      x-idempotent: {mode: fast, abandoned: fail}
`),
			errs: []string{
				`spec.yaml:7:20: x-idempotent.abandoned: "finish" is not an action; expected complete or fail`,
				`spec.yaml:10:69: x-idempotent.abandoned: true is a bool; expected complete or fail`,
				`spec.yaml:10:91: x-idempotent.complete-after: "500ms" is shorter than 1s; expected at least 1s, such as 30m`,
				`spec.yaml:12:69: x-idempotent.abandoned: "Complete" is not an action; expected complete or fail`,
				`spec.yaml:12:95: x-idempotent.complete-after: 30 is a number; expected a Go duration such as 90s, 15m or 24h, or days such as 7d`,
				`spec.yaml:14:91: x-idempotent.complete-after: "0s" is not positive; expected a duration greater than zero, such as 90s`,
				`spec.yaml:17:91: x-idempotent.complete-after: "soon" is not a duration; expected a Go duration such as 90s, 15m or 24h, or days such as 7d`,
				`spec.yaml:19:91: x-idempotent.complete-after: "999999999d" is too long; expected at most 106751d`,
				`spec.yaml:24:25: x-idempotent.complete-after: only allowed beside abandoned; expected abandoned: complete or fail beside it`,
				`spec.yaml:27:33: x-idempotent.abandoned: only allowed when mode is phased; expected mode: phased beside it, or no abandoned`,
				`spec.yaml:27:59: x-idempotent.complete-after: only allowed when mode is phased; expected mode: phased beside it, or no complete-after`,
				`spec.yaml:29:47: x-idempotent.abandoned: only allowed when mode is phased; expected mode: phased beside it, or no abandoned`,
				`spec.yaml:31:38: x-idempotent.complete-after: only allowed when mode is phased; expected mode: phased beside it, or no complete-after`,
				`spec.yaml:33:28: x-idempotent.mode: "fast" is not a mode; expected atomic, phased or async`,
			},
		},
		{
			name: "recovery point names",
			src: spec(`
paths:
  /a:
    post:
      x-idempotent:
        mode: phased
        recovery-points:
          - payment_created
          - 1st
          - has space
          - ""
          - 7
          - payment_created
          - payment-created
          - paymentCreated
          - émis
          - charge-2_done
`),
			errs: []string{
				`spec.yaml:8:13: x-idempotent.recovery-points[1]: "1st" ` + badPoint,
				`spec.yaml:9:13: x-idempotent.recovery-points[2]: "has space" ` + badPoint,
				`spec.yaml:10:13: x-idempotent.recovery-points[3]: "" ` + badPoint,
				`spec.yaml:11:13: x-idempotent.recovery-points[4]: 7 is a number; expected a name such as payment_created`,
				`spec.yaml:12:13: x-idempotent.recovery-points[5]: "payment_created" is listed twice (first at line 7); expected each recovery point once`,
				`spec.yaml:13:13: x-idempotent.recovery-points[6]: "payment-created" and "payment_created" (line 7) both become the Go name PaymentCreated; expected names that differ in CamelCase`,
				`spec.yaml:14:13: x-idempotent.recovery-points[7]: "paymentCreated" and "payment_created" (line 7) both become the Go name PaymentCreated; expected names that differ in CamelCase`,
				`spec.yaml:15:13: x-idempotent.recovery-points[8]: "émis" ` + badPoint,
			},
		},
		{
			name: "fingerprint pointers",
			src: spec(`
paths:
  /a:
    post:
      x-idempotent:
        fingerprint:
          exclude:
            - metadata_trace_id
            - ""
            - /a~2b
            - /a~
            - 5
            - /ok~0~1
`),
			errs: []string{
				`spec.yaml:8:15: x-idempotent.fingerprint.exclude[1]: the value is empty; expected a JSON pointer such as /metadata/trace_id, or a parameter's name such as X-Trace-Id`,
				`spec.yaml:9:15: x-idempotent.fingerprint.exclude[2]: "/a~2b" is not a JSON pointer ("~" must be followed by 0 or 1, as in ~0 for "~" and ~1 for "/"); expected a pointer such as /metadata/trace_id`,
				`spec.yaml:10:15: x-idempotent.fingerprint.exclude[3]: "/a~" is not a JSON pointer ("~" must be followed by 0 or 1, as in ~0 for "~" and ~1 for "/"); expected a pointer such as /metadata/trace_id`,
				`spec.yaml:11:15: x-idempotent.fingerprint.exclude[4]: 5 is a number; expected a JSON pointer such as /metadata/trace_id`,
			},
		},
		{
			name: "duplicate keys",
			src: spec(`
paths:
  /a:
    post:
      x-idempotent: true
      x-idempotent: {ttl: 1h}
  /b:
    post:
      x-idempotent:
        ttl: 1h
        ttl: 2h
`),
			errs: []string{
				`spec.yaml:5:7: duplicate key "x-idempotent" (first at line 4); expected each key once`,
				`spec.yaml:10:9: x-idempotent: duplicate key "ttl" (first at line 9); expected each key once`,
			},
		},
		{
			name: "misplaced and misspelt extensions",
			src: spec(`
x-idempotent: true
x-idempotency-defaults: {}
paths:
  x-idempotency: {}
  /a:
    x-idempotent: true
    post:
      x-idempotant: true
      X-Idempotent: true
      x-idempotency: {ttl: 1h}
`),
			errs: []string{
				`spec.yaml:1:1: x-idempotent has no effect at the document root; expected it inside an operation (post, put, patch or delete)`,
				`spec.yaml:2:1: unknown extension "x-idempotency-defaults"; expected x-idempotent or x-idempotency-ttl in an operation, or x-idempotency at the document root`,
				`spec.yaml:4:3: x-idempotency has no effect in the paths object; expected it at the document root`,
				`spec.yaml:6:5: x-idempotent has no effect on a path item; expected it inside an operation (post, put, patch or delete)`,
				`spec.yaml:8:7: unknown extension "x-idempotant"; expected x-idempotent or x-idempotency-ttl in an operation, or x-idempotency at the document root`,
				`spec.yaml:9:7: unknown extension "X-Idempotent"; expected x-idempotent or x-idempotency-ttl in an operation, or x-idempotency at the document root`,
				`spec.yaml:10:7: x-idempotency has no effect in an operation; expected it at the document root`,
			},
		},
		{
			name: "a problem in an anchor is reported once",
			src: spec(`
paths:
  /a:
    post:
      x-idempotent: &std {mode: fast}
  /b:
    post:
      x-idempotent: *std
`),
			errs: []string{
				`spec.yaml:4:33: x-idempotent.mode: "fast" is not a mode; expected atomic, phased or async`,
			},
		},
		{
			name: "a merge key that includes itself",
			src: spec(`
paths:
  /a:
    post: &op
      <<: *op
      x-idempotent: {mode: fast}
`),
			errs: []string{
				`spec.yaml:5:28: x-idempotent.mode: "fast" is not a mode; expected atomic, phased or async`,
			},
		},
		{
			name: "YAML scanner error",
			src: spec(`
paths:
  /a:
    post:
      x-idempotent: true: false
`),
			errs: []string{
				`spec.yaml:4:1: the document is not valid YAML: mapping values are not allowed in this context; expected a YAML or JSON OpenAPI document`,
			},
		},
		{
			// yaml.v3 gives the line of the mapping that holds the bad key
			name: "YAML parser error",
			src: spec(`
paths:
  /a:
    post:
      x-idempotent: true
     bad: [
`),
			errs: []string{
				`spec.yaml:3:1: the document is not valid YAML: did not find expected key in a block mapping; expected a YAML or JSON OpenAPI document`,
			},
		},
		{
			name: "JSON syntax error",
			src: spec(`
{
  "info": {"title": "a\/b"},
  "paths": {"/a": }
}
`),
			errs: []string{
				`spec.yaml:3:19: the document is not valid JSON: invalid character '}' looking for beginning of value; expected a JSON or YAML OpenAPI document`,
			},
		},
		{
			// the walk is recursive: nesting is bounded as yaml.v3 bounds it
			name: "JSON nested too deeply",
			src:  strings.Repeat("[", 100000),
			errs: []string{
				`spec.yaml:1:10001: the document is not valid JSON: exceeded max depth of 10000; expected a JSON or YAML OpenAPI document`,
			},
		},
		{
			name: "truncated JSON",
			src:  `{"info": {"title": "a\/b"}`,
			errs: []string{
				`spec.yaml:1:27: the document is not valid JSON: unexpected end of input; expected a JSON or YAML OpenAPI document`,
			},
		},
	})
}

func TestReadDurations(t *testing.T) {
	const hint = "expected a Go duration such as 90s, 15m or 24h, or days such as 7d"
	cases := []struct {
		value string
		want  time.Duration
		msg   string // after `x-idempotency-ttl: "<value>" `
	}{
		{value: "90s", want: 90 * time.Second},
		{value: "15m", want: 15 * time.Minute},
		{value: "1h30m", want: 90 * time.Minute},
		{value: "7d", want: 7 * 24 * time.Hour},
		{value: "30d", want: 30 * 24 * time.Hour},
		{value: "1d12h", want: 36 * time.Hour},
		{value: "0d5m", want: 5 * time.Minute},
		{value: "106751d23h", want: (106751*24 + 23) * time.Hour},
		{value: "3x", msg: "is not a duration; " + hint},
		{value: "1.5d", msg: "is not a duration; " + hint},
		{value: "d", msg: "is not a duration; " + hint},
		{value: "1d-2h", msg: "is not a duration; " + hint},
		{value: "1d1d", msg: "is not a duration; " + hint},
		{value: "7 d", msg: "is not a duration; " + hint},
		{value: "-1d", msg: "is not a duration; " + hint},
		{value: "0s", msg: "is not positive; expected a duration greater than zero, such as 90s"},
		{value: "-5m", msg: "is not positive; expected a duration greater than zero, such as 90s"},
		{value: "0d", msg: "is not positive; expected a duration greater than zero, such as 90s"},
		{value: "106751d24h", msg: "is too long; expected at most 106751d"},
		{value: "99999999999999999999d", msg: "is too long; expected at most 106751d"},
	}
	for _, c := range cases {
		t.Run(c.value, func(t *testing.T) {
			// x-idempotency-ttl's value starts at line 5, column 26; the
			// lease is shortened so that short ttls are valid.
			src := spec(`
paths:
  /a:
    post:
      x-idempotent: {lease: 1s}
      x-idempotency-ttl: "` + c.value + `"
`)
			ops, err := Read(file, []byte(src))
			got := errorLines(t, err)
			if c.msg != "" {
				want := []string{`spec.yaml:5:26: x-idempotency-ttl: "` + c.value + `" ` + c.msg}
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("errors:\n got  %q\n want %q", got, want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(ops) != 1 || ops[0].TTL != c.want {
				t.Fatalf("got %+v, want ttl %v", ops, c.want)
			}
		})
	}
}

func TestErrorsAs(t *testing.T) {
	// x-idempotency is read first but written last: the errors must still
	// come out in the order of the text.
	src := spec(`
paths:
  /a:
    post:
      x-idempotent: {mode: fast}
x-idempotency:
  ttl: soon
`)
	_, err := Read(file, []byte(src))
	var first *Error
	if !errors.As(err, &first) {
		t.Fatalf("errors.As(%v) found no *Error", err)
	}
	if first.Pos != at(4, 28) {
		t.Errorf("first error at %v, want %v", first.Pos, at(4, 28))
	}
	lines := errorLines(t, err)
	if len(lines) != 2 || !strings.HasPrefix(lines[1], "spec.yaml:6:8: x-idempotency.ttl: ") {
		t.Errorf("errors = %q, want the mode error then the ttl error", lines)
	}
	if err.Error() != strings.Join(lines, "\n") {
		t.Errorf("err.Error() = %q", err.Error())
	}
}

func TestGoName(t *testing.T) {
	cases := map[string]string{
		"payment_created": "PaymentCreated",
		"payment-created": "PaymentCreated",
		"paymentCreated":  "PaymentCreated",
		"a":               "A",
		"charge-2_done":   "Charge2Done",
		"http_call":       "HttpCall",
		"a__b-":           "AB",
	}
	for in, want := range cases {
		if got := GoName(in); got != want {
			t.Errorf("GoName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestPositionString(t *testing.T) {
	if got := at(3, 9).String(); got != "spec.yaml:3:9" {
		t.Errorf("String() = %q", got)
	}
	e := &Error{Pos: at(3, 9), Msg: "m"}
	if got := e.Error(); got != "spec.yaml:3:9: m" {
		t.Errorf("Error() = %q", got)
	}
}

// Annotations on requests the API sends, 3.1 webhooks and callbacks, have
// no effect: each is an error at its line and column, never ignored.
func TestAnnotationWithoutEffect(t *testing.T) {
	const (
		webhook  = "has no effect on webhook \"orderShipped\": webhooks describe requests the API sends, not ones it serves; expected it on an operation under paths"
		callback = "has no effect on callback \"onPaid\": a callback is a request the API sends, not one it serves; expected it on an operation under paths"
	)
	runReadCases(t, []readCase{{
		name: "webhooks and callbacks",
		src: spec(`
openapi: 3.1.0
webhooks:
  orderShipped:
    x-idempotent: true
    post:
      x-idempotent: true
      x-idempotency-ttl: 1h
paths:
  /orders:
    post:
      x-idempotent: true
      callbacks:
        onPaid:
          "{$request.body#/callback}":
            post:
              x-idempotent: {ttl: 1h}
`),
		errs: []string{
			`spec.yaml:4:5: x-idempotent ` + webhook,
			`spec.yaml:6:7: x-idempotent ` + webhook,
			`spec.yaml:7:7: x-idempotency-ttl ` + webhook,
			`spec.yaml:16:15: x-idempotent ` + callback,
		},
	}})
}

// max-body bounds an operation's bodies: bytes or KiB, MiB, GiB, from the
// operation or the document's defaults; a bad value names its place and
// the forms it takes.
func TestMaxBody(t *testing.T) {
	runReadCases(t, []readCase{
		{
			name: "sizes",
			src: spec(`
x-idempotency:
  max-body: 2MiB
paths:
  /a:
    post:
      x-idempotent:
        max-body: 512KiB
  /b:
    post:
      x-idempotent:
        max-body: 1048576
  /c:
    post:
      x-idempotent: true
`),
			want: []Operation{
				with(annotated("/a", "POST", at(6, 7)), func(o *Operation) { o.MaxBody = 512 << 10 }),
				with(annotated("/b", "POST", at(10, 7)), func(o *Operation) { o.MaxBody = 1 << 20 }),
				with(annotated("/c", "POST", at(14, 7)), func(o *Operation) { o.MaxBody = 2 << 20 }),
			},
		},
		{
			name: "bad sizes",
			src: spec(`
paths:
  /a:
    post:
      x-idempotent:
        max-body: 3XB
  /b:
    post:
      x-idempotent:
        max-body: 0
  /c:
    post:
      x-idempotent:
        max-body: 2GiB
  /d:
    post:
      x-idempotent:
        max-body: [1]
`),
			errs: []string{
				`spec.yaml:5:19: x-idempotent.max-body: "3XB" is not a size; expected bytes such as 1048576, or a size such as 512KiB, 1MiB or 1GiB`,
				`spec.yaml:9:19: x-idempotent.max-body: "0" is not positive; expected bytes such as 1048576, or a size such as 512KiB, 1MiB or 1GiB`,
				`spec.yaml:13:19: x-idempotent.max-body: "2GiB" is over 1GiB, which the protocol would buffer whole; expected at most 1GiB`,
				`spec.yaml:17:19: x-idempotent.max-body: the value is a list; expected bytes such as 1048576, or a size such as 512KiB, 1MiB or 1GiB`,
			},
		},
	})
}

// mode: async takes a status path and, for a handler in phases, recovery
// points; each rule it brings names the value to fix.
func TestReadAsync(t *testing.T) {
	runReadCases(t, []readCase{
		{
			name: "atomic and phased handlers",
			src: spec(`
paths:
  /exports:
    post:
      x-idempotent:
        mode: async
        status: /exports/requests/{key}
  /refunds:
    post:
      x-idempotent: {mode: async, status: "/v1/refunds/{key}/status", recovery-points: [provider_called]}
`),
			want: []Operation{
				with(annotated("/exports", "POST", at(4, 7)), func(o *Operation) {
					o.Mode, o.ModePos, o.Status, o.StatusPos = ModeAsync, at(5, 15), "/exports/requests/{key}", at(6, 17)
				}),
				with(annotated("/refunds", "POST", at(9, 7)), func(o *Operation) {
					o.Mode, o.ModePos, o.Status, o.StatusPos = ModeAsync, at(9, 28), "/v1/refunds/{key}/status", at(9, 43)
					o.RecoveryPoints = []string{"provider_called"}
				}),
			},
		},
		{
			name: "what async needs and what only it takes",
			src: spec(`
paths:
  /a:
    post:
      x-idempotent: {mode: async}
    put:
      x-idempotent: {mode: phased, recovery-points: [a], status: "/a/{key}"}
    patch:
      x-idempotent: {mode: async, status: "/a/{key}", required: false}
    delete:
      x-idempotent: {mode: async, status: "/a/{key}", abandoned: complete}
`),
			errs: []string{
				`spec.yaml:4:28: x-idempotent.mode: async needs status, the path of the resource a client polls for the request's result; expected status beside it, such as /exports/requests/{key}`,
				`spec.yaml:6:66: x-idempotent.status: only allowed when mode is async; expected mode: async beside it, or no status`,
				`spec.yaml:8:65: x-idempotent: mode: async with an optional key; expected required: true, as an async request is found again only by its key`,
				`spec.yaml:10:66: x-idempotent.abandoned: only allowed when mode is phased; expected mode: phased beside it, or no abandoned`,
			},
		},
		{
			name: "status paths",
			src: spec(`
paths:
  /a:
    post:
      x-idempotent: {mode: async, status: "exports/{key}"}
    put:
      x-idempotent: {mode: async, status: "/exports/requests"}
    patch:
      x-idempotent: {mode: async, status: "/exports/{id}/{key}"}
    delete:
      x-idempotent: {mode: async, status: "/exports/key-{key}"}
  /b:
    post:
      x-idempotent: {mode: async, status: "/exports//{key}"}
    put:
      x-idempotent: {mode: async, status: 7}
`),
			errs: []string{
				`spec.yaml:4:43: x-idempotent.status: "exports/{key}" is not a status path; expected a path with {key} as one of its segments, such as /exports/requests/{key}`,
				`spec.yaml:6:43: x-idempotent.status: "/exports/requests" is not a status path; expected a path with {key} as one of its segments, such as /exports/requests/{key}`,
				`spec.yaml:8:43: x-idempotent.status: "/exports/{id}/{key}" is not a status path; expected a path with {key} as one of its segments, such as /exports/requests/{key}`,
				`spec.yaml:10:43: x-idempotent.status: "/exports/key-{key}" is not a status path; expected a path with {key} as one of its segments, such as /exports/requests/{key}`,
				`spec.yaml:13:43: x-idempotent.status: "/exports//{key}" is not a status path; expected a path with {key} as one of its segments, such as /exports/requests/{key}`,
				`spec.yaml:15:43: x-idempotent.status: 7 is a number; expected a path with {key} as one of its segments, such as /exports/requests/{key}`,
			},
		},
	})
}
