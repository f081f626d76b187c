package generator_test

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/idemgen/idemgen/generator"
)

// The corpus's specs are not in the repository, so their output cannot be
// golden files; its digests are. A change that must not change the
// output (a refactoring, a faster resolution) is checked against them:
// every corpus case of TestRealSpecs and Stripe's of TestStripeSpecBuilds
// must generate what the recorded digest says, byte for byte, warnings
// included. A change that means to change the output runs
//
//	IDEMGEN_SPECS=$PWD/../shared/specs IDEMGEN_SPECS_LONG=1 go test ./generator -run 'TestRealSpecs|TestStripeSpecBuilds' -update
//
// and the diff of testdata/corpus.sum shows which specs it changed.
const digestsFile = "testdata/corpus.sum"

var digests struct {
	sync.Mutex
	recorded map[string]string // by case, read once
	updated  map[string]string // by case, with -update
}

// checkDigest compares the digest of res, generated into dir from spec,
// with the one recorded for name; with -update it records it instead.
// The spec's path and dir differ between machines and runs, so they are
// replaced before hashing.
func checkDigest(t *testing.T, name string, res *generator.Result, dir, spec string) {
	t.Helper()
	got := resultDigest(res, dir, spec)
	digests.Lock()
	defer digests.Unlock()
	if *update {
		if digests.updated == nil {
			digests.updated = map[string]string{}
		}
		digests.updated[name] = got
		return
	}
	if digests.recorded == nil {
		var err error
		if digests.recorded, err = readDigests(digestsFile); err != nil {
			t.Fatal(err)
		}
	}
	switch want, ok := digests.recorded[name]; {
	case !ok:
		t.Errorf("%s has no digest for %s (run with -update to record it)", digestsFile, name)
	case want != got:
		t.Errorf("the output of %s differs from the digest %s records (run with -update to accept the change)", name, digestsFile)
	}
}

// resultDigest hashes res's files, paths and contents, and its warnings,
// with spec and dir (and spec's path relative to each file) replaced by
// placeholders.
func resultDigest(res *generator.Result, dir, spec string) string {
	clean := strings.NewReplacer(spec, "$SPEC", dir, "$DIR")
	h := sha256.New()
	for _, f := range res.Files {
		content := string(f.Content)
		// The headers name the spec relative to the file.
		if rel, err := filepath.Rel(filepath.Join(dir, filepath.Dir(f.Path)), spec); err == nil {
			content = strings.ReplaceAll(content, rel, "$SPEC")
		}
		content = clean.Replace(content)
		fmt.Fprintf(h, "file %s %d\n%s", f.Path, len(content), content)
	}
	for _, w := range res.Warnings {
		fmt.Fprintf(h, "warning %s\n", clean.Replace(w))
	}
	fmt.Fprintf(h, "operations %d %d stale %q\n", res.Operations, res.Idempotent, res.Stale)
	return hex.EncodeToString(h.Sum(nil))
}

// readDigests reads a digests file: "<digest> <case>" lines.
func readDigests(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("the corpus's output digests: %w (run with -update to record them)", err)
	}
	defer f.Close()
	out := map[string]string{}
	lines := bufio.NewScanner(f)
	for lines.Scan() {
		digest, name, ok := strings.Cut(lines.Text(), " ")
		if !ok || strings.HasPrefix(digest, "#") {
			continue
		}
		out[name] = digest
	}
	return out, lines.Err()
}

// writeUpdatedDigests merges the digests recorded with -update into the
// file, keeping those of cases this run did not generate (Stripe's without
// IDEMGEN_SPECS_LONG, say).
func writeUpdatedDigests() error {
	digests.Lock()
	defer digests.Unlock()
	if len(digests.updated) == 0 {
		return nil
	}
	all, err := readDigests(digestsFile)
	if err != nil {
		all = map[string]string{}
	}
	for name, d := range digests.updated {
		all[name] = d
	}
	var b strings.Builder
	b.WriteString("# SHA-256 of the corpus's output by case, with the spec's path and the\n# output directory replaced: see digest_test.go.\n")
	for _, name := range slices.Sorted(maps.Keys(all)) {
		fmt.Fprintf(&b, "%s %s\n", all[name], name)
	}
	return os.WriteFile(filepath.FromSlash(digestsFile), []byte(b.String()), 0o644)
}
