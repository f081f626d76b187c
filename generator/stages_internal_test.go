package generator

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStagesGolden runs the generator's stages one by one on a small spec
// and compares what each makes with testdata/stages/<n>-<stage>.golden,
// so that a change to one stage shows in that stage's file, before the
// files it renders. Rewrite them with
//
//	go test ./generator -run TestStagesGolden -update
func TestStagesGolden(t *testing.T) {
	dir := filepath.Join("testdata", "stages")
	cfg, err := LoadConfig(filepath.Join(dir, "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	req, err := Load(cfg)
	if err != nil {
		t.Fatal(err)
	}
	req.OapiCodegen = "v2"

	src, err := readSource(&req, pathsOf(req.Config))
	if err != nil {
		t.Fatal(err)
	}
	checkStage(t, dir, "1-annotations", jsonText(t, src.annotated))
	checkStage(t, dir, "2-oapi", oapiText(src.oapi))

	m, err := buildModel(req.Config, src)
	if err != nil {
		t.Fatal(err)
	}
	m.Warnings = withResolutions(src.paths.spec, src.oapi.warnings, m.Warnings)
	checkStage(t, dir, "3-model", modelText(m))

	if err := completeModel(src, m); err != nil {
		t.Fatal(err)
	}
	checkStage(t, dir, "4-complete", completeText(m))

	augmented, found, err := augmentSpec(src.paths.spec, req.Spec, m, src.oapi.carry)
	if err != nil {
		t.Fatal(err)
	}
	checkStage(t, dir, "5-augment", fmt.Sprintf("resolutions: %d\n%s", len(found), augmented))

	files, err := renderFiles(&req, src, m)
	if err != nil {
		t.Fatal(err)
	}
	var rendered strings.Builder
	for _, f := range files {
		fmt.Fprintf(&rendered, "%s: %d lines\n", f.Path, bytes.Count(f.Content, []byte("\n")))
	}
	checkStage(t, dir, "6-render", rendered.String())

	migrations, stale, err := sqlFiles(req.Config.Migrations, src.paths.queries, req.Migrations)
	if err != nil {
		t.Fatal(err)
	}
	var planned strings.Builder
	for _, f := range migrations {
		fmt.Fprintf(&planned, "%s migration=%v\n", f.Path, f.Migration)
	}
	fmt.Fprintf(&planned, "stale: %q\n", stale)
	checkStage(t, dir, "7-migrations", planned.String())
}

// checkStage compares got with the stage's golden file, or rewrites it
// under -update (the flag of golden_test.go, in the same test binary).
func checkStage(t *testing.T, dir, stage, got string) {
	t.Helper()
	path := filepath.Join(dir, stage+".golden")
	if f := flag.Lookup("update"); f != nil && f.Value.String() == "true" {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to write it)", err)
	}
	if got != string(want) {
		t.Errorf("stage %s differs from %s:\n--- got\n%s\n--- want\n%s", stage, path, got, want)
	}
}

func jsonText(t *testing.T, v any) string {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b) + "\n"
}

// oapiText is what the stages after it use of oapi-codegen's output: its
// operations, its declarations and the resolutions that let it compile.
func oapiText(o oapiOutput) string {
	var b strings.Builder
	fmt.Fprintf(&b, "openapi %s, %d lines of Go\n", o.version, bytes.Count(o.src, []byte("\n")))
	for _, d := range o.defs {
		fmt.Fprintf(&b, "operation %s: %s %s, %d path params, %d header params, %d bodies\n",
			d.OperationId, d.Method, d.Path, len(d.PathParams), len(d.HeaderParams), len(d.Bodies))
	}
	fmt.Fprintf(&b, "warnings: %q\n", o.warnings)
	return b.String()
}

func modelText(m *model) string {
	var b strings.Builder
	fmt.Fprintf(&b, "package %s, server %s, spec %s, client %v, idempotent %v, phased %v\n",
		m.Package, m.Server, m.Spec, m.Client, m.Idempotent, m.Phased)
	for _, op := range m.Operations {
		fmt.Fprintf(&b, "\n%s (%s): %s %s, route %s, idempotent %v\n", op.GoName, op.Name, op.Method, op.Path, op.Route, op.Idempotent)
		if !op.Idempotent {
			continue
		}
		fmt.Fprintf(&b, "  key optional %v, ttl %v, lease %v, validate %v, max body %d\n", op.KeyOptional, op.TTL, op.Lease, op.Validate, op.MaxBody)
		fmt.Fprintf(&b, "  scope header %q (%s)\n", op.ScopeHeader, op.ScopeDoc)
		fmt.Fprintf(&b, "  fingerprint %+v\n", op.Fingerprint)
		fmt.Fprintf(&b, "  accept %q, json %q\n", op.Accept, op.AcceptJSON)
		for _, c := range op.ClientMethods {
			fmt.Fprintf(&b, "  client method %+v\n", c)
		}
	}
	fmt.Fprintf(&b, "\nwarnings: %q\n", m.Warnings)
	return b.String()
}

func completeText(m *model) string {
	var b strings.Builder
	for _, op := range m.Operations {
		if op.Idempotent {
			fmt.Fprintf(&b, "%s: %s\n", op.GoName, op.FingerprintWriter)
		}
	}
	fmt.Fprintf(&b, "\nrequest schemas: %s\n\nfingerprint writers:\n%s\nwarnings: %q\n", m.RequestSchemas, m.Fingerprints, m.Warnings)
	return b.String()
}
