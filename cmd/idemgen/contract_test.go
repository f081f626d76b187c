package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A spec change that changes an annotated operation's keys is a warning
// on stderr from check, which still fails only on stale output, and from
// generate, which still writes; once the output is current, neither says
// anything.
func TestScopeChangeWarning(t *testing.T) {
	config := copyCase(t)
	spec := filepath.Join(filepath.Dir(config), "openapi.yaml")
	if code, _, stderr := idemgen(t, "-q", "-config", config); code != 0 || stderr != "" {
		t.Fatalf("first generate -q: exit %d, stderr %q; want 0 and nothing", code, stderr)
	}

	src, err := os.ReadFile(spec)
	if err != nil {
		t.Fatal(err)
	}
	src = bytes.Replace(src, []byte("fingerprint: {exclude: [x-trace-id]}"), []byte("scope: {header: X-Request-Id}"), 1)
	if err := os.WriteFile(spec, src, 0o644); err != nil {
		t.Fatal(err)
	}
	warning := "idemgen: " + spec + ":13:7: warning: x-idempotent on POST /accounts/{account_id}/orders (createOrder): changed from gen/idempotency.gen.go: " +
		`scope none → header X-Request-Id; fingerprint: header parameter "X-Trace-Id" no longer left out (fingerprint.exclude). ` +
		"Its keys change: a request sent with an Idempotency-Key before this is deployed and retried with the same key after it is scoped by its X-Request-Id header now, " +
		"and runs again, as a new request (without X-Request-Id it gets 400); " +
		`see "Changing an operation's scope or fingerprint" in idemgen's README (https://github.com/idemgen/idemgen#changing-an-operations-scope-or-fingerprint) for how to roll the change out` + "\n"

	code, stdout, stderr := idemgen(t, "check", "-q", "-config", config)
	rest, ok := strings.CutPrefix(stderr, warning)
	if code != 1 || stdout != "" || !ok || !strings.Contains(rest, "generated files are out of date") {
		t.Errorf("check -q of the changed spec: exit %d, stdout %q, stderr\n%s\nwant 1, the warning\n%sand the stale files", code, stdout, stderr, warning)
	}
	code, stdout, stderr = idemgen(t, "-q", "-config", config)
	if code != 0 || stdout != "" || stderr != warning {
		t.Errorf("generate -q of the changed spec: exit %d, stdout %q, stderr\n%s\nwant 0 and the warning\n%s", code, stdout, stderr, warning)
	}
	for _, args := range [][]string{{"check", "-q", "-config", config}, {"-q", "-config", config}} {
		if code, stdout, stderr := idemgen(t, args...); code != 0 || stdout != "" || stderr != "" {
			t.Errorf("%q once written: exit %d, stdout %q, stderr %q; want 0 and nothing", args, code, stdout, stderr)
		}
	}
}
