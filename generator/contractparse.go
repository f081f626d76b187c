package generator

import (
	"bytes"
	"errors"
	"strconv"
	"strings"
)

// tokens splits a contract line into its tokens.
func tokens(line string) ([]string, error) {
	var out []string
	for {
		line = strings.TrimLeft(line, " \t")
		if line == "" {
			return out, nil
		}
		if line[0] == '"' {
			q, err := strconv.QuotedPrefix(line)
			if err != nil {
				return nil, err
			}
			s, err := strconv.Unquote(q)
			if err != nil {
				return nil, err
			}
			out = append(out, s)
			line = line[len(q):]
			continue
		}
		end := strings.IndexAny(line, " \t")
		if end < 0 {
			end = len(line)
		}
		out = append(out, line[:end])
		line = line[end:]
	}
}

var errContract = errors.New("malformed contract")

// parseContract reads the contract a generated idempotency file ends
// with. It returns ok false when the file has none (written before
// contracts were, or of another version) or it cannot be read, so that
// nothing is compared with it.
func parseContract(src []byte) (contracts []opContract, ok bool) {
	src = bytes.ReplaceAll(src, []byte("\r\n"), []byte("\n")) // as a checkout on Windows may have it
	_, rest, found := bytes.Cut(src, []byte("\n"+contractMarker+"\n"))
	if !found {
		return nil, false
	}
	var cur *opContract
	for _, line := range strings.Split(string(rest), "\n") {
		text, comment := strings.CutPrefix(strings.TrimSpace(line), "//")
		if !comment {
			if strings.TrimSpace(line) == "" {
				continue
			}
			break // the contract has ended
		}
		if cur == nil && !strings.HasPrefix(strings.TrimSpace(text), "operation ") {
			continue // the prose before the operations
		}
		toks, err := tokens(text)
		if err != nil {
			return nil, false
		}
		if len(toks) == 0 {
			continue
		}
		if toks[0] == "operation" {
			if len(toks) != 4 {
				return nil, false
			}
			contracts = append(contracts, opContract{Name: toks[1], Method: toks[2], Path: toks[3]})
			cur = &contracts[len(contracts)-1]
			continue
		}
		if err := cur.add(toks); err != nil {
			return nil, false
		}
	}
	return contracts, true
}

// add reads one line of an operation's contract into c.
func (c *opContract) add(toks []string) error {
	switch toks[0] {
	case "scope":
		args := toks[1:]
		if len(args) > 0 && args[0] == "function" {
			c.ScopeFunction, args = true, args[1:]
		}
		switch {
		case len(args) == 2 && args[0] == "header":
			c.ScopeHeader = args[1]
		case len(args) == 1 && args[0] == "none" && !c.ScopeFunction:
		case len(args) == 0 && c.ScopeFunction:
		default:
			return errContract
		}
	case "key":
		if len(toks) != 3 {
			return errContract
		}
		c.Key = append(c.Key, toks[1]+" "+toks[2])
	case "param":
		if len(toks) != 4 {
			return errContract
		}
		c.Params = append(c.Params, contractParam{toks[1], toks[2], toks[3]})
	case "body":
		args := toks[1:]
		if len(args) < 2 {
			return errContract
		}
		b := contractBody{MediaType: args[0]}
		args = args[1:]
		if tag, ok := strings.CutPrefix(args[0], "tag="); ok {
			b.Tag, args = tag, args[1:]
		}
		if len(args) == 0 {
			return errContract
		}
		b.Shape, b.Members = args[0], args[1:]
		if len(b.Members) == 0 {
			b.Members = nil
		}
		c.Bodies = append(c.Bodies, b)
	case "exclude":
		if len(toks) != 2 {
			return errContract
		}
		c.Exclude = append(c.Exclude, toks[1])
	case "include":
		if len(toks) != 2 {
			return errContract
		}
		c.Include = append(c.Include, toks[1])
	default:
		return errContract
	}
	return nil
}
