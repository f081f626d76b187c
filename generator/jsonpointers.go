package generator

import (
	"strconv"
	"strings"
)

// pointers splits JSON pointers into their unescaped tokens.
func pointers(exclude []string) [][]string {
	var out [][]string
	for _, p := range exclude {
		if !strings.HasPrefix(p, "/") {
			continue
		}
		tokens := strings.Split(p[1:], "/")
		for i, t := range tokens {
			tokens[i] = strings.NewReplacer("~1", "/", "~0", "~").Replace(t)
		}
		out = append(out, tokens)
	}
	return out
}

// under returns the pointers that start at member name, without it.
func under(excl [][]string, name string) [][]string {
	var out [][]string
	for _, tokens := range excl {
		if len(tokens) > 0 && tokens[0] == name {
			out = append(out, tokens[1:])
		}
	}
	return out
}

// pointerArgs spells pointers as further arguments to Value.
func pointerArgs(excl [][]string) string {
	var b strings.Builder
	for _, tokens := range excl {
		b.WriteString(", ")
		var p strings.Builder
		for _, t := range tokens {
			p.WriteString("/" + strings.NewReplacer("~", "~0", "/", "~1").Replace(t))
		}
		b.WriteString(strconv.Quote(p.String()))
	}
	return b.String()
}
