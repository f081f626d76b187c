package idem

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// TestKeyOf: the values at an operation's key sources make its key: one
// as it is, several as a JSON array, so that parts that would join alike
// as text (a,b + c and a + b,c) make different keys; a missing part is
// the missing key, or a 400 where the key is optional and another part
// is there.
func TestKeyOf(t *testing.T) {
	two := &Operation{Name: "op", KeyFrom: []KeySource{{In: KeyInQuery, Name: "batch"}, {In: KeyInBody, Name: "/line"}}}
	key := func(op *Operation, values ...KeyValue) (string, error) {
		return op.keyOf(WithKey(context.Background(), values...))
	}
	a, err1 := key(two, KeyValue{"a,b", true}, KeyValue{"c", true})
	b, err2 := key(two, KeyValue{"a", true}, KeyValue{"b,c", true})
	if err1 != nil || err2 != nil || a == b {
		t.Fatalf("keys %q (%v) and %q (%v); want two different keys", a, err1, b, err2)
	}
	if a != `["a,b","c"]` {
		t.Errorf("composite key %q; want the JSON array [\"a,b\",\"c\"]", a)
	}
	one := &Operation{Name: "op", KeyFrom: []KeySource{{In: KeyInHeader, Name: "Webhook-Id"}}}
	if k, err := key(one, KeyValue{`msg_<1>&"`, true}); err != nil || k != `msg_<1>&"` {
		t.Errorf("a single part's key is %q (%v); want the value as it is", k, err)
	}
	if _, err := key(two, KeyValue{}, KeyValue{"c", true}); !errors.Is(err, ErrNoKey) {
		t.Errorf("a required key without a part: %v; want ErrNoKey", err)
	}
	optional := *two
	optional.KeyOptional = true
	if _, err := key(&optional, KeyValue{}, KeyValue{}); !errors.Is(err, ErrNoKey) {
		t.Errorf("an optional key without any part: %v; want ErrNoKey", err)
	}
	var ke *KeyError
	if _, err := key(&optional, KeyValue{}, KeyValue{"c", true}); !errors.As(err, &ke) || !strings.Contains(ke.Reason, "batch query parameter") {
		t.Errorf("an optional key with one part of two: %v; want a KeyError naming the missing part", err)
	}
	for _, bad := range []string{"", "a\x00b", "a\nb", "\xff", strings.Repeat("k", MaxKeyLen+1)} {
		if _, err := key(one, KeyValue{bad, true}); !errors.As(err, &ke) {
			t.Errorf("the key %q: %v; want a KeyError", bad, err)
		}
	}
	if _, err := key(two, KeyValue{strings.Repeat("k", 200), true}, KeyValue{strings.Repeat("l", 100), true}); !errors.As(err, &ke) {
		t.Errorf("a composite key over %d bytes: %v; want a KeyError", MaxKeyLen, err)
	}
	if _, err := one.keyOf(context.Background()); !errors.Is(err, errNoKeyValues) {
		t.Errorf("no values in the context: %v; want errNoKeyValues", err)
	}
}
