package generator_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idemgen/idemgen/generator"
)

func TestZZProbe(t *testing.T) {
	dir, _ := filepath.Abs("../../shared/specs")
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if e.Name() == "INDEX.tsv" || e.Name() == "README.md" {
			continue
		}
		cfgSrc := fmt.Sprintf("spec: %s\noutput: {dir: gen, package: gen}\n", filepath.Join(dir, e.Name()))
		cfg, err := generator.ParseConfig("/tmp/probe/idemgen.yaml", []byte(cfgSrc))
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		func() {
			defer func() {
				if p := recover(); p != nil {
					fmt.Printf("%s PANIC %v\n", e.Name(), p)
				}
			}()
			res, err := generator.Generate(cfg)
			if err != nil {
				msg := err.Error()
				if len(msg) > 600 { msg = msg[:600] }
				fmt.Printf("=== %s ERR (%s) %s\n", e.Name(), time.Since(start), msg)
				return
			}
			fmt.Printf("=== %s OK (%s) ops=%d files=%d\n", e.Name(), time.Since(start), res.Operations, len(res.Files))
			if os.Getenv("PROBE_WRITE") != "" {
				name := strings.NewReplacer(".", "_", "-", "_").Replace(e.Name())
				res.Write(filepath.Join("testdata", "probe", name))
			}
		}()
	}
}
