package generator

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/idemgen/idemgen/generator/annotation"
	"gopkg.in/yaml.v3"
)

// brokenRefs finds the $refs of a spec that name nothing, each with the
// line and column of the reference: the spec loader names at most the
// target, which leaves the author searching for where it is used. It
// checks local references (#/...) against the document and file
// references against the files read (read); it returns nil when it
// finds none.
func brokenRefs(file string, src []byte, read func(path string) ([]byte, error)) error {
	doc, err := annotation.Parse(file, src)
	if err != nil {
		return nil // the loader's own error says what is wrong
	}
	root := doc
	if root.Kind == yaml.DocumentNode && len(root.Content) > 0 {
		root = root.Content[0]
	}
	var errs []error
	eachRef(root, func(v *yaml.Node) {
		if why := refProblem(file, root, v.Value, read); why != "" {
			errs = append(errs, &annotation.Error{
				Pos: annotation.Position{File: file, Line: v.Line, Column: v.Column},
				Msg: fmt.Sprintf("$ref %q %s", v.Value, why),
			})
		}
	})
	return errors.Join(errs...)
}

// eachRef calls f with the value of every $ref under n, in the order of
// the text.
func eachRef(n *yaml.Node, f func(v *yaml.Node)) {
	var walk func(n *yaml.Node, depth int)
	walk = func(n *yaml.Node, depth int) {
		if n == nil || depth > 200 {
			return
		}
		if n.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(n.Content); i += 2 {
				if k, v := n.Content[i], n.Content[i+1]; k.Value == "$ref" && v.Kind == yaml.ScalarNode {
					f(v)
				}
			}
		}
		for _, c := range n.Content {
			walk(c, depth+1)
		}
	}
	walk(n, 0)
}

// refProblem says why ref names nothing, or returns "".
func refProblem(file string, root *yaml.Node, ref string, read func(path string) ([]byte, error)) string {
	target, pointer, _ := strings.Cut(ref, "#")
	if target != "" {
		if strings.Contains(target, "://") {
			return "" // remote: generation does not fetch it, and says so
		}
		if _, err := read(filepath.Join(filepath.Dir(file), filepath.FromSlash(target))); err != nil {
			return fmt.Sprintf("names a file that cannot be read (%v); expected a file beside the spec", err)
		}
		return "" // its inside is that file's
	}
	n, at := root, "#"
	for _, tok := range strings.Split(strings.TrimPrefix(pointer, "/"), "/") {
		if pointer == "" {
			break
		}
		tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
		next := child(n, tok)
		if next == nil {
			var keys []string
			if n.Kind == yaml.MappingNode {
				for i := 0; i < len(n.Content); i += 2 {
					keys = append(keys, n.Content[i].Value)
				}
			}
			slices.Sort(keys)
			if len(keys) > 20 {
				keys = append(keys[:20], "...")
			}
			if n.Kind == yaml.SequenceNode {
				return fmt.Sprintf("names nothing: %s has %d items, numbered from 0; expected an index below %d", at, len(n.Content), len(n.Content))
			}
			if len(keys) == 0 {
				return fmt.Sprintf("names nothing: %s has no %q", at, tok)
			}
			return fmt.Sprintf("names nothing: %s has no %q; expected one of %s", at, tok, strings.Join(keys, ", "))
		}
		n, at = next, at+"/"+tok
	}
	return ""
}

// child is what a JSON Pointer token names in n: a mapping's member, or a
// sequence's item by its decimal index.
func child(n *yaml.Node, tok string) *yaml.Node {
	if n != nil && n.Kind == yaml.SequenceNode {
		i, err := strconv.Atoi(tok)
		if err != nil || i < 0 || i >= len(n.Content) || tok != strconv.Itoa(i) {
			return nil
		}
		return n.Content[i]
	}
	return get(n, tok)
}
