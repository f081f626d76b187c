package generator

import (
	"cmp"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
)

// resolutionWarnings renders the resolutions as Result.Warnings, in the
// order of the spec's text: "file:line:col: warning: ..." where the
// spec's place is known, "file: warning: ..." before them where it is not.
func resolutionWarnings(specPath string, found []resolution) []string {
	sorted := slices.Clone(found)
	slices.SortStableFunc(sorted, func(a, b resolution) int {
		return cmp.Compare(lineCol(a.loc), lineCol(b.loc))
	})
	out := make([]string, 0, len(sorted))
	for _, f := range sorted {
		if f.loc == nil || f.loc.Line == 0 {
			out = append(out, fmt.Sprintf("%s: warning: %s", specPath, f.text))
			continue
		}
		file := specPath
		if f.loc.File != "" && !sameFile(f.loc.File, specPath) {
			file = f.loc.File
		}
		out = append(out, fmt.Sprintf("%s:%d:%d: warning: %s", file, f.loc.Line, max(f.loc.Column, 1), f.text))
	}
	return out
}

func lineCol(loc *openapi3.Location) int64 {
	if loc == nil {
		return 0
	}
	return int64(loc.Line)<<32 | int64(loc.Column)
}

func sameFile(a, b string) bool {
	if a == b {
		return true
	}
	aa, err1 := filepath.Abs(a)
	bb, err2 := filepath.Abs(b)
	return err1 == nil && err2 == nil && aa == bb
}

// withResolutions merges the resolutions' warnings into the model's, which
// are in the order of the spec's text too, keeping that order.
func withResolutions(specPath string, resolved, warnings []string) []string {
	if len(resolved) == 0 {
		return warnings
	}
	pos := func(w string) int64 {
		rest, ok := strings.CutPrefix(w, specPath+":")
		if !ok {
			return 0
		}
		parts := strings.SplitN(rest, ":", 3)
		if len(parts) < 3 {
			return 0
		}
		line, err1 := strconv.Atoi(parts[0])
		col, err2 := strconv.Atoi(parts[1])
		if err1 != nil || err2 != nil {
			return 0
		}
		return int64(line)<<32 | int64(col)
	}
	out := make([]string, 0, len(resolved)+len(warnings))
	i, j := 0, 0
	for i < len(resolved) || j < len(warnings) {
		if j == len(warnings) || (i < len(resolved) && pos(resolved[i]) <= pos(warnings[j])) {
			out = append(out, resolved[i])
			i++
			continue
		}
		out = append(out, warnings[j])
		j++
	}
	return out
}
