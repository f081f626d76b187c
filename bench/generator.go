package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// genReport is the result of -generator.
type genReport struct {
	Machine  machine      `json:"machine"`
	Runs     int          `json:"runs"`
	Specs    []genSpec    `json:"specs"`
	Refused  []genRefusal `json:"refused_by_idemgen"`
	Commands []string     `json:"commands"`
}

// genSpec compares the two generators on one spec.
type genSpec struct {
	File       string   `json:"file"`
	SizeBytes  int64    `json:"size_bytes"`
	Operations int      `json:"operations"`
	Idemgen    genTimes `json:"idemgen"`
	Oapi       genTimes `json:"oapi_codegen"`
}

// genTimes are a generator's runs on one spec.
type genTimes struct {
	WallSeconds []float64 `json:"wall_seconds"`
	MaxRSSKiB   []int64   `json:"max_rss_kib"`
}

func (t genTimes) wall() float64 { return median(t.WallSeconds) }
func (t genTimes) rss() float64 {
	f := make([]float64, len(t.MaxRSSKiB))
	for i, v := range t.MaxRSSKiB {
		f[i] = float64(v)
	}
	return median(f)
}

// genRefusal is a spec idemgen refuses, with the start of its message.
type genRefusal struct {
	File      string `json:"file"`
	SizeBytes int64  `json:"size_bytes"`
	Reason    string `json:"reason"`
}

// indexEntry is a row of the specs' INDEX.tsv.
type indexEntry struct {
	file       string
	size       int64
	operations int
}

// readIndex reads INDEX.tsv: file, source_repo, path_in_repo, commit,
// openapi_version, size_bytes, operations, ...
func readIndex(r io.Reader) ([]indexEntry, error) {
	var entries []indexEntry
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		cols := strings.Split(sc.Text(), "\t")
		if len(cols) < 7 || cols[0] == "file" {
			continue
		}
		size, err1 := strconv.ParseInt(cols[5], 10, 64)
		ops, err2 := strconv.Atoi(cols[6])
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("INDEX.tsv: %s: size %q, operations %q are not numbers", cols[0], cols[5], cols[6])
		}
		entries = append(entries, indexEntry{file: cols[0], size: size, operations: ops})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(entries) == 0 {
		return nil, fmt.Errorf("INDEX.tsv lists no specs")
	}
	// Largest first; ties by name, for a stable order.
	slices.SortFunc(entries, func(a, b indexEntry) int {
		if a.size != b.size {
			return int(b.size - a.size)
		}
		return strings.Compare(a.file, b.file)
	})
	return entries, nil
}

// oapiConfig is oapi-codegen's configuration for what idemgen asks of it
// (generator/oapi.go): models, the std-http server and the strict server.
const oapiConfig = `package: gen
generate:
  models: true
  std-http-server: true
  strict-server: true
output: %s
`

const idemgenConfig = `spec: %s
output:
  dir: out
  package: gen
`

// runGenerator times idemgen generate and oapi-codegen alone on the top
// largest specs idemgen accepts, runs times each, interleaved so that
// both see the same noise.
func runGenerator(ctx context.Context, p progress, root, tmp, specsDir string, runs, top int) (*genReport, error) {
	f, err := os.Open(filepath.Join(specsDir, "INDEX.tsv"))
	if err != nil {
		return nil, fmt.Errorf("the real specs: %w (set -specs)", err)
	}
	entries, err := readIndex(f)
	f.Close()
	if err != nil {
		return nil, err
	}
	p.printf("building idemgen and oapi-codegen")
	idemgen, err := goBuild(ctx, root, tmp, "idemgen", "./cmd/idemgen")
	if err != nil {
		return nil, err
	}
	oapi, err := goBuild(ctx, root, tmp, "oapi-codegen", "github.com/oapi-codegen/oapi-codegen/v2/cmd/oapi-codegen")
	if err != nil {
		return nil, fmt.Errorf("%w\n(oapi-codegen's command is built from the module's own oapi-codegen dependency)", err)
	}
	rep := &genReport{Runs: runs, Commands: []string{
		"idemgen generate -q -config idemgen.yaml  (spec: <spec>, output.dir: out, output.package: gen)",
		"oapi-codegen -config oapi.yaml <spec>  (package: gen; generate: models, std-http-server, strict-server)",
	}}
	for i, e := range entries {
		if len(rep.Specs) == top {
			break
		}
		spec, err := filepath.Abs(filepath.Join(specsDir, e.file))
		if err != nil {
			return nil, err
		}
		dir := filepath.Join(tmp, "gen"+strconv.Itoa(i))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		idemCfg, oapiCfg := filepath.Join(dir, "idemgen.yaml"), filepath.Join(dir, "oapi.yaml")
		if err := os.WriteFile(idemCfg, fmt.Appendf(nil, idemgenConfig, strconv.Quote(spec)), 0o644); err != nil {
			return nil, err
		}
		if err := os.WriteFile(oapiCfg, fmt.Appendf(nil, oapiConfig, strconv.Quote(filepath.Join(dir, "oapi", "oapi.gen.go"))), 0o644); err != nil {
			return nil, err
		}
		s := genSpec{File: e.file, SizeBytes: e.size, Operations: e.operations}
		refused := false
		for run := range runs {
			p.printf("generator: %s, run %d of %d", e.file, run+1, runs)
			wall, rss, stderr, err := timeCommand(ctx, root, idemgen, "generate", "-q", "-config", idemCfg)
			if err != nil && run == 0 {
				reason := refusal(stderr, spec)
				rep.Refused = append(rep.Refused, genRefusal{File: e.file, SizeBytes: e.size, Reason: reason})
				p.printf("generator: idemgen refuses %s, skipping it: %s", e.file, reason)
				refused = true
				break
			}
			if err != nil {
				return nil, fmt.Errorf("idemgen on %s: %w\n%s", e.file, err, stderr)
			}
			s.Idemgen.WallSeconds = append(s.Idemgen.WallSeconds, wall.Seconds())
			s.Idemgen.MaxRSSKiB = append(s.Idemgen.MaxRSSKiB, rss)
			wall, rss, stderr, err = timeCommand(ctx, root, oapi, "-config", oapiCfg, spec)
			if err != nil {
				return nil, fmt.Errorf("oapi-codegen on %s: %w\n%s", e.file, err, stderr)
			}
			s.Oapi.WallSeconds = append(s.Oapi.WallSeconds, wall.Seconds())
			s.Oapi.MaxRSSKiB = append(s.Oapi.MaxRSSKiB, rss)
		}
		if !refused {
			rep.Specs = append(rep.Specs, s)
		}
	}
	return rep, nil
}

// refusal shortens idemgen's message about spec to its first two lines,
// without the program's name and the spec's path.
func refusal(stderr, spec string) string {
	var lines []string
	for line := range strings.Lines(stderr) {
		if line = strings.TrimSpace(line); line != "" && len(lines) < 2 {
			line = strings.TrimPrefix(line, "idemgen: ")
			line = strings.TrimPrefix(line, spec+": ")
			lines = append(lines, line)
		}
	}
	s := strings.Join(lines, " ")
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}

// timeCommand runs a command in dir and returns its wall time and peak
// resident memory (ru_maxrss, KiB on Linux).
func timeCommand(ctx context.Context, dir, name string, args ...string) (time.Duration, int64, string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = io.Discard, &stderr
	start := time.Now()
	err := cmd.Run()
	wall := time.Since(start)
	var rss int64
	if cmd.ProcessState != nil {
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			rss = ru.Maxrss
		}
	}
	return wall, rss, stderr.String(), err
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(v))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func (r *genReport) write(w io.Writer, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	var b strings.Builder
	m := r.Machine
	fmt.Fprintf(&b, "machine: %s, %d cores, %s RAM, %s (kernel %s), %s\n", m.CPU, m.Cores, m.Memory, m.OS, m.Kernel, m.Go)
	fmt.Fprintf(&b, "idemgen generate next to oapi-codegen alone with the options idemgen uses; median of %d runs each,\n", r.Runs)
	b.WriteString("wall time and peak resident memory (max RSS) of the process:\n\n")
	var rows [][]string
	for _, s := range r.Specs {
		rows = append(rows, []string{
			s.File, fmt.Sprintf("%.2f MB", float64(s.SizeBytes)/1e6), fmt.Sprint(s.Operations),
			fmt.Sprintf("%.2f", s.Idemgen.wall()), fmt.Sprintf("%.2f", s.Oapi.wall()), ratio(s.Idemgen.wall(), s.Oapi.wall()),
			fmt.Sprintf("%.0f", s.Idemgen.rss()/1024), fmt.Sprintf("%.0f", s.Oapi.rss()/1024), ratio(s.Idemgen.rss(), s.Oapi.rss()),
		})
	}
	writeTable(&b, []string{"spec", "size", "ops", "idemgen s", "oapi-codegen s", "x time", "idemgen MiB", "oapi-codegen MiB", "x memory"}, rows)
	for _, f := range r.Refused {
		fmt.Fprintf(&b, "\nskipped, idemgen refuses it: %s (%.2f MB): %s", f.File, float64(f.SizeBytes)/1e6, f.Reason)
	}
	if len(r.Refused) > 0 {
		b.WriteString("\n")
	}
	b.WriteString("\ncommands:\n")
	for _, c := range r.Commands {
		fmt.Fprintf(&b, "  %s\n", c)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func ratio(a, b float64) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", a/b)
}
