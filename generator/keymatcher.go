package generator

import (
	"maps"
	"regexp/syntax"
	"slices"
	"strconv"
	"strings"

	"github.com/idemgen/idemgen/idem/idemclient"
)

// keyMatcher decides whether a pattern matches every key of a set, as
// the server matches keys (regexp.MatchString: a match anywhere in the
// key). Rather than trying keys, which could miss the rare one the
// pattern rejects, it runs the pattern's automaton over all the keys at
// once, one character position at a time, keeping the distinct sets of
// automaton states that the keys' beginnings lead to.
type keyMatcher struct {
	prog *syntax.Prog
	// prefix is the literal text the pattern requires at the start of
	// the key, "" when there is none or it holds characters a key must
	// not (see idemclient.KeyFormat.Check).
	prefix string
	mark   []uint32 // closure's visited marks, by instruction
	stamp  uint32
	// budget bounds the automaton's steps, so that an intricate pattern
	// costs generation a bounded time; once spent, the keys are taken
	// as rejected.
	budget int
}

// maxKeyStates bounds the sets of states kept per position, and
// keyMatchBudget the steps of the automaton for a pattern (well under a
// second): a pattern that needs more is treated as rejecting the keys.
const (
	maxKeyStates   = 4096
	keyMatchBudget = 1 << 24
)

// exhausted reports whether m gave up on a pattern for its budget.
func (m *keyMatcher) exhausted() bool { return m != nil && m.budget <= 0 }

func newKeyMatcher(pattern string) (*keyMatcher, error) {
	re, err := syntax.Parse(pattern, syntax.Perl) // as regexp.Compile parses
	if err != nil {
		return nil, err
	}
	re = re.Simplify()
	prog, err := syntax.Compile(re)
	if err != nil {
		return nil, err
	}
	return &keyMatcher{prog: prog, prefix: literalPrefix(re), mark: make([]uint32, len(prog.Inst)), budget: keyMatchBudget}, nil
}

// literalPrefix is the literal text re requires at the start of the text.
func literalPrefix(re *syntax.Regexp) string {
	if re.Op != syntax.OpConcat || len(re.Sub) < 2 || re.Sub[0].Op != syntax.OpBeginText && re.Sub[0].Op != syntax.OpBeginLine {
		return ""
	}
	var prefix strings.Builder
	for _, sub := range re.Sub[1:] {
		if sub.Op != syntax.OpLiteral {
			break
		}
		if sub.Flags&syntax.FoldCase != 0 {
			// The parser keeps one case of the literal; lower case reads
			// as most patterns are written.
			prefix.WriteString(strings.ToLower(string(sub.Rune)))
			continue
		}
		prefix.WriteString(string(sub.Rune))
	}
	p := prefix.String()
	if (idemclient.KeyFormat{Prefix: p, Alphabet: idemclient.Digits, Len: 1}).Check() != nil {
		return ""
	}
	return p
}

// keyStates is one set of automaton states that some keys' beginnings
// lead to: the instructions waiting for the next character, and the
// previous character (-1 at the start), which the empty-width assertions
// (^, $, \b) look at.
type keyStates struct {
	pcs  []uint32
	prev rune
}

func (s keyStates) id() string {
	var b strings.Builder
	b.WriteString(strconv.Itoa(int(s.prev)))
	for _, pc := range s.pcs {
		b.WriteByte(',')
		b.WriteString(strconv.Itoa(int(pc)))
	}
	return b.String()
}

// keyFrontier maps the sets of states the keys' beginnings lead to by id;
// keys that have already matched are dropped from it, since nothing after
// undoes a match.
type keyFrontier map[string]keyStates

func (m *keyMatcher) start() keyFrontier {
	s := keyStates{prev: -1}
	return keyFrontier{s.id(): s}
}

// closure follows the empty transitions from pcs, and from the start of
// the program, since a match may begin anywhere, under the assertions
// flags holds; it returns the instructions that consume a character and
// whether a match is complete.
func (m *keyMatcher) closure(pcs []uint32, flags syntax.EmptyOp) (waiting []uint32, matched bool) {
	m.stamp++
	stack := append([]uint32{uint32(m.prog.Start)}, pcs...)
	for len(stack) > 0 {
		m.budget--
		pc := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if m.mark[pc] == m.stamp {
			continue
		}
		m.mark[pc] = m.stamp
		switch inst := &m.prog.Inst[pc]; inst.Op {
		case syntax.InstMatch:
			matched = true
		case syntax.InstAlt, syntax.InstAltMatch:
			stack = append(stack, inst.Arg, inst.Out)
		case syntax.InstCapture, syntax.InstNop:
			stack = append(stack, inst.Out)
		case syntax.InstEmptyWidth:
			if syntax.EmptyOp(inst.Arg)&^flags == 0 {
				stack = append(stack, inst.Out)
			}
		case syntax.InstRune, syntax.InstRune1, syntax.InstRuneAny, syntax.InstRuneAnyNotNL:
			waiting = append(waiting, pc)
		}
	}
	return waiting, matched
}

func consumesRune(inst *syntax.Inst, c rune) bool {
	switch inst.Op {
	case syntax.InstRune1:
		return inst.Rune[0] == c
	case syntax.InstRune:
		return inst.MatchRune(c)
	case syntax.InstRuneAny:
		return true
	case syntax.InstRuneAnyNotNL:
		return c != '\n'
	}
	return false
}

// step advances every set of f by each character of chars; ok is false
// when the sets grow past maxKeyStates.
func (m *keyMatcher) step(f keyFrontier, chars string) (next keyFrontier, ok bool) {
	next = keyFrontier{}
	for _, id := range slices.Sorted(maps.Keys(f)) { // in a fixed order, as allMatched
		s := f[id]
		for i := 0; i < len(chars); i++ {
			c := rune(chars[i])
			if m.budget <= 0 {
				return nil, false
			}
			waiting, matched := m.closure(s.pcs, syntax.EmptyOpContext(s.prev, c))
			if matched {
				continue
			}
			var pcs []uint32
			for _, pc := range waiting {
				if inst := &m.prog.Inst[pc]; consumesRune(inst, c) {
					pcs = append(pcs, inst.Out)
				}
			}
			slices.Sort(pcs)
			ns := keyStates{pcs: slices.Compact(pcs), prev: c}
			// Only whether the previous character is a word character
			// matters to the assertions (keys hold no newline).
			if syntax.IsWordChar(c) {
				ns.prev = 'a'
			} else {
				ns.prev = '-'
			}
			next[ns.id()] = ns
			if len(next) > maxKeyStates {
				return nil, false
			}
		}
	}
	return next, true
}

// allMatched reports whether every key that has led to f matches when it
// ends there.
func (m *keyMatcher) allMatched(f keyFrontier) bool {
	// In a fixed order, so that the budget spent, and so the choice, is
	// the same on every run.
	for _, id := range slices.Sorted(maps.Keys(f)) {
		s := f[id]
		if _, matched := m.closure(s.pcs, syntax.EmptyOpContext(s.prev, -1)); !matched {
			return false
		}
	}
	return true
}

// matchesAll reports whether the pattern matches every key whose i-th
// character is one of positions[i].
func (m *keyMatcher) matchesAll(positions []string) bool {
	f := m.start()
	for _, chars := range positions {
		var ok bool
		if f, ok = m.step(f, chars); !ok {
			return false
		}
	}
	return m.allMatched(f)
}

// matchesAllOfLength reports, for each n up to maxLen, whether the
// pattern matches every key made of prefix and n characters of alphabet;
// ok is false when the automaton has too many states to tell.
func (m *keyMatcher) matchesAllOfLength(prefix, alphabet string, maxLen int) (all []bool, ok bool) {
	f := m.start()
	for i := 0; i < len(prefix); i++ {
		if f, ok = m.step(f, prefix[i:i+1]); !ok {
			return nil, false
		}
	}
	all = make([]bool, max(maxLen+1, 0))
	for n := range all {
		all[n] = m.allMatched(f)
		next, ok := m.step(f, alphabet)
		if !ok {
			return nil, false
		}
		if sameFrontier(f, next) {
			// A fixed point: every longer key gives the same answer.
			for rest := n + 1; rest < len(all); rest++ {
				all[rest] = all[n]
			}
			break
		}
		f = next
	}
	return all, true
}

func sameFrontier(a, b keyFrontier) bool {
	if len(a) != len(b) {
		return false
	}
	for id := range a {
		if _, ok := b[id]; !ok {
			return false
		}
	}
	return true
}
