package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
)

// goBenchResult is one line of go test -bench -benchmem output.
type goBenchResult struct {
	Name        string  `json:"name"`
	NsPerOp     float64 `json:"ns_per_op"`
	BytesPerOp  int64   `json:"bytes_per_op"`
	AllocsPerOp int64   `json:"allocs_per_op"`
}

func goBenchArgs(benchtime string) []string {
	return []string{"test", "-run", "^$", "-bench", "GeneratedHandler", "-benchmem", "-benchtime", benchtime, "./example/server"}
}

func goBenchCommand(benchtime string) string {
	args := goBenchArgs(benchtime)
	args[2] = "'^$'"
	return "go " + strings.Join(args, " ")
}

// runGoBench runs the generated handler's benchmarks, which need no
// database, and parses their results.
func runGoBench(ctx context.Context, root, benchtime string) ([]goBenchResult, error) {
	cmd := exec.CommandContext(ctx, "go", goBenchArgs(benchtime)...)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("%s: %w\n%s", goBenchCommand(benchtime), err, out)
	}
	res := parseGoBench(string(out))
	if len(res) == 0 {
		return nil, fmt.Errorf("%s printed no benchmark results:\n%s", goBenchCommand(benchtime), out)
	}
	return res, nil
}

// benchLine matches e.g.
// BenchmarkGeneratedHandler/first-2   123456   9876 ns/op   1234 B/op   12 allocs/op
var benchLine = regexp.MustCompile(`^Benchmark(\S+?)(?:-\d+)?\s+\d+\s+([\d.]+) ns/op\s+(\d+) B/op\s+(\d+) allocs/op`)

func parseGoBench(out string) []goBenchResult {
	var res []goBenchResult
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		m := benchLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		ns, err1 := strconv.ParseFloat(m[2], 64)
		b, err2 := strconv.ParseInt(m[3], 10, 64)
		a, err3 := strconv.ParseInt(m[4], 10, 64)
		if err1 != nil || err2 != nil || err3 != nil {
			continue
		}
		name := m[1]
		if _, sub, ok := strings.Cut(name, "/"); ok {
			name = sub
		}
		res = append(res, goBenchResult{Name: name, NsPerOp: ns, BytesPerOp: b, AllocsPerOp: a})
	}
	return res
}

// writeGoBench writes the results as a table, with the difference of each
// to the baseline case: what the idempotency layer adds. A case named
// whole/part measures a part of another case, and is not compared.
func writeGoBench(w io.StringWriter, res []goBenchResult) {
	var base *goBenchResult
	for i := range res {
		if res[i].Name == "baseline" {
			base = &res[i]
		}
	}
	var rows [][]string
	for _, r := range res {
		delta := ""
		if whole, _, part := strings.Cut(r.Name, "/"); part {
			delta = "part of " + whole
		} else if base != nil && r.Name != base.Name {
			delta = fmt.Sprintf("%+.0f ns, %+d B, %+d allocs", r.NsPerOp-base.NsPerOp, r.BytesPerOp-base.BytesPerOp, r.AllocsPerOp-base.AllocsPerOp)
		}
		rows = append(rows, []string{r.Name, fmt.Sprintf("%.0f", r.NsPerOp), fmt.Sprint(r.BytesPerOp), fmt.Sprint(r.AllocsPerOp), delta})
	}
	writeTable(w, []string{"case", "ns/op", "B/op", "allocs/op", "vs baseline"}, rows)
}
