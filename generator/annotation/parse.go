package annotation

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

const bom = "\xEF\xBB\xBF"

// parse returns the document node of src. A document yaml.v3 rejects is
// read as JSON when it looks like JSON, since yaml.v3 fails on a few valid
// JSON documents.
func parse(file string, src []byte) (*yaml.Node, *Error) {
	doc, yerr := parseYAML(src)
	if yerr == nil {
		return doc, nil
	}
	if !looksLikeJSON(src) {
		return nil, yamlError(file, yerr)
	}
	doc, jerr := parseJSON(file, src)
	if jerr != nil {
		return nil, jerr
	}
	return doc, nil
}

// parseYAML wraps yaml.Unmarshal so that a panic inside yaml.v3 on some
// malformed input becomes an error: Read must never crash the generator.
func parseYAML(src []byte) (doc *yaml.Node, err error) {
	defer func() {
		if p := recover(); p != nil {
			doc, err = nil, fmt.Errorf("yaml: %v", p)
		}
	}()
	var n yaml.Node
	if err := yaml.Unmarshal(src, &n); err != nil {
		return nil, err
	}
	return &n, nil
}

func looksLikeJSON(src []byte) bool {
	s := bytes.TrimLeft(bytes.TrimPrefix(src, []byte(bom)), " \t\r\n")
	return len(s) > 0 && (s[0] == '{' || s[0] == '[')
}

// yamlError turns a yaml.v3 syntax error into an *Error. yaml.v3 reports
// at most a line ("yaml: line 3: ..."), so the column is always 1.
func yamlError(file string, err error) *Error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line := 1
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if num, text, ok := strings.Cut(rest, ": "); ok {
			if n, convErr := strconv.Atoi(num); convErr == nil && n >= 1 {
				line, msg = n, text
			}
		}
	}
	if construct, ok := yamlParserProblem(msg); ok {
		// yaml.v3 numbers the lines of its parser's (not its scanner's)
		// errors from 0. The line is where the enclosing construct starts,
		// unless that is the first line; then it is the problem's line.
		line++
		if construct != "" {
			msg += " in a " + construct
		}
	}
	return &Error{
		Pos: Position{File: file, Line: line, Column: 1},
		Msg: "the document is not valid YAML: " + msg + "; expected a YAML or JSON OpenAPI document",
	}
}

// yamlParserProblem recognises the messages of yaml.v3's parser, as
// opposed to its scanner, and names the construct it was reading, if any.
func yamlParserProblem(msg string) (construct string, ok bool) {
	switch msg {
	case "did not find expected key":
		return "block mapping", true
	case "did not find expected '-' indicator":
		return "block sequence", true
	case "did not find expected ',' or ']'":
		return "flow sequence", true
	case "did not find expected ',' or '}'":
		return "flow mapping", true
	case "did not find expected node content", "found undefined tag handle",
		"did not find expected <stream-start>", "did not find expected <document start>",
		"found duplicate %YAML directive", "found incompatible YAML document", "found duplicate %TAG directive":
		return "", true
	}
	return "", false
}

// jsonTree rebuilds a JSON document as a yaml.Node tree from
// encoding/json tokens, with the positions yaml.v3 would have given, so
// that the rest of the package handles one kind of tree.
type jsonTree struct {
	file string
	src  []byte
	base int // bytes skipped before the decoder's input (a byte order mark)
	dec  *json.Decoder
	at   cursor // where the last position was taken
}

// cursor is a byte offset with its line and column. Tokens come in order,
// so each position is counted on from the previous one: counting from the
// start of the line each time would be quadratic on minified JSON, which
// is one long line.
type cursor struct{ off, line, col int }

// maxDepth matches yaml.v3's nesting limit, and keeps the recursion of
// the walk bounded.
const maxDepth = 10000

func parseJSON(file string, src []byte) (*yaml.Node, *Error) {
	base := 0
	if bytes.HasPrefix(src, []byte(bom)) {
		base = len(bom)
	}
	dec := json.NewDecoder(bytes.NewReader(src[base:]))
	dec.UseNumber() // keep numbers as written, as yaml.v3 does
	t := &jsonTree{file: file, src: src, base: base, dec: dec, at: cursor{base, 1, 1}}
	root, err := t.value(0)
	if err != nil {
		return nil, err
	}
	if err := t.end(); err != nil {
		return nil, err
	}
	return &yaml.Node{Kind: yaml.DocumentNode, Line: root.Line, Column: root.Column, Content: []*yaml.Node{root}}, nil
}

// position converts a byte offset to a line and a column in characters.
func (t *jsonTree) position(off int) (line, col int) {
	off = min(max(off, t.base), len(t.src))
	if off < t.at.off { // only when reporting an error: start again
		t.at = cursor{t.base, 1, 1}
	}
	for ; t.at.off < off; t.at.off++ {
		switch c := t.src[t.at.off]; {
		case c == '\n':
			t.at.line, t.at.col = t.at.line+1, 1
		case utf8.RuneStart(c):
			t.at.col++
		}
	}
	return t.at.line, t.at.col
}

// next returns the offset at which the next token starts: the decoder
// only tells where the previous one ended.
func (t *jsonTree) next() int {
	off := t.base + int(t.dec.InputOffset())
	for off < len(t.src) && strings.IndexByte(" \t\r\n,:", t.src[off]) >= 0 {
		off++
	}
	return off
}

func (t *jsonTree) value(depth int) (*yaml.Node, *Error) {
	off := t.next()
	tok, err := t.dec.Token()
	if err != nil {
		return nil, t.fail(off, err)
	}
	line, col := t.position(off)
	n := &yaml.Node{Kind: yaml.ScalarNode, Line: line, Column: col}
	switch v := tok.(type) {
	case json.Delim:
		if depth >= maxDepth {
			return nil, t.errorAt(off, fmt.Sprintf("exceeded max depth of %d", maxDepth))
		}
		return n, t.container(n, v, depth)
	case string:
		n.Tag, n.Value, n.Style = "!!str", v, yaml.DoubleQuotedStyle
	case json.Number:
		n.Tag, n.Value = numberTag(string(v)), string(v)
	case bool:
		n.Tag, n.Value = "!!bool", strconv.FormatBool(v)
	case nil:
		n.Tag, n.Value = "!!null", "null"
	}
	return n, nil
}

func numberTag(num string) string {
	if strings.ContainsAny(num, ".eE") {
		return "!!float"
	}
	return "!!int"
}

// container reads the members of an object or array whose opening
// delimiter has been read; for an object they alternate key, value.
func (t *jsonTree) container(n *yaml.Node, open json.Delim, depth int) *Error {
	n.Kind, n.Tag, n.Style = yaml.SequenceNode, "!!seq", yaml.FlowStyle
	perMember := 1
	if open == '{' {
		n.Kind, n.Tag, perMember = yaml.MappingNode, "!!map", 2
	}
	for t.dec.More() {
		for range perMember {
			child, err := t.value(depth + 1)
			if err != nil {
				return err
			}
			n.Content = append(n.Content, child)
		}
	}
	off := t.next()
	if _, err := t.dec.Token(); err != nil { // the closing delimiter
		return t.fail(off, err)
	}
	return nil
}

// end makes sure nothing but white space follows the document, which
// json.Decoder would otherwise read as a second document.
func (t *jsonTree) end() *Error {
	off := t.next()
	_, err := t.dec.Token()
	if err == io.EOF {
		return nil
	}
	if err == nil {
		err = errors.New("unexpected data after the top-level value")
	}
	return t.fail(off, err)
}

// fail reports why the JSON is invalid. The decoder's offsets for syntax
// errors are inconsistent (sometimes the bad byte, sometimes the start of
// the value around it), so the document is checked again with
// json.Unmarshal, whose offset always counts the bad byte; off, where the
// walk stopped, is used only if that finds nothing.
func (t *jsonTree) fail(off int, err error) *Error {
	var syntax *json.SyntaxError
	switch check := json.Unmarshal(t.src[t.base:], new(json.RawMessage)); {
	case errors.As(check, &syntax) && syntax.Offset >= int64(len(t.src)-t.base):
		off, err = len(t.src), errors.New("unexpected end of input")
	case errors.As(check, &syntax):
		off, err = t.base+int(syntax.Offset)-1, check
	case err == io.EOF || err == io.ErrUnexpectedEOF:
		off, err = len(t.src), errors.New("unexpected end of input")
	}
	return t.errorAt(off, err.Error())
}

func (t *jsonTree) errorAt(off int, problem string) *Error {
	line, col := t.position(off)
	return &Error{
		Pos: Position{File: t.file, Line: line, Column: col},
		Msg: "the document is not valid JSON: " + problem + "; expected a JSON or YAML OpenAPI document",
	}
}
