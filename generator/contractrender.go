package generator

import (
	"fmt"
	"strconv"
	"strings"
)

// renderContract writes the contracts as the comment that ends the
// generated idempotency file; "" when there are none.
func renderContract(contracts []opContract) string {
	if len(contracts) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("\n" + contractMarker + `
//
// How the keys of each annotated operation are scoped and what their
// fingerprints cover, as this file computes them. idemgen compares what
// it generates with this record and warns when an operation's differs: a
// request sent before a deploy of the change and retried after it would
// run again as a new request, or get a 422. See "Changing an operation's
// scope or fingerprint" in idemgen's README. A parameter is counted with
// the type its value is written as, or excluded; a body is counted as
// sent (form, multipart) or by a digest of the shape of the Go type it is
// read into, followed by its members (? when left out when empty).
//
`)
	for _, c := range contracts {
		fmt.Fprintf(&b, "// operation %s %s %s\n", tok(c.Name), tok(c.Method), tok(c.Path))
		switch {
		case c.ScopeFunction && c.ScopeHeader != "":
			fmt.Fprintf(&b, "//\tscope function header %s\n", tok(c.ScopeHeader))
		case c.ScopeFunction:
			b.WriteString("//\tscope function\n")
		case c.ScopeHeader != "":
			fmt.Fprintf(&b, "//\tscope header %s\n", tok(c.ScopeHeader))
		default:
			b.WriteString("//\tscope none\n")
		}
		for _, k := range c.Key {
			in, name, _ := strings.Cut(k, " ")
			fmt.Fprintf(&b, "//\tkey %s %s\n", tok(in), tok(name))
		}
		for _, p := range c.Params {
			fmt.Fprintf(&b, "//\tparam %s %s %s\n", tok(p.In), tok(p.Name), tok(p.Shape))
		}
		for _, body := range c.Bodies {
			fmt.Fprintf(&b, "//\tbody %s", tok(body.MediaType))
			if body.Tag != "" {
				fmt.Fprintf(&b, " tag=%s", tok(body.Tag))
			}
			fmt.Fprintf(&b, " %s", tok(body.Shape))
			for _, m := range body.Members {
				fmt.Fprintf(&b, " %s", tok(m))
			}
			b.WriteString("\n")
		}
		for _, p := range c.Exclude {
			fmt.Fprintf(&b, "//\texclude %s\n", tok(p))
		}
		for _, p := range c.Include {
			fmt.Fprintf(&b, "//\tinclude %s\n", tok(p))
		}
	}
	return b.String()
}

// tok spells s as one token of a contract line: as it is when it has no
// spaces, quotes or other characters that would need escaping, else
// quoted.
func tok(s string) string {
	if s != "" && s[0] != '"' && !strings.ContainsFunc(s, func(r rune) bool { return r <= ' ' || r > '~' || r == '"' || r == '\\' }) {
		return s
	}
	return strconv.Quote(s)
}
