// Package randvalue fills Go values with random contents for property
// tests of code that encodes them: strings with the characters JSON
// escapes and invalid UTF-8, numbers at the edges of their types, nil and
// empty collections, times near and past the range encoding/json accepts.
package randvalue

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"reflect"
	"time"
)

// maxDepth bounds recursive types.
const maxDepth = 5

// Fill sets the exported contents of the value ptr points to. Unexported
// fields are left as they are.
func Fill(r *rand.Rand, ptr any) {
	v := reflect.ValueOf(ptr)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		panic("randvalue: Fill needs a non-nil pointer")
	}
	fill(r, v.Elem(), 0)
}

var (
	timeType    = reflect.TypeFor[time.Time]()
	rawJSONType = reflect.TypeFor[json.RawMessage]()
)

// strings are the pieces random strings are made of.
var pieces = []string{
	"", "a", "EUR", "cus_123", " ", "\"", "\\", "/", "<", ">", "&", "\u2028", "\u2029",
	"\x00", "\x1f", "\b", "\f", "\n", "\r", "\t", "\x7f", "é", "日本", "😀", "\ufffd",
	"\xff", "\xc3", "\xed\xa0\x80", "metadata[a]", "~0", "~1",
}

func randString(r *rand.Rand) string {
	s := ""
	for range r.IntN(6) {
		s += pieces[r.IntN(len(pieces))]
	}
	return s
}

var floats = []float64{0, math.Copysign(0, -1), 1, -1, 0.1, 0.5, 1e20, 1e21, 1e-6, 1e-7, 123456.789, math.MaxFloat64, math.SmallestNonzeroFloat64, math.MaxFloat32, math.NaN(), math.Inf(1)}

func randFloat(r *rand.Rand) float64 {
	switch r.IntN(3) {
	case 0:
		return floats[r.IntN(len(floats))]
	case 1:
		return float64(r.Int64N(2000) - 1000)
	}
	return math.Float64frombits(r.Uint64())
}

// randJSON is a value as encoding/json decodes into any.
func randJSON(r *rand.Rand, depth int) any {
	if depth >= maxDepth {
		return nil
	}
	switch r.IntN(7) {
	case 0:
		return nil
	case 1:
		return r.IntN(2) == 0
	case 2:
		f := randFloat(r)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			f = 0
		}
		return f
	case 3:
		return randString(r)
	case 4:
		var a []any
		for range r.IntN(4) {
			a = append(a, randJSON(r, depth+1))
		}
		return a
	}
	m := map[string]any{}
	for range r.IntN(4) {
		m[randString(r)] = randJSON(r, depth+1)
	}
	return m
}

func fill(r *rand.Rand, v reflect.Value, depth int) {
	if !v.CanSet() {
		return
	}
	t := v.Type()
	switch t {
	case timeType:
		sec := r.Int64N(253402300800 + 100000) // to past the year 9999
		if r.IntN(10) == 0 {
			sec = -r.Int64N(62135596800 + 100000) // around the year 0
		}
		zone := time.UTC
		if r.IntN(2) == 0 {
			zone = time.FixedZone("", (r.IntN(48)-24)*1800)
		}
		v.Set(reflect.ValueOf(time.Unix(sec, r.Int64N(1e9)).In(zone)))
		return
	case rawJSONType:
		raw, _ := json.Marshal(randJSON(r, depth))
		if r.IntN(20) == 0 {
			raw = []byte(`{"unterminated"`)
		}
		v.SetBytes(raw)
		return
	}
	switch t.Kind() {
	case reflect.Bool:
		v.SetBool(r.IntN(2) == 0)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if r.IntN(3) == 0 {
			v.SetInt(int64(r.IntN(200)) - 100)
		} else {
			v.SetInt(int64(r.Uint64()) >> (64 - t.Bits()))
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		v.SetUint(r.Uint64() >> (64 - t.Bits()))
	case reflect.Float32, reflect.Float64:
		f := randFloat(r)
		if t.Kind() == reflect.Float32 && r.IntN(2) == 0 {
			f = float64(math.Float32frombits(r.Uint32()))
		}
		v.SetFloat(f)
	case reflect.String:
		v.SetString(randString(r))
	case reflect.Pointer:
		if depth >= maxDepth || r.IntN(4) == 0 {
			v.SetZero()
			return
		}
		p := reflect.New(t.Elem())
		fill(r, p.Elem(), depth+1)
		v.Set(p)
	case reflect.Slice:
		if depth >= maxDepth || r.IntN(5) == 0 {
			v.SetZero()
			return
		}
		n := r.IntN(4)
		s := reflect.MakeSlice(t, n, n)
		for i := range n {
			fill(r, s.Index(i), depth+1)
		}
		v.Set(s)
	case reflect.Array:
		for i := range v.Len() {
			fill(r, v.Index(i), depth+1)
		}
	case reflect.Map:
		if depth >= maxDepth || r.IntN(5) == 0 {
			v.SetZero()
			return
		}
		m := reflect.MakeMap(t)
		for range r.IntN(4) {
			k := reflect.New(t.Key()).Elem()
			fill(r, k, depth+1)
			e := reflect.New(t.Elem()).Elem()
			fill(r, e, depth+1)
			m.SetMapIndex(k, e)
		}
		v.Set(m)
	case reflect.Struct:
		for i := range v.NumField() {
			if t.Field(i).IsExported() {
				fill(r, v.Field(i), depth+1)
			}
		}
	case reflect.Interface:
		if t.NumMethod() == 0 {
			if j := randJSON(r, depth); j != nil {
				v.Set(reflect.ValueOf(j))
			}
		}
	}
}
