package idem

import (
	"cmp"
	"context"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// BindFormUnions sets the fields of a form body that oapi-codegen's form
// binder (runtime.BindForm, which its strict server calls) leaves unset:
// those whose schema is a union, oneOf or anyOf, such as Stripe's "an
// object or an empty string" (metadata[k]=v, or metadata= to clear it).
// oapi-codegen declares a union as a struct holding the union's JSON in an
// unexported field, which the binder cannot see, so it drops the field
// without an error. body is the bound body (a pointer to its struct); the
// form is the request's (see WithRequest), as the binder read it.
//
// Each union field present in the form is built as JSON from its nested
// fields (metadata[a]=1 is {"a":"1"}, items[0][price]=p and expand[]=x
// arrays) and decoded by the union's UnmarshalJSON, as the alternative the
// form's shape and values fit: an object for nested fields, an array for
// indexed ones, and for a single value the first of a boolean, an integer,
// a number, a value of an enum, a string that takes it. A union field the
// form holds but no alternative takes is a 400 *Problem naming the field:
// it is never dropped.
func BindFormUnions(ctx context.Context, body any) error {
	r := RequestFrom(ctx)
	if r == nil || len(r.Form) == 0 || body == nil {
		return nil
	}
	v := reflect.ValueOf(body)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return nil
	}
	b := formBinder{unions: map[reflect.Type]bool{}}
	if !b.hasUnion(v.Type()) {
		return nil
	}
	root := parseFormTree(r.Form)
	if _, err := b.bind(v.Elem(), root, ""); err != nil {
		var fe *formFieldError
		if errors.As(err, &fe) {
			return &Problem{
				Type:   TypeInvalidRequest,
				Title:  "Invalid request",
				Status: http.StatusBadRequest,
				Detail: fmt.Sprintf("The form field %s could not be read: %s. Fix the request and send it again; it was not run.", fe.field, fe.msg),
			}
		}
		return err
	}
	return nil
}

// FormHasUnions reports whether body, a pointer to a form body's struct
// (a nil one will do), has fields BindFormUnions binds. The generated
// handler asks once, when it is made, so that a form without unions costs
// nothing per request.
func FormHasUnions(body any) bool {
	t := reflect.TypeOf(body)
	if t == nil || t.Kind() != reflect.Pointer {
		return false
	}
	b := formBinder{unions: map[reflect.Type]bool{}}
	return b.hasUnion(t)
}

// formFieldError is a form field that cannot be read, by its name in the
// form.
type formFieldError struct{ field, msg string }

func (e *formFieldError) Error() string { return "form field " + e.field + ": " + e.msg }

// maxFormIndex bounds the arrays BindFormUnions makes from indexes.
const maxFormIndex = 1 << 16

// formNode is a form field and the fields nested in it: a[b]=1 and a[c]=2
// are the node a with children b and c; a[]=1&a[]=2 a child "" with two
// values.
type formNode struct {
	values   []string
	children map[string]*formNode
}

// parseFormTree arranges a form's fields by their bracketed names. A name
// whose brackets do not close is a field of its own, as written.
func parseFormTree(form url.Values) *formNode {
	root := &formNode{}
	for key, values := range form {
		n := root
		for _, seg := range formPath(key) {
			if n.children == nil {
				n.children = map[string]*formNode{}
			}
			c := n.children[seg]
			if c == nil {
				c = &formNode{}
				n.children[seg] = c
			}
			n = c
		}
		n.values = append(n.values, values...)
	}
	return root
}

// formPath splits a[b][c] into a, b, c and a[] into a and "".
func formPath(key string) []string {
	open := strings.IndexByte(key, '[')
	if open <= 0 {
		return []string{key}
	}
	path := []string{key[:open]}
	rest := key[open:]
	for rest != "" {
		end := strings.IndexByte(rest, ']')
		if rest[0] != '[' || end < 0 {
			return []string{key}
		}
		path = append(path, rest[1:end])
		rest = rest[end+1:]
	}
	return path
}

func (n *formNode) leaf() bool { return len(n.children) == 0 }

// indexed reports whether the node's children are array items: indexes
// (a[0], a[1]) or appended values (a[]).
func (n *formNode) indexed() bool {
	if len(n.children) == 0 {
		return false
	}
	for k := range n.children {
		if k == "" {
			continue
		}
		if i, err := strconv.Atoi(k); err != nil || i < 0 || strconv.Itoa(i) != k {
			return false
		}
	}
	return true
}

// maxIndex is the largest index of the node's indexed children, or -1.
func (n *formNode) maxIndex() int {
	most := -1
	for k := range n.children {
		if i, err := strconv.Atoi(k); err == nil && k != "" {
			most = max(most, i)
		}
	}
	return most
}

// items are the node's array items in the order oapi-codegen's binder
// takes them: indexed ones by index, then a[] values, then repeated a
// values.
func (n *formNode) items() []*formNode {
	type item struct {
		i int
		n *formNode
	}
	var indexed []item
	for k, c := range n.children {
		if k != "" {
			i, _ := strconv.Atoi(k)
			indexed = append(indexed, item{i, c})
		}
	}
	slices.SortFunc(indexed, func(a, b item) int { return cmp.Compare(a.i, b.i) })
	var out []*formNode
	for _, it := range indexed {
		out = append(out, it.n)
	}
	if c := n.children[""]; c != nil {
		for _, v := range c.values {
			out = append(out, &formNode{values: []string{v}})
		}
	}
	for _, v := range n.values {
		out = append(out, &formNode{values: []string{v}})
	}
	return out
}

var (
	rawMessageType      = reflect.TypeFor[json.RawMessage]()
	unmarshalerType     = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// formBinder binds the union fields of one body.
type formBinder struct {
	unions map[reflect.Type]bool // whether a type holds a union, as found
}

// isUnion reports whether t is an oapi-codegen union: a struct with the
// union's JSON in an unexported field named union, decoded by its
// UnmarshalJSON.
func isUnion(t reflect.Type) bool {
	if t.Kind() != reflect.Struct {
		return false
	}
	f, ok := t.FieldByName("union")
	return ok && f.Type == rawMessageType && reflect.PointerTo(t).Implements(unmarshalerType)
}

// hasUnion reports whether a value of type t can hold a union.
func (b *formBinder) hasUnion(t reflect.Type) bool {
	if has, seen := b.unions[t]; seen {
		return has
	}
	b.unions[t] = false // a recursive type holds one only through another field
	has := false
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Array, reflect.Map:
		has = b.hasUnion(t.Elem())
	case reflect.Struct:
		has = isUnion(t)
		for i := 0; i < t.NumField() && !has; i++ {
			if f := t.Field(i); f.IsExported() {
				has = b.hasUnion(f.Type)
			}
		}
	}
	b.unions[t] = has
	return has
}

// formName is the name a struct field has in a form, as oapi-codegen's
// binder reads it: its form tag, else its json tag; "" for none or "-".
func formName(f reflect.StructField) string {
	tag, ok := f.Tag.Lookup("form")
	if !ok || tag == "" {
		tag = f.Tag.Get("json")
	}
	name, _, _ := strings.Cut(tag, ",")
	if name == "-" {
		return ""
	}
	return name
}

func fieldName(parent, name string) string {
	if parent == "" {
		return name
	}
	return parent + "[" + name + "]"
}

// bind sets the unions in v from node, the form field named name, and
// reports whether it set any.
func (b *formBinder) bind(v reflect.Value, node *formNode, name string) (bool, error) {
	t := v.Type()
	if !b.hasUnion(t) {
		return false, nil
	}
	switch {
	case t.Kind() == reflect.Pointer:
		if !v.IsNil() {
			return b.bind(v.Elem(), node, name)
		}
		p := reflect.New(t.Elem())
		set, err := b.bind(p.Elem(), node, name)
		if set && err == nil {
			v.Set(p)
		}
		return set, err
	case isUnion(t):
		data, err := b.json(t, node, name)
		if err != nil {
			return false, err
		}
		if err := v.Addr().Interface().(json.Unmarshaler).UnmarshalJSON(data); err != nil {
			return false, &formFieldError{name, err.Error()}
		}
		return true, nil
	case t.Kind() == reflect.Struct:
		set := false
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			n := formName(f)
			if !f.IsExported() || n == "" {
				continue
			}
			child := node.children[n]
			if child == nil {
				continue
			}
			s, err := b.bind(v.Field(i), child, fieldName(name, n))
			if err != nil {
				return false, err
			}
			set = set || s
		}
		return set, nil
	case t.Kind() == reflect.Slice || t.Kind() == reflect.Array:
		if !node.leaf() && !node.indexed() {
			return false, &formFieldError{name, fmt.Sprintf("expected array items, such as %s[0]", name)}
		}
		if n := node.maxIndex() + 1; t.Kind() == reflect.Slice && v.Len() < n {
			if n > maxFormIndex {
				return false, &formFieldError{name, fmt.Sprintf("index %d is over %d", n-1, maxFormIndex-1)}
			}
			// oapi-codegen's binder makes the slice as long as the
			// indexes; one it left shorter is grown, not cut short.
			grown := reflect.MakeSlice(t, n, n)
			reflect.Copy(grown, v)
			v.Set(grown)
		}
		set := false
		for i := 0; i < v.Len(); i++ {
			child := node.children[strconv.Itoa(i)]
			if child == nil {
				continue
			}
			s, err := b.bind(v.Index(i), child, fieldName(name, strconv.Itoa(i)))
			if err != nil {
				return false, err
			}
			set = set || s
		}
		return set, nil
	case t.Kind() == reflect.Map && t.Key().Kind() == reflect.String:
		set := false
		for _, k := range slices.Sorted(mapKeys(node.children)) {
			e := reflect.New(t.Elem()).Elem()
			key := reflect.ValueOf(k).Convert(t.Key())
			if old := v.MapIndex(key); old.IsValid() {
				e.Set(old)
			}
			s, err := b.bind(e, node.children[k], fieldName(name, k))
			if err != nil {
				return false, err
			}
			if s {
				if v.IsNil() {
					v.Set(reflect.MakeMap(t))
				}
				v.SetMapIndex(key, e)
				set = true
			}
		}
		return set, nil
	}
	return false, &formFieldError{name, "its type " + t.String() + " cannot be bound from a form"}
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// json builds the JSON of a value of type t from node, the form field
// named name.
func (b *formBinder) json(t reflect.Type, node *formNode, name string) ([]byte, error) {
	fail := func(format string, args ...any) ([]byte, error) {
		return nil, &formFieldError{name, fmt.Sprintf(format, args...)}
	}
	if len(node.values) > 0 && len(node.children) > 0 {
		return fail("it is sent both as a value and with nested fields")
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if isUnion(t) {
		return b.union(t, node, name)
	}
	switch t.Kind() {
	case reflect.Struct:
		if node.leaf() {
			if scalarLike(t) {
				return b.scalarString(node, name)
			}
			return fail("expected nested fields, such as %s[...]", name)
		}
		return b.object(t, node, name)
	case reflect.Map:
		if node.leaf() {
			return fail("expected nested fields, such as %s[key]", name)
		}
		if t.Key().Kind() != reflect.String {
			return fail("its type %s cannot be bound from a form", t)
		}
		obj := map[string]json.RawMessage{}
		for k, c := range node.children {
			data, err := b.json(t.Elem(), c, fieldName(name, k))
			if err != nil {
				return nil, err
			}
			obj[k] = data
		}
		return json.Marshal(obj)
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return b.scalarString(node, name)
		}
		if !node.leaf() && !node.indexed() {
			return fail("expected array items, such as %s[0] or %s[]", name, name)
		}
		items := node.items()
		arr := make([]json.RawMessage, len(items))
		for i, it := range items {
			data, err := b.json(t.Elem(), it, fieldName(name, strconv.Itoa(i)))
			if err != nil {
				return nil, err
			}
			arr[i] = data
		}
		return json.Marshal(arr)
	case reflect.Interface:
		return b.generic(node, name)
	}
	if !node.leaf() {
		return fail("expected a value, not nested fields")
	}
	if len(node.values) == 0 {
		return fail("expected a value")
	}
	s := node.values[0] // the first, as oapi-codegen's binder takes
	switch t.Kind() {
	case reflect.String:
		return json.Marshal(s)
	case reflect.Bool:
		v, err := strconv.ParseBool(s)
		if err != nil {
			return fail("%q is not a boolean", s)
		}
		return json.Marshal(v)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v, err := strconv.ParseInt(s, 10, t.Bits())
		if err != nil {
			return fail("%q is not an integer of %d bits", s, t.Bits())
		}
		return json.Marshal(v)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v, err := strconv.ParseUint(s, 10, t.Bits())
		if err != nil {
			return fail("%q is not an unsigned integer of %d bits", s, t.Bits())
		}
		return json.Marshal(v)
	case reflect.Float32, reflect.Float64:
		v, err := strconv.ParseFloat(s, t.Bits())
		if err != nil || math.IsInf(v, 0) || math.IsNaN(v) {
			return fail("%q is not a number", s)
		}
		return json.Marshal(v)
	}
	return fail("its type %s cannot be bound from a form", t)
}

// scalarLike reports whether a struct type is read from a single value,
// as time.Time and oapi-codegen's types.Date are: it decodes itself and
// declares no fields of its own.
func scalarLike(t reflect.Type) bool {
	p := reflect.PointerTo(t)
	if !p.Implements(unmarshalerType) && !p.Implements(textUnmarshalerType) {
		return false
	}
	for i := 0; i < t.NumField(); i++ {
		if t.Field(i).IsExported() {
			return false
		}
	}
	return true
}

func (b *formBinder) scalarString(node *formNode, name string) ([]byte, error) {
	if !node.leaf() || len(node.values) == 0 {
		return nil, &formFieldError{name, "expected a value"}
	}
	return json.Marshal(node.values[0])
}

// object builds a JSON object of struct type t from node's children: the
// struct's fields by their names, and, when it has AdditionalProperties,
// the others as those. Children the struct does not name are left out, as
// oapi-codegen's binder leaves them.
func (b *formBinder) object(t reflect.Type, node *formNode, name string) ([]byte, error) {
	fields := map[string]reflect.Type{}
	var extra reflect.Type
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		if f.Name == "AdditionalProperties" && f.Type.Kind() == reflect.Map {
			extra = f.Type.Elem()
			continue
		}
		if n := formName(f); n != "" {
			fields[n] = f.Type
		}
	}
	obj := map[string]json.RawMessage{}
	for k, c := range node.children {
		ft, ok := fields[k]
		if !ok {
			if extra == nil {
				continue
			}
			ft = extra
		}
		data, err := b.json(ft, c, fieldName(name, k))
		if err != nil {
			return nil, err
		}
		obj[k] = data
	}
	return json.Marshal(obj)
}

// generic builds JSON for a field of no particular type: strings, objects
// of nested fields and arrays of indexed ones.
func (b *formBinder) generic(node *formNode, name string) ([]byte, error) {
	switch {
	case node.leaf():
		if len(node.values) == 0 {
			return []byte("null"), nil
		}
		return json.Marshal(node.values[0])
	case node.indexed():
		items := node.items()
		arr := make([]json.RawMessage, len(items))
		for i, it := range items {
			data, err := b.generic(it, fieldName(name, strconv.Itoa(i)))
			if err != nil {
				return nil, err
			}
			arr[i] = data
		}
		return json.Marshal(arr)
	}
	obj := map[string]json.RawMessage{}
	for k, c := range node.children {
		data, err := b.generic(c, fieldName(name, k))
		if err != nil {
			return nil, err
		}
		obj[k] = data
	}
	return json.Marshal(obj)
}

// union builds the JSON of union type t from node as the first of its
// alternatives, in order of fit (see BindFormUnions), that takes it. The
// alternatives are the types of its From methods, which oapi-codegen
// declares one for each.
func (b *formBinder) union(t reflect.Type, node *formNode, name string) ([]byte, error) {
	type member struct {
		rank int
		t    reflect.Type
	}
	var members []member
	p := reflect.PointerTo(t)
	for i := 0; i < p.NumMethod(); i++ {
		m := p.Method(i)
		if !strings.HasPrefix(m.Name, "From") || m.Type.NumIn() != 2 || m.Type.NumOut() != 1 {
			continue
		}
		mt := m.Type.In(1)
		if rank, ok := fit(mt, node); ok {
			members = append(members, member{rank, mt})
		}
	}
	slices.SortStableFunc(members, func(a, b member) int { return cmp.Compare(a.rank, b.rank) })
	var errs []string
	for _, m := range members {
		data, err := b.json(m.t, node, name)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		if !valid(m.t, data) {
			continue
		}
		return data, nil
	}
	what := "a value"
	if !node.leaf() {
		what = "nested fields"
	}
	msg := fmt.Sprintf("none of the alternatives of its schema takes %s in this shape", what)
	if node.leaf() && len(node.values) > 0 {
		msg = fmt.Sprintf("none of the alternatives of its schema takes %q", node.values[0])
	}
	if len(errs) > 0 {
		msg += " (" + strings.Join(errs, "; ") + ")"
	}
	return nil, &formFieldError{name, msg}
}

// fit ranks how well a union's alternative of type t fits the shape of
// node, lower first; ok is false when it cannot take it at all.
func fit(t reflect.Type, node *formNode) (rank int, ok bool) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if !node.leaf() {
		switch {
		case (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) && t.Elem().Kind() != reflect.Uint8:
			if node.indexed() {
				return 0, true
			}
		case t.Kind() == reflect.Map, t.Kind() == reflect.Struct && !scalarLike(t):
			return 1, true
		case t.Kind() == reflect.Interface:
			return 2, true
		}
		return 0, false
	}
	switch t.Kind() {
	case reflect.Bool:
		return 0, true
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return 1, true
	case reflect.Float32, reflect.Float64:
		return 2, true
	case reflect.String:
		if _, enum := t.MethodByName("Valid"); enum {
			return 3, true
		}
		return 4, true
	case reflect.Struct:
		if scalarLike(t) {
			return 4, true
		}
	case reflect.Interface:
		return 5, true
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return 4, true
		}
		// a=x&a=y, repeated
		return 6, len(node.values) > 1
	}
	return 0, false
}

// valid reports whether data decodes as t and, for an enum, whose type
// has the Valid method oapi-codegen declares, is one of its values.
func valid(t reflect.Type, data []byte) bool {
	p := reflect.New(t)
	if err := json.Unmarshal(data, p.Interface()); err != nil {
		return false
	}
	if v, ok := p.Elem().Interface().(interface{ Valid() bool }); ok {
		return v.Valid()
	}
	return true
}
