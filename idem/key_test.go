package idem_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/idem"
)

func TestParseKey(t *testing.T) {
	tests := []struct {
		name    string
		values  []string
		want    string
		wantErr string // substring of the error; "" for success
	}{
		{"plain", []string{"order-123"}, "order-123", ""},
		{"uuid", []string{"0f8fad5b-d9cb-469f-a165-70867728950e"}, "0f8fad5b-d9cb-469f-a165-70867728950e", ""},
		{"inner spaces kept", []string{"a b"}, "a b", ""},
		{"outer whitespace trimmed", []string{"  k1\t"}, "k1", ""},
		{"max length", []string{strings.Repeat("k", 255)}, strings.Repeat("k", 255), ""},
		{"sf-string", []string{`"k1"`}, "k1", ""},
		{"sf-string escapes", []string{`"a\"b\\c"`}, `a"b\c`, ""},
		{"missing", nil, "", "no Idempotency-Key"},
		{"twice", []string{"a", "b"}, "", "appears 2 times"},
		{"empty", []string{""}, "", "empty"},
		{"blank", []string{"   "}, "", "empty"},
		{"empty sf-string", []string{`""`}, "", "empty"},
		{"too long", []string{strings.Repeat("k", 256)}, "", "256 characters long; the limit is 255"},
		{"too long quoted", []string{`"` + strings.Repeat("k", 256) + `"`}, "", "limit is 255"},
		{"control char", []string{"a\x01b"}, "", "byte 1 (0x01)"},
		{"non-ascii", []string{"clé"}, "", "not printable ASCII"},
		{"DEL", []string{"a\x7f"}, "", "0x7f"},
		{"unterminated sf-string", []string{`"abc`}, "", "must end with a double quote"},
		{"lone quote", []string{`"`}, "", "must end with a double quote"},
		{"bad escape", []string{`"a\nb"`}, "", "may only escape"},
		{"trailing backslash", []string{`"a\"`}, "", "may only escape"},
		{"unescaped inner quote", []string{`"a"b"`}, "", `escape an inner "`},
		{"non-ascii in sf-string", []string{"\"é\""}, "", "not printable ASCII"},
		{"joined by a comma", []string{"a, b"}, "", "more than one value"},
		{"joined without a space", []string{"a,b"}, "", "more than one value"},
		{"joined sf-strings", []string{`"a", "b"`}, "", "more than one value"},
		{"comma inside an sf-string", []string{`"a,b"`}, "a,b", ""},
		{"escaped quote then comma inside", []string{`"a\",b"`}, `a",b`, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := idem.ParseKey(tc.values)
			if tc.wantErr == "" {
				if err != nil || got != tc.want {
					t.Fatalf("ParseKey(%q) = %q, %v; want %q", tc.values, got, err, tc.want)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("ParseKey(%q) error = %v; want one containing %q", tc.values, err, tc.wantErr)
			}
		})
	}
	if _, err := idem.ParseKey(nil); !errors.Is(err, idem.ErrNoKey) {
		t.Errorf("missing key error %v is not ErrNoKey", err)
	}
	if _, err := idem.ParseKey([]string{""}); !errors.As(err, new(*idem.KeyError)) {
		t.Errorf("empty key error %v is not a *KeyError", err)
	}
}

func FuzzParseKey(f *testing.F) {
	for _, s := range []string{"k1", `"k1"`, `"a\"b"`, "", `"`, "a\x00b", strings.Repeat("x", 300), "\xff\xfe", `"\\"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		key, err := idem.ParseKey([]string{v})
		if err != nil {
			if !errors.As(err, new(*idem.KeyError)) {
				t.Fatalf("error %v is not a *KeyError", err)
			}
			return
		}
		if key == "" || len(key) > idem.MaxKeyLen {
			t.Fatalf("accepted key of length %d", len(key))
		}
		for i := 0; i < len(key); i++ {
			if key[i] < 0x20 || key[i] > 0x7e {
				t.Fatalf("accepted key %q with byte 0x%02x", key, key[i])
			}
		}
	})
}
