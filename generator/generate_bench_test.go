package generator_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idemgen/idemgen/generator"
	"github.com/idemgen/idemgen/internal/realspecs"
	"github.com/oapi-codegen/oapi-codegen/v2/pkg/codegen"
	"github.com/oapi-codegen/oapi-codegen/v2/pkg/util"
)

// BenchmarkGenerateStripe times idemgen's whole generation of the
// corpus's Stripe spec (4 MB, 468 operations, unannotated) next to
// oapi-codegen's own on it, with the options idemgen gives it: loading
// the spec and codegen.Generate, as its command does. oapi-codegen runs
// first, and idemgen's line reports its time as a multiple of
// oapi-codegen's (x-oapi-codegen), which should be 1.3 at most. One
// generation takes seconds, so ask for a few:
//
//	IDEMGEN_SPECS=$PWD/../shared/specs go test -run '^$' -bench GenerateStripe -benchtime 3x ./generator
//
// It skips without IDEMGEN_SPECS. BenchmarkGenerateCorpus does the same
// for every other corpus spec; go run ./bench -generator times the two
// commands, processes and all.
func BenchmarkGenerateStripe(b *testing.B) {
	if os.Getenv(realspecs.EnvVar) == "" {
		b.Skipf("%s is not set: it names the corpus directory, which holds %s", realspecs.EnvVar, stripeSpec)
	}
	benchGenerate(b, filepath.Join(realspecs.Dir(b), stripeSpec))
}

// BenchmarkGenerateCorpus is BenchmarkGenerateStripe for each other
// spec of the corpus that idemgen generates, one sub-benchmark each:
//
//	IDEMGEN_SPECS=$PWD/../shared/specs go test -run '^$' -bench GenerateCorpus ./generator
func BenchmarkGenerateCorpus(b *testing.B) {
	if os.Getenv(realspecs.EnvVar) == "" {
		b.Skipf("%s is not set: it names the corpus directory", realspecs.EnvVar)
	}
	dir := realspecs.Dir(b)
	for _, pattern := range []string{"*.yaml", "*.json"} {
		specs, err := filepath.Glob(filepath.Join(dir, pattern))
		if err != nil {
			b.Fatal(err)
		}
		for _, spec := range specs {
			if filepath.Base(spec) == stripeSpec {
				continue
			}
			b.Run(strings.TrimSuffix(filepath.Base(spec), filepath.Ext(spec)), func(b *testing.B) {
				benchGenerate(b, spec)
			})
		}
	}
}

// benchGenerate times oapi-codegen on spec, then idemgen, as a multiple
// of oapi-codegen's time. A spec idemgen refuses is skipped.
func benchGenerate(b *testing.B, spec string) {
	dir := b.TempDir()
	cfg, err := generator.ParseConfig(filepath.Join(dir, "idemgen.yaml"), []byte("spec: "+spec+"\noutput:\n  dir: out\n  package: gen\n"))
	if err != nil {
		b.Fatal(err)
	}
	if _, err := generateFrom(cfg); err != nil {
		b.Skipf("idemgen refuses the spec: %v", err)
	}
	var oapi time.Duration // per generation
	b.Run("oapi-codegen", func(b *testing.B) {
		conf := codegen.Configuration{
			PackageName: "gen",
			Generate:    codegen.GenerateOptions{StdHTTPServer: true, Strict: true, Models: true},
		}
		for b.Loop() {
			// Loaded each time, as its command does, and because
			// codegen.Generate prunes the document it is given.
			doc, err := util.LoadSwaggerWithOverlay(spec, util.LoadSwaggerWithOverlayOpts{Strict: true})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := codegen.Generate(doc, conf); err != nil {
				b.Fatal(err)
			}
		}
		oapi = b.Elapsed() / time.Duration(b.N)
	})
	b.Run("idemgen", func(b *testing.B) {
		for b.Loop() {
			if _, err := generateFrom(cfg); err != nil {
				b.Fatal(err)
			}
		}
		if oapi > 0 {
			b.ReportMetric(float64(b.Elapsed()/time.Duration(b.N))/float64(oapi), "x-oapi-codegen")
		}
	})
}
