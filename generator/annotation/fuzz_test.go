package annotation

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// fuzzSeeds are small annotated documents, valid and not, YAML and JSON.
var fuzzSeeds = []string{
	"",
	"paths:\n  /a:\n    post:\n      x-idempotent: true\n",
	"x-idempotency: {ttl: 2d, lease: 1m, required: false}\npaths:\n  /a:\n    put:\n      x-idempotent: {ttl: 1h}\n      x-idempotency-ttl: 2h\n",
	"paths:\n  /p:\n    post:\n      x-idempotent:\n        mode: phased\n        recovery-points: [a_b, a-b, 1x]\n        fingerprint: {exclude: [/a, b, /c~2]}\n",
	"paths:\n  /a:\n    get:\n      x-idempotent: &s {lease: 2h}\n    post:\n      <<: {x-idempotent: *s}\n",
	"paths:\n  /a:\n    post: &o\n      <<: [*o, *o]\n      x-idempotent: yes\n",
	`{"paths": {"/a": {"post": {"x-idempotent": {"ttl": "7d", "mode": "atomic"}}}}}`,
	`{"info": {"title": "\/"}, "paths": {"/a": {"post": {"x-idempotent": true}}}}`,
	`{"paths": {"/a": `,
	"paths:\n  /a:\n    post:\n      x-idempotent: [\n",
	"x-idempotency: {scope: {header: X-Account-Id}}\npaths:\n  /a:\n    post:\n      x-idempotent: {scope: none}\n    put:\n      x-idempotent: true\n",
	"paths:\n  /a:\n    post:\n      x-idempotent:\n        scope: {header: Idempotency-Key, function: true, query: a}\n",
	`{"x-idempotency": {"scope": "none"}, "paths": {"/a": {"post": {"x-idempotent": {"scope": {"function": false}}}}}}`,
	"paths:\n  /p:\n    post:\n      x-idempotent: {mode: phased, recovery-points: [a], abandoned: complete, complete-after: 30m}\n    put:\n      x-idempotent: {mode: phased, recovery-points: [a], abandoned: fail}\n    patch:\n      x-idempotent: {complete-after: 1s}\n",
}

func FuzzRead(f *testing.F) {
	for _, seed := range fuzzSeeds {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		ops, err := Read("fuzz.yaml", src)
		if err != nil {
			checkErrors(t, err, ops)
			return
		}
		checkOperations(t, ops)
	})
}

func checkErrors(t *testing.T, err error, ops []Operation) {
	if ops != nil {
		t.Fatalf("operations returned with an error: %+v", ops)
	}
	joined, ok := err.(interface{ Unwrap() []error })
	if !ok {
		t.Fatalf("error %T is not a joined error: %v", err, err)
	}
	for _, e := range joined.Unwrap() {
		var ae *Error
		if !errors.As(e, &ae) {
			t.Fatalf("error %T is not an *Error: %v", e, e)
		}
		if ae.Pos.Line < 1 || ae.Pos.Column < 1 || ae.Pos.File != "fuzz.yaml" || ae.Msg == "" {
			t.Fatalf("bad error %#v", ae)
		}
	}
}

func checkOperations(t *testing.T, ops []Operation) {
	sorted := slices.IsSortedFunc(ops, func(a, b Operation) int {
		if c := strings.Compare(a.Path, b.Path); c != 0 {
			return c
		}
		return strings.Compare(a.Method, b.Method)
	})
	if !sorted {
		t.Fatalf("operations not sorted: %+v", ops)
	}
	for _, op := range ops {
		switch {
		case op.Method != "POST" && op.Method != "PUT" && op.Method != "PATCH" && op.Method != "DELETE":
			t.Fatalf("method %q accepted", op.Method)
		case op.TTL <= 0 || op.Lease <= 0 || op.Lease > op.TTL:
			t.Fatalf("ttl %v, lease %v accepted", op.TTL, op.Lease)
		case op.Mode == ModePhased && len(op.RecoveryPoints) == 0:
			t.Fatalf("phased without recovery points accepted")
		case op.Mode != ModePhased && len(op.RecoveryPoints) != 0:
			t.Fatalf("mode %q with recovery points accepted", op.Mode)
		case op.Pos.Line < 1 || op.Pos.Column < 1:
			t.Fatalf("bad position %v", op.Pos)
		}
		checkAbandoned(t, op)
		checkScope(t, op.Scope)
	}
}

func checkAbandoned(t *testing.T, op Operation) {
	switch op.Abandoned {
	case "":
		if op.AbandonedAt != nil || op.CompleteAfter != 0 {
			t.Fatalf("abandoned unset, yet at %v, complete-after %v", op.AbandonedAt, op.CompleteAfter)
		}
	case AbandonedComplete, AbandonedFail:
		switch {
		case op.Mode != ModePhased:
			t.Fatalf("abandoned accepted with mode %q", op.Mode)
		case op.CompleteAfter < MinCompleteAfter:
			t.Fatalf("complete-after %v accepted", op.CompleteAfter)
		case op.AbandonedAt == nil || op.AbandonedAt.Line < 1 || op.AbandonedAt.Column < 1:
			t.Fatalf("abandoned at a bad position %v", op.AbandonedAt)
		}
	default:
		t.Fatalf("abandoned %q accepted", op.Abandoned)
	}
}

func checkScope(t *testing.T, sc Scope) {
	switch {
	case !sc.Set && sc != (Scope{}):
		t.Fatalf("scope not set, yet %+v", sc)
	case sc.Set && sc.None == (sc.Header != "" || sc.Function):
		t.Fatalf("scope %+v is none and a scope, or neither", sc)
	case sc.Header != "" && (sc.HeaderPos.Line < 1 || sc.HeaderPos.Column < 1):
		t.Fatalf("scope header at a bad position %v", sc.HeaderPos)
	case strings.EqualFold(sc.Header, "Idempotency-Key"):
		t.Fatalf("the Idempotency-Key header accepted as a scope")
	}
}
