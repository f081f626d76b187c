package generator

import (
	"fmt"
	"math"
	"strings"

	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/idemclient"
)

// The entropy of the keys IdempotentClient makes, in bits. Keys of an
// operation must not repeat within a scope while the server keeps them:
// with 64 random bits, a million calls in one scope within a TTL share a
// key with a probability under 1 in 30 million; fewer are refused.
// Between 64 and 96 bits the generated documentation says the keys are
// weak. Beyond 128 bits a longer key is no better.
const (
	minKeyBits    = 64
	weakKeyBits   = 96
	targetKeyBits = 128
)

// keyAlphabet is an alphabet IdempotentClient may draw keys from.
type keyAlphabet struct {
	name  string // its constant in package idemclient: Alphanumeric
	chars string
	class string // a character class that describes it: [0-9A-Za-z]
}

// keyAlphabets are the alphabets of IdempotentClient's keys, in order of
// preference between keys of equal strength and length.
var keyAlphabets = []keyAlphabet{
	{"Alphanumeric", idemclient.Alphanumeric, "[0-9A-Za-z]"},
	{"Base64URL", idemclient.Base64URL, "[A-Za-z0-9_-]"},
	{"LowerAlphanumeric", idemclient.LowerAlphanumeric, "[0-9a-z]"},
	{"UpperAlphanumeric", idemclient.UpperAlphanumeric, "[0-9A-Z]"},
	{"LowerHex", idemclient.LowerHex, "[0-9a-f]"},
	{"UpperHex", idemclient.UpperHex, "[0-9A-F]"},
	{"LowerLetters", idemclient.LowerLetters, "[a-z]"},
	{"UpperLetters", idemclient.UpperLetters, "[A-Z]"},
	{"Digits", idemclient.Digits, "[0-9]"},
}

// clientKeys are the keys IdempotentClient makes for an operation.
type clientKeys struct {
	uuid     bool // random UUIDs, idemclient's default
	format   idemclient.KeyFormat
	alphabet keyAlphabet
	bits     float64
}

// Len is the length of a key.
func (k clientKeys) Len() int {
	if k.uuid {
		return 36
	}
	return len(k.format.Prefix) + k.format.Len
}

func (k clientKeys) describe() string {
	if k.uuid {
		return "random UUIDs"
	}
	s := fmt.Sprintf("%d random characters of %s", k.format.Len, k.alphabet.class)
	if k.format.Prefix != "" {
		s = fmt.Sprintf("%q followed by %s", k.format.Prefix, s)
	}
	return s
}

// clientKeysDecl is what client.go.tmpl writes for an operation's keys:
// an idemclient.KeyFormat, and a comment on it.
type clientKeysDecl struct {
	Prefix   string
	Alphabet string // the constant of package idemclient
	Len      int
	Doc      string // a paragraph of comment lines, each starting with "// "
}

// commentLines wraps text into comment lines of at most 72 characters,
// but for words longer than that.
func commentLines(text string) string {
	var lines []string
	line := "//"
	for _, word := range strings.Fields(text) {
		if len(line)+1+len(word) > 72 && line != "//" {
			lines = append(lines, line)
			line = "//"
		}
		line += " " + word
	}
	return strings.Join(append(lines, line), "\n")
}

// ClientKeys is what IdempotentClient's methods for the operation write
// about its keys: nil for random UUIDs, idemclient's default, which is
// what an operation gets unless the limits of an Idempotency-Key
// parameter it declares leave them out. A refusal renders as UUIDs too;
// clientKeyErrors reports it before the file is written.
func (op operation) ClientKeys() *clientKeysDecl {
	k, refusal := chooseClientKeys(op.KeyMinLen, op.KeyMaxLen, op.KeyPattern)
	if refusal != nil || k.uuid {
		return nil
	}
	f := k.format
	doc := fmt.Sprintf("Its keys are %s, %d bits, within the limits of its Idempotency-Key parameter (%s).", k.describe(), int(k.bits), describeLimits(op.KeyMinLen, op.KeyMaxLen, op.KeyPattern))
	if k.bits < weakKeyBits {
		doc += fmt.Sprintf(" They are weak: with fewer than %d bits, two calls in a busy scope may come to share a key while the server keeps it, which longer keys would make rarer.", weakKeyBits)
	}
	return &clientKeysDecl{Prefix: f.Prefix, Alphabet: k.alphabet.name, Len: f.Len, Doc: commentLines(doc)}
}

func describeLimits(minLen, maxLen int, pattern string) string {
	var parts []string
	if minLen > 0 {
		parts = append(parts, fmt.Sprintf("minLength %d", minLen))
	}
	if maxLen > 0 {
		parts = append(parts, fmt.Sprintf("maxLength %d", maxLen))
	}
	if pattern != "" {
		parts = append(parts, fmt.Sprintf("pattern %s", pattern))
	}
	return strings.Join(parts, ", ")
}

// keyRefusal says why IdempotentClient cannot make keys within an
// operation's limits: field is the schema keyword at fault, msg what is
// wrong and what was expected.
type keyRefusal struct {
	field string // "pattern" or "maxLength"
	msg   string
}

// chooseClientKeys picks the keys IdempotentClient makes for an operation
// whose Idempotency-Key parameter declares the given limits (zero and ""
// for none): random UUIDs when the limits allow every one of them, else
// an optional literal prefix that the pattern requires followed by random
// characters of one of keyAlphabets, of one length, that the limits allow
// every key of. Among those it takes the strongest, up to targetKeyBits,
// then the shortest, then the first alphabet. It refuses when the pattern
// rejects some key of every such set, or when the strongest keys have
// fewer than minKeyBits. The choice is the same on every run.
func chooseClientKeys(minLen, maxLen int, pattern string) (clientKeys, *keyRefusal) {
	lo, hi := max(minLen, 1), idem.MaxKeyLen
	if maxLen > 0 {
		hi = min(maxLen, idem.MaxKeyLen)
	}
	var m *keyMatcher
	if pattern != "" {
		var err error
		if m, err = newKeyMatcher(pattern); err != nil {
			// declaredKey refuses patterns Go cannot compile first.
			return clientKeys{}, &keyRefusal{"pattern", fmt.Sprintf("the pattern %q does not compile (%v)", pattern, err)}
		}
	}
	if lo <= 36 && 36 <= hi && (m == nil || m.matchesAll(uuidPositions())) {
		return clientKeys{uuid: true, bits: idemclient.KeyFormat{}.Bits()}, nil
	}
	sets := keySets(m)
	best, found := bestKeys(sets, lo, hi)
	switch {
	case !found && m.exhausted():
		return clientKeys{}, &keyRefusal{"pattern", fmt.Sprintf("the pattern %q is too intricate for the client to tell which keys it matches; expected a simpler pattern, such as ^[A-Za-z0-9]{20,40}$, or client: false", pattern)}
	case !found:
		return clientKeys{}, &keyRefusal{"pattern", fmt.Sprintf("the client cannot make keys that the pattern %q always matches: it makes random UUIDs, or random characters of one length (here %d to %d) from one of %s, after any literal text the pattern starts with; expected a pattern that matches every key of one such kind, such as ^[A-Za-z0-9]{20,40}$, or client: false",
			pattern, lo, hi, alphabetClasses())}
	case best.bits < minKeyBits:
		r := &keyRefusal{"pattern", fmt.Sprintf("the strongest keys the client can make within its limits (%s) are %s, %d random bits, under the %d bits that keep two calls from sharing a key; expected limits that allow stronger keys",
			describeLimits(minLen, maxLen, pattern), best.describe(), int(best.bits), minKeyBits)}
		// The maxLength is at fault when a larger one is enough.
		for longer := hi + 1; maxLen > 0 && longer <= idem.MaxKeyLen; longer++ {
			if k, ok := bestKeys(sets, lo, longer); ok && k.bits >= minKeyBits {
				r.field = "maxLength"
				r.msg += fmt.Sprintf(", such as maxLength: %d, which allows %s", longer, k.describe())
				break
			}
		}
		return clientKeys{}, r
	}
	return best, nil
}

// keySet is the keys made of a prefix and random characters of an
// alphabet: all[n] says whether the pattern matches every such key with n
// random characters, nil when there is no pattern.
type keySet struct {
	prefix   string
	alphabet keyAlphabet
	all      []bool
}

// keySets are the sets of keys, of every length up to idem.MaxKeyLen,
// that m matches every key of (nil: no pattern, every set).
func keySets(m *keyMatcher) []keySet {
	prefixes := []string{""}
	if m != nil && m.prefix != "" {
		prefixes = append(prefixes, m.prefix)
	}
	var sets []keySet
	for _, prefix := range prefixes {
		for _, a := range keyAlphabets {
			set := keySet{prefix: prefix, alphabet: a}
			if m != nil {
				var ok bool
				if set.all, ok = m.matchesAllOfLength(prefix, a.chars, idem.MaxKeyLen-len(prefix)); !ok {
					continue
				}
			}
			sets = append(sets, set)
		}
	}
	return sets
}

// bestKeys is chooseClientKeys' choice among sets, for keys of lo to hi
// characters.
func bestKeys(sets []keySet, lo, hi int) (best clientKeys, found bool) {
	better := func(k clientKeys) bool {
		if !found {
			return true
		}
		a, b := min(k.bits, targetKeyBits), min(best.bits, targetKeyBits)
		return a > b || a == b && k.Len() < best.Len()
	}
	for _, set := range sets {
		perChar := math.Log2(float64(len(set.alphabet.chars)))
		// The shortest length that reaches targetKeyBits, else the
		// longest.
		pick := -1
		for n := max(lo-len(set.prefix), 1); n <= hi-len(set.prefix); n++ {
			if set.all != nil && !set.all[n] {
				continue
			}
			pick = n
			if float64(n)*perChar >= targetKeyBits {
				break
			}
		}
		if pick < 0 {
			continue
		}
		k := clientKeys{format: idemclient.KeyFormat{Prefix: set.prefix, Alphabet: set.alphabet.chars, Len: pick}, alphabet: set.alphabet, bits: float64(pick) * perChar}
		if better(k) {
			best, found = k, true
		}
	}
	return best, found
}

func alphabetClasses() string {
	var classes []string
	for _, a := range keyAlphabets {
		classes = append(classes, a.class)
	}
	return strings.Join(classes, ", ")
}

// uuidPositions are the characters a random UUID (version 4) may have at
// each position, as idemclient.NewKey writes them.
func uuidPositions() []string {
	const hex = idemclient.LowerHex
	var pos []string
	for i, group := range []int{8, 4, 4, 4, 12} {
		if i > 0 {
			pos = append(pos, "-")
		}
		for j := range group {
			switch {
			case i == 2 && j == 0:
				pos = append(pos, "4") // the version
			case i == 3 && j == 0:
				pos = append(pos, "89ab") // the variant
			default:
				pos = append(pos, hex)
			}
		}
	}
	return pos
}
