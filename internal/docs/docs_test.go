package docs

import (
	"bytes"
	"fmt"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// root is the repository's root, from this package's directory.
const root = "../.."

// documents are the Markdown files the tests read, relative to root:
// README.md and docs/*.md, and, for links, the other pages they lead to.
func documents(t *testing.T, withLinked bool) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files := []string{"README.md"}
	for _, d := range docs {
		files = append(files, filepath.ToSlash(strings.TrimPrefix(d, root+string(filepath.Separator))))
	}
	if withLinked {
		files = append(files, "CHANGELOG.md", "schema/README.md")
	}
	return files
}

func read(t *testing.T, name string) string {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(root, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(src)
}

// block is a fenced code block of a Markdown file.
type block struct {
	info    string // the info string: "go", "go fragment", "sh"
	line    int    // the line of its opening fence
	section string // the ## heading it is under
	body    string
}

// blocks returns the fenced code blocks of src, and its text outside
// them, code blocks blanked to empty lines so that line numbers hold.
func blocks(src string) (bs []block, prose []string) {
	var cur *block
	var body []string
	section := ""
	for i, line := range strings.Split(src, "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case cur == nil && strings.HasPrefix(trimmed, "```"):
			cur, body = &block{info: strings.TrimPrefix(trimmed, "```"), line: i + 1, section: section}, nil
			prose = append(prose, "")
		case cur != nil && trimmed == "```":
			// Blocks inside list items are indented; their code is not.
			cur.body = undent(body)
			bs = append(bs, *cur)
			cur = nil
			prose = append(prose, "")
		case cur != nil:
			body = append(body, line)
			prose = append(prose, "")
		default:
			if h, ok := strings.CutPrefix(line, "## "); ok {
				section = h
			}
			prose = append(prose, line)
		}
	}
	return bs, prose
}

// undent removes the indentation every non-empty line shares.
func undent(lines []string) string {
	indent := -1
	for _, l := range lines {
		if strings.TrimSpace(l) == "" {
			continue
		}
		n := len(l) - len(strings.TrimLeft(l, " "))
		if indent < 0 || n < indent {
			indent = n
		}
	}
	var b strings.Builder
	for _, l := range lines {
		if len(l) >= indent && indent > 0 {
			l = l[indent:]
		}
		b.WriteString(l + "\n")
	}
	return b.String()
}

// adoptionSection is the README section whose files TestReadmeAdoption
// (cmd/idemgen) writes into a module of their own and builds.
const adoptionSection = "Adding it to your module"

// TestDocSnippetsCompile builds every ```go block of README.md and
// docs/*.md that is a whole file, by this rule:
//
//   - a block that starts with a package clause (comments before it
//     allowed) is a whole file: it is written, as the only file of a
//     package of its own, into a directory under this module, where it
//     imports this repository's packages (example/gen stands for a
//     service's generated code), and go vet type-checks all of them at
//     once;
//   - a block whose info string is "go fragment" is a fragment that
//     cannot compile alone, and is skipped;
//   - the blocks of the README's "Adding it to your module" section,
//     each headed by a comment naming its file, belong to the module
//     TestReadmeAdoption builds, and are skipped here;
//   - any other go block fails the test: make it whole, or mark it.
//
// It reports how many whole files it built and how many blocks it
// skipped. It builds with the go command, so -short skips it.
func TestDocSnippetsCompile(t *testing.T) {
	if testing.Short() {
		t.Skip("builds packages with the go command")
	}
	// Under this module, so that the snippets import its packages.
	if err := os.MkdirAll("testdata", 0o755); err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("testdata", "snippets-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	var pkgs []string
	where := map[string]string{} // package directory -> file:line
	fragments, adoption := 0, 0
	for _, name := range documents(t, false) {
		bs, _ := blocks(read(t, name))
		for _, b := range bs {
			fields := strings.Fields(b.info)
			if len(fields) == 0 || fields[0] != "go" {
				continue
			}
			at := fmt.Sprintf("%s:%d", name, b.line)
			switch {
			case slices.Contains(fields[1:], "fragment"):
				fragments++
			case name == "README.md" && b.section == adoptionSection:
				adoption++
			case isFile(b.body):
				pkg := filepath.Join(dir, fmt.Sprintf("%s_%d", strings.NewReplacer("/", "_", ".", "_").Replace(name), b.line))
				if err := os.MkdirAll(pkg, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(pkg, "snippet.go"), []byte(b.body), 0o644); err != nil {
					t.Fatal(err)
				}
				pkg = "./" + filepath.ToSlash(pkg)
				pkgs = append(pkgs, pkg)
				where[strings.TrimPrefix(pkg, "./")] = at
			default:
				t.Errorf("%s: a go block that is neither a whole file (a package clause first) nor marked ```go fragment", at)
			}
		}
	}
	if len(pkgs) == 0 {
		t.Fatal("no whole-file go blocks found")
	}
	out, err := exec.Command("go", append([]string{"vet"}, pkgs...)...).CombinedOutput()
	if err != nil {
		// Name each failing block by its document and line.
		msg := string(out)
		for pkg, at := range where {
			msg = strings.ReplaceAll(msg, pkg+"/snippet.go", at+" (block)")
		}
		t.Fatalf("go vet of the documents' Go files: %v\n%s", err, msg)
	}
	t.Logf("built %d whole Go files; skipped %d fragments and %d blocks of the README's adoption module (TestReadmeAdoption builds those)", len(pkgs), fragments, adoption)
}

// isFile reports whether src starts with a package clause.
func isFile(src string) bool {
	_, err := parser.ParseFile(token.NewFileSet(), "", src, parser.PackageClauseOnly)
	return err == nil
}

// link matches an inline link or image, [text](target), and a reference
// definition, [label]: target.
var (
	inlineLink = regexp.MustCompile(`\]\(([^()\s]+)(?:\s+"[^"]*")?\)`)
	refLink    = regexp.MustCompile(`^\s*\[[^\]]+\]:\s*(\S+)`)
	codeSpan   = regexp.MustCompile("`[^`]*`")
)

// TestDocLinks checks every relative link of README.md, docs/*.md,
// CHANGELOG.md and schema/README.md: its file or directory exists, and a
// #fragment names a heading of the Markdown file it points into, by
// GitHub's rule for heading anchors.
func TestDocLinks(t *testing.T) {
	anchors := map[string][]string{} // file -> its heading anchors
	anchorsOf := func(name string) []string {
		if a, ok := anchors[name]; ok {
			return a
		}
		_, prose := blocks(read(t, name))
		a := headingAnchors(prose)
		anchors[name] = a
		return a
	}
	links := 0
	for _, name := range documents(t, true) {
		_, prose := blocks(read(t, name))
		for i, line := range prose {
			var targets []string
			for _, m := range inlineLink.FindAllStringSubmatch(codeSpan.ReplaceAllString(line, ""), -1) {
				targets = append(targets, m[1])
			}
			if m := refLink.FindStringSubmatch(line); m != nil {
				targets = append(targets, m[1])
			}
			for _, target := range targets {
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				links++
				at := fmt.Sprintf("%s:%d: link %s", name, i+1, target)
				path, fragment, _ := strings.Cut(target, "#")
				file := name
				if path != "" {
					file = filepath.ToSlash(filepath.Join(filepath.Dir(name), path))
					if _, err := os.Stat(filepath.Join(root, file)); err != nil {
						t.Errorf("%s: %s does not exist", at, file)
						continue
					}
				}
				if fragment == "" {
					continue
				}
				if !strings.HasSuffix(file, ".md") {
					t.Errorf("%s: a #fragment into %s, which is not Markdown", at, file)
					continue
				}
				if !slices.Contains(anchorsOf(file), fragment) {
					t.Errorf("%s: %s has no heading #%s", at, file, fragment)
				}
			}
		}
	}
	if links == 0 {
		t.Fatal("no relative links found")
	}
}

// headingAnchors returns the anchors GitHub gives the ATX headings of a
// Markdown file's prose: the heading's text, without its markup, in
// lower case, with everything but letters, digits, spaces, hyphens and
// underscores dropped and spaces turned to hyphens; a repeated anchor
// gets -1, -2, ... appended.
func headingAnchors(prose []string) []string {
	seen := map[string]int{}
	var out []string
	for _, line := range prose {
		text, ok := heading(line)
		if !ok {
			continue
		}
		text = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`).ReplaceAllString(text, "$1") // links: their text
		var b bytes.Buffer
		for _, r := range strings.ToLower(text) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		anchor := b.String()
		if n := seen[anchor]; n > 0 {
			out = append(out, fmt.Sprintf("%s-%d", anchor, n))
		} else {
			out = append(out, anchor)
		}
		seen[anchor]++
	}
	return out
}

// heading returns the text of an ATX heading line.
func heading(line string) (string, bool) {
	n := 0
	for n < len(line) && line[n] == '#' {
		n++
	}
	if n == 0 || n > 6 || n == len(line) || line[n] != ' ' {
		return "", false
	}
	return strings.TrimSpace(strings.TrimRight(strings.TrimSpace(line[n:]), "#")), true
}
