package idem_test

import (
	"encoding/hex"
	"encoding/json"
	"math"
	"net/url"
	"testing"
	"time"

	"github.com/idemgen/idemgen/idem"
)

type pinItem struct {
	Sku   string   `json:"sku"`
	Price float64  `json:"price"`
	Qty   *int32   `json:"qty,omitempty"`
	Tags  []string `json:"tags"`
}

type pinBody struct {
	Amount int64           `json:"amount_cents"`
	Note   *string         `json:"note,omitempty"`
	Items  []pinItem       `json:"items"`
	Meta   map[string]any  `json:"metadata,omitempty"`
	Union  json.RawMessage `json:"union,omitempty"`
	At     time.Time       `json:"at"`
	Ratio  float32         `json:"ratio"`
}

func pinnedBody() *pinBody {
	q := int32(3)
	note := "<b>&amp; \u2028 \x01 caf\xc3\xa9 \xff \"q\"</b>"
	return &pinBody{
		Amount: -12,
		Note:   &note,
		Items:  []pinItem{{"a", 0.1, &q, nil}, {"b\t", 1e21, nil, []string{"x", ""}}},
		Meta:   map[string]any{"z": 1.5, "a": []any{true, nil}},
		Union:  json.RawMessage(`{"b":1e2,"a":"x"}`),
		At:     time.Date(2026, 11, 25, 3, 4, 5, 600, time.FixedZone("", 3600)),
		Ratio:  0.3,
	}
}

// TestFingerprintPinned holds fingerprints as earlier releases computed
// them: stored keys must keep matching their requests after an upgrade.
func TestFingerprintPinned(t *testing.T) {
	b := pinnedBody()
	cases := []struct {
		name string
		sum  func() ([]byte, error)
		want string
	}{
		{"body", func() ([]byte, error) {
			return idem.Fingerprint("createOrder", idem.Params{"id": "o_1"}, idem.Params{"dry_run": true, "n": 7}, idem.Params{"X-Account-Id": "acct"}, b, nil)
		}, "230f20aba807c4d874c200d0d1bb4b70c7e37ecea7e55182f471740274989bfa"},
		{"excluded", func() ([]byte, error) {
			return idem.Fingerprint("createOrder", nil, nil, nil, b, []string{"/note", "/items/1/price", "/metadata/z"})
		}, "8f314d1932d326657155fcd057fdca4c76d2ee4ce86473ce5a31c3c2d29aa3cb"},
		{"form", func() ([]byte, error) {
			return idem.Fingerprint("charge", nil, nil, nil, url.Values{"amount": {"100"}, "metadata[a]": {"1", "2"}}, nil)
		}, "b9b8c97d0be59429892e49e268a8348925e117c9c09465355d6cb657e2c23199"},
		{"none", func() ([]byte, error) { return idem.Fingerprint("cancel", nil, nil, nil, nil, nil) },
			"5ffaa35b6f2193cd247b4fa96c1668cc6ebbee8fbe01ea30882582c807ed0a6c"},
	}
	for _, tc := range cases {
		sum, err := tc.sum()
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := hex.EncodeToString(sum); got != tc.want {
			t.Errorf("%s: fingerprint %s, want %s as before", tc.name, got, tc.want)
		}
	}
}

// TestCanonicalWriter writes the pinned request field by field, as the
// generated code does, and compares it with Fingerprint.
func TestCanonicalWriter(t *testing.T) {
	b := pinnedBody()
	want, err := idem.Fingerprint("createOrder", idem.Params{"id": "o_1"}, idem.Params{"dry_run": true, "n": 7}, idem.Params{"X-Account-Id": "acct"}, b, []string{"/note", "/metadata/z"})
	if err != nil {
		t.Fatal(err)
	}
	w := idem.NewCanonicalWriter()
	w.BeginObject()
	w.Key("body")
	w.BeginObject()
	w.Key("amount_cents")
	w.Int(b.Amount)
	w.Key("at")
	w.Time(b.At)
	w.Key("items")
	w.BeginArray()
	for i := range b.Items {
		v := &b.Items[i]
		w.BeginObject()
		w.Key("price")
		w.Float64(v.Price)
		if v.Qty != nil {
			w.Key("qty")
			w.Int(int64(*v.Qty))
		}
		w.Key("sku")
		w.String(v.Sku)
		w.Key("tags")
		if v.Tags == nil {
			w.Null()
		} else {
			w.BeginArray()
			for _, tag := range v.Tags {
				w.String(tag)
			}
			w.EndArray()
		}
		w.EndObject()
	}
	w.EndArray()
	if len(b.Meta) != 0 {
		w.Key("metadata")
		w.Value(b.Meta, "/z")
	}
	w.Key("ratio")
	w.Float32(b.Ratio)
	w.Key("union")
	w.Value(b.Union)
	w.EndObject()
	w.Key("header")
	w.BeginObject()
	w.Key("X-Account-Id")
	w.String("acct")
	w.EndObject()
	w.Key("operation")
	w.String("createOrder")
	w.Key("path")
	w.BeginObject()
	w.Key("id")
	w.String("o_1")
	w.EndObject()
	w.Key("query")
	w.BeginObject()
	w.Key("dry_run")
	w.Bool(true)
	w.Key("n")
	w.Int(7)
	w.EndObject()
	w.EndObject()
	got, err := w.Sum()
	if err != nil {
		t.Fatal(err)
	}
	if hex.EncodeToString(got) != hex.EncodeToString(want) {
		t.Fatalf("written field by field: %x; Fingerprint: %x", got, want)
	}
}

func TestCanonicalWriterErrors(t *testing.T) {
	for name, write := range map[string]func(w *idem.CanonicalWriter){
		"NaN":        func(w *idem.CanonicalWriter) { w.Float64(math.NaN()) },
		"Inf":        func(w *idem.CanonicalWriter) { w.Float32(float32(math.Inf(-1))) },
		"bad JSON":   func(w *idem.CanonicalWriter) { w.Value(json.RawMessage(`{`)) },
		"year 10000": func(w *idem.CanonicalWriter) { w.Time(time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)) },
	} {
		w := idem.NewCanonicalWriter()
		w.BeginArray()
		write(w)
		w.EndArray()
		if _, err := w.Sum(); err == nil {
			t.Errorf("%s: Sum gave no error", name)
		}
	}
}

// canonicalOf is the reference: the value encoded by encoding/json and
// made canonical, as Fingerprint does.
func canonicalOf(t *testing.T, v any) (string, bool) {
	raw, err := json.Marshal(v)
	if err != nil {
		return "", false
	}
	c, err := idem.Canonical(raw)
	if err != nil {
		t.Fatalf("Canonical(%s): %v", raw, err)
	}
	return string(c), true
}

// written is what the writer makes of one value, through Value's
// reference and through the writing method, as canonical text (the hash
// hides it, so both are hashed and compared by digest).
func sameAsReference(t *testing.T, v any, write func(w *idem.CanonicalWriter)) {
	t.Helper()
	want, ok := canonicalOf(t, v)
	w := idem.NewCanonicalWriter()
	write(w)
	got, err := w.Sum()
	if !ok {
		if err == nil {
			t.Fatalf("%#v: encoding/json fails, the writer does not", v)
		}
		return
	}
	if err != nil {
		t.Fatalf("%#v: %v", v, err)
	}
	ref := idem.NewCanonicalWriter()
	ref.Value(json.RawMessage(want))
	wantSum, _ := ref.Sum()
	if hex.EncodeToString(got) != hex.EncodeToString(wantSum) {
		t.Fatalf("%#v: written differently from its canonical form %s", v, want)
	}
}

func FuzzCanonicalString(f *testing.F) {
	for _, s := range []string{"", "plain", "<a href=\"x\">&</a>", "\u2028\u2029", "\x00\x1f\x7f", "\b\f\n\r\t", "caf\xc3\xa9", "\xff\xfe", "\xed\xa0\x80", "\ufffd", "\\/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sameAsReference(t, s, func(w *idem.CanonicalWriter) { w.String(s) })
		m := map[string]int{s: 1, "k": 2}
		sameAsReference(t, m, func(w *idem.CanonicalWriter) {
			keys, ok := idem.CanonicalKeys(m)
			if !ok {
				w.Value(m)
				return
			}
			w.BeginObject()
			for _, k := range keys {
				w.Key(k)
				w.Int(int64(m[k]))
			}
			w.EndObject()
		})
		form := url.Values{s: {s, "x"}, "k": nil}
		sameAsReference(t, form, func(w *idem.CanonicalWriter) { w.Form(form) })
	})
}

func FuzzCanonicalNumber(f *testing.F) {
	for _, v := range []float64{0, math.Copysign(0, -1), 1, -1.5, 0.1, 1e20, 1e21, 1e-6, 1e-7, 123456789.125, math.MaxFloat64, math.SmallestNonzeroFloat64, math.MaxFloat32, math.NaN(), math.Inf(1)} {
		f.Add(math.Float64bits(v), math.Float32bits(float32(v)), int64(v), uint64(v))
	}
	f.Fuzz(func(t *testing.T, f64 uint64, f32 uint32, i int64, u uint64) {
		x, y := math.Float64frombits(f64), math.Float32frombits(f32)
		sameAsReference(t, x, func(w *idem.CanonicalWriter) { w.Float64(x) })
		sameAsReference(t, y, func(w *idem.CanonicalWriter) { w.Float32(y) })
		sameAsReference(t, i, func(w *idem.CanonicalWriter) { w.Int(i) })
		sameAsReference(t, u, func(w *idem.CanonicalWriter) { w.Uint(u) })
	})
}

func FuzzCanonicalTime(f *testing.F) {
	f.Add(int64(0), int32(0), 0)
	f.Add(int64(1790000000), int32(123456789), 3600)
	f.Add(int64(-62135596800), int32(1), -45)
	f.Add(int64(253402300800), int32(0), 0)
	f.Fuzz(func(t *testing.T, sec int64, nsec int32, offset int) {
		at := time.Unix(sec, int64(nsec)).In(time.FixedZone("", offset%(100*3600)))
		sameAsReference(t, at, func(w *idem.CanonicalWriter) { w.Time(at) })
	})
}
