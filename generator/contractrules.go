package generator

import (
	"cmp"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
)

// contractWarnings compares the contracts of the model's annotated
// operations with those of src, the idempotency file name (as the config
// names it) that this generation replaces, and warns about each
// operation whose keys change: its scope, its operationId or what its
// fingerprint covers. Nothing is said when there is no old file, or it
// records no contract, or an operation is new.
func contractWarnings(src []byte, name string, m *model, contracts []opContract) []warning {
	if src == nil {
		return nil
	}
	old, ok := parseContract(src)
	if !ok {
		return nil
	}
	byName := make(map[string]*opContract, len(old))
	byRoute := make(map[string]*opContract, len(old))
	for i := range old {
		byName[old[i].Name] = &old[i]
		byRoute[old[i].Method+" "+old[i].Path] = &old[i]
	}
	newNames := make(map[string]bool, len(contracts))
	for _, c := range contracts {
		newNames[c.Name] = true
	}
	var warnings []warning
	i := 0
	for _, op := range m.Operations {
		if !op.Idempotent {
			continue
		}
		c := contracts[i]
		i++
		o := byName[c.Name]
		if o == nil {
			// Renamed: the same route, under an operationId this
			// generation does not have any more.
			if r := byRoute[c.Method+" "+c.Path]; r != nil && !newNames[r.Name] {
				o = r
			}
		}
		if o == nil {
			continue // new to idempotency: no keys in flight
		}
		if w := compareContracts(*o, c); w != "" {
			warnings = append(warnings, warning{op.pos, fmt.Sprintf("%s: warning: x-idempotent on %s %s (%s): changed from %s: %s", op.pos, op.Method, op.Path, op.Name, filepath.ToSlash(name), w)})
		}
	}
	return warnings
}

// compareContracts says how the keys of an operation whose contract was
// old change with new, and what that does to retries in flight; "" when
// they do not change.
func compareContracts(old, new opContract) string {
	var rekeyed, fingerprint []string
	// every says that the fingerprint of every request changes; else only
	// of requests that hold what changed (a body member, say).
	every := false
	if old.Name != new.Name {
		rekeyed = append(rekeyed, fmt.Sprintf("operationId %s → %s (the keys' namespace)", old.Name, new.Name))
	}
	if !strings.EqualFold(old.ScopeHeader, new.ScopeHeader) || old.ScopeFunction != new.ScopeFunction {
		rekeyed = append(rekeyed, fmt.Sprintf("scope %s → %s", scopeText(old), scopeText(new)))
	}

	// Parameters by location and name, as their canonical form keys them:
	// one counted in the fingerprint is there in every request's, as null
	// when it is not sent.
	params := map[[2]string][2]string{} // (in, name) -> old shape, new shape
	var keys [][2]string
	for i, ps := range [][]contractParam{old.Params, new.Params} {
		for _, p := range ps {
			k := [2]string{p.In, p.Name}
			v, seen := params[k]
			if !seen {
				keys = append(keys, k)
			}
			v[i] = p.Shape
			params[k] = v
		}
	}
	slices.SortFunc(keys, func(a, b [2]string) int { return cmp.Or(cmp.Compare(a[0], b[0]), cmp.Compare(a[1], b[1])) })
	counted := func(shape string) bool { return shape != "" && shape != excludedShape }
	for _, k := range keys {
		v := params[k]
		what := fmt.Sprintf("%s parameter %q", k[0], k[1])
		switch {
		case v[0] == v[1], !counted(v[0]) && !counted(v[1]):
			continue // unchanged, or counted in neither
		case v[0] == "":
			fingerprint = append(fingerprint, what+" added")
		case v[1] == "":
			fingerprint = append(fingerprint, what+" removed")
		case v[1] == excludedShape:
			fingerprint = append(fingerprint, what+" now left out (fingerprint.exclude)")
		case v[0] == excludedShape:
			fingerprint = append(fingerprint, what+" no longer left out (fingerprint.exclude)")
		default:
			fingerprint = append(fingerprint, fmt.Sprintf("%s type %s → %s", what, v[0], v[1]))
			continue // only requests that send it
		}
		every = true
	}

	// Bodies by media type. With several, the fingerprint holds each
	// under its tag, null but for the one sent: adding or removing one
	// changes every request's.
	mediaTypes := func(bodies []contractBody) []string {
		var out []string
		for _, b := range bodies {
			out = append(out, b.MediaType)
		}
		return out
	}
	if om, nm := mediaTypes(old.Bodies), mediaTypes(new.Bodies); !slices.Equal(om, nm) {
		fingerprint = append(fingerprint, fmt.Sprintf("request body media types %s → %s", listText(om), listText(nm)))
		every = true
	}
	for _, nb := range new.Bodies {
		i := slices.IndexFunc(old.Bodies, func(b contractBody) bool { return b.MediaType == nb.MediaType })
		if i < 0 {
			continue
		}
		ob := old.Bodies[i]
		if ob.Tag != nb.Tag && len(old.Bodies) == len(new.Bodies) {
			fingerprint = append(fingerprint, fmt.Sprintf("request body %s keyed %s → %s", nb.MediaType, or(ob.Tag, "(none)"), or(nb.Tag, "(none)")))
			every = true
		}
		if ob.Shape == nb.Shape {
			continue
		}
		// A member written whether sent or not (as null or a zero value)
		// is in every request's fingerprint; one left out when empty only
		// in those of requests that send it.
		var changes []string
		oldMembers, newMembers := memberSet(ob.Members), memberSet(nb.Members)
		for _, m := range nb.Members {
			name := strings.TrimSuffix(m, "?")
			optional, had := oldMembers[name]
			switch {
			case !had:
				changes = append(changes, fmt.Sprintf("member %q added", name))
				every = every || !newMembers[name]
			case optional && !newMembers[name]:
				changes = append(changes, fmt.Sprintf("member %q now written when empty", name))
				every = true
			case !optional && newMembers[name]:
				changes = append(changes, fmt.Sprintf("member %q now left out when empty", name))
				every = true
			}
		}
		for _, m := range ob.Members {
			if name := strings.TrimSuffix(m, "?"); !hasKey(newMembers, name) {
				changes = append(changes, fmt.Sprintf("member %q removed", name))
				every = every || !oldMembers[name]
			}
		}
		if len(changes) == 0 {
			changes = append(changes, fmt.Sprintf("the Go type it is read into changed (shape %s → %s)", ob.Shape, nb.Shape))
		}
		fingerprint = append(fingerprint, fmt.Sprintf("request body %s: %s", nb.MediaType, strings.Join(changes, ", ")))
	}
	for _, p := range new.Exclude {
		if !slices.Contains(old.Exclude, p) {
			fingerprint = append(fingerprint, fmt.Sprintf("fingerprint.exclude %s added", p))
		}
	}
	for _, p := range old.Exclude {
		if !slices.Contains(new.Exclude, p) {
			fingerprint = append(fingerprint, fmt.Sprintf("fingerprint.exclude %s removed", p))
		}
	}

	if len(rekeyed) == 0 && len(fingerprint) == 0 {
		return ""
	}
	what := rekeyed
	if len(fingerprint) > 0 {
		what = append(what, "fingerprint: "+strings.Join(fingerprint, ", "))
	}
	const retry = "a request sent with an Idempotency-Key before this is deployed and retried with the same key after it"
	oldH, newH := old.ScopeHeader, new.ScopeHeader
	var effect string
	switch {
	case old.Name != new.Name:
		effect = "Its keys change: " + retry + " runs again, as a new request"
	case !strings.EqualFold(oldH, newH) && oldH != "" && newH != "":
		// The scope is the header's value, not its name.
		effect = fmt.Sprintf("Its keys change: %s is scoped by its %s header instead of its %s header, and runs again, as a new request, unless the two hold the same value (without %s it gets 400)", retry, newH, oldH, newH)
	case !strings.EqualFold(oldH, newH) && newH != "":
		effect = fmt.Sprintf("Its keys change: %s is scoped by its %s header now, and runs again, as a new request (without %s it gets 400)", retry, newH, newH)
	case !strings.EqualFold(oldH, newH):
		effect = fmt.Sprintf("Its keys change: %s is no longer scoped by its %s header, and runs again, as a new request", retry, oldH)
	case len(rekeyed) > 0:
		// Only function: true changed, which says what the Go code does:
		// idem.Options.Scope, when set, scopes every annotated operation.
		effect = "If idem.Options.Scope is set or unset in the same deploy, the keys of every annotated operation change (it applies to all of them): " + retry + " runs again, as a new request"
	case every:
		effect = "Its fingerprint changes: " + retry + " gets 422, as a different request under the same key"
	default:
		effect = "Its fingerprint changes for requests that hold what changed: such " + retry + " gets 422, as a different request under the same key"
	}
	return strings.Join(what, "; ") + ". " + effect + "; see " + contractDoc + " for how to roll the change out"
}

// memberSet maps a body's members by name to whether each is left out
// when empty.
func memberSet(members []string) map[string]bool {
	set := make(map[string]bool, len(members))
	for _, m := range members {
		name, optional := strings.CutSuffix(m, "?")
		set[name] = optional
	}
	return set
}

func hasKey(m map[string]bool, k string) bool {
	_, ok := m[k]
	return ok
}

func scopeText(c opContract) string {
	switch {
	case c.ScopeFunction && c.ScopeHeader != "":
		return "idem.Options.Scope and header " + c.ScopeHeader
	case c.ScopeFunction:
		return "idem.Options.Scope"
	case c.ScopeHeader != "":
		return "header " + c.ScopeHeader
	}
	return "none"
}

func listText(items []string) string {
	if len(items) == 0 {
		return "none"
	}
	return strings.Join(items, ", ")
}
