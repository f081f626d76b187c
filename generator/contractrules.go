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

// A contractRule compares one part of an operation's old and new
// contract.
type contractRule struct {
	what string // the part of the contract compared
	// rekeys says that a change of it changes the operation's keys; else
	// it changes their fingerprints.
	rekeys bool
	// changes detects the changes of it, each as the warning says it.
	changes func(old, new opContract) []contractChange
}

// A contractChange is one change a rule detects.
type contractChange struct {
	text string
	// every says that the fingerprint of every request changes; else only
	// of requests that hold what changed (a body member, say).
	every bool
}

// contractRules are the rules in the order the warning lists what they
// find: what changes the keys first, then what changes the fingerprint.
var contractRules = []contractRule{
	{"operationId", true, renamedOperation},
	{"scope", true, rescopedOperation},
	{"key", true, rekeyedOperation},
	{"parameters", false, paramChanges},
	{"request body media types", false, mediaTypeChanges},
	{"request bodies", false, bodyChanges},
	{"fingerprint.exclude", false, excludeChanges},
	{"fingerprint.include", false, includeChanges},
}

// compareContracts says how the keys of an operation whose contract was
// old change with new, and what that does to retries in flight; "" when
// they do not change.
func compareContracts(old, new opContract) string {
	var rekeyed, fingerprint []string
	every := false
	for _, r := range contractRules {
		for _, c := range r.changes(old, new) {
			if r.rekeys {
				rekeyed = append(rekeyed, c.text)
				continue
			}
			fingerprint = append(fingerprint, c.text)
			every = every || c.every
		}
	}
	if len(rekeyed) == 0 && len(fingerprint) == 0 {
		return ""
	}
	what := rekeyed
	if len(fingerprint) > 0 {
		what = append(what, "fingerprint: "+strings.Join(fingerprint, ", "))
	}
	return strings.Join(what, "; ") + ". " + retryEffect(old, new, len(rekeyed) > 0, every) + "; see " + contractDoc + " for how to roll the change out"
}

// retryEffect says what the change does to a request retried across its
// deploy: rekeyed says that the keys change, every that the fingerprint
// of every request does.
func retryEffect(old, new opContract, rekeyed, every bool) string {
	const retry = "a request sent with an Idempotency-Key before this is deployed and retried with the same key after it"
	oldH, newH := old.ScopeHeader, new.ScopeHeader
	switch {
	case old.Name != new.Name:
		return "Its keys change: " + retry + " runs again, as a new request"
	case keyText(old) != keyText(new):
		return fmt.Sprintf("Its keys change: a request sent before this is deployed and retried after it is keyed by %s instead of %s, and runs again, as a new request, or gets 400 without %[1]s", keyText(new), keyText(old))
	case !strings.EqualFold(oldH, newH) && oldH != "" && newH != "":
		// The scope is the header's value, not its name.
		return fmt.Sprintf("Its keys change: %s is scoped by its %s header instead of its %s header, and runs again, as a new request, unless the two hold the same value (without %s it gets 400)", retry, newH, oldH, newH)
	case !strings.EqualFold(oldH, newH) && newH != "":
		return fmt.Sprintf("Its keys change: %s is scoped by its %s header now, and runs again, as a new request (without %s it gets 400)", retry, newH, newH)
	case !strings.EqualFold(oldH, newH):
		return fmt.Sprintf("Its keys change: %s is no longer scoped by its %s header, and runs again, as a new request", retry, oldH)
	case rekeyed:
		// Only function: true changed, which says what the Go code does:
		// idem.Options.Scope, when set, scopes every annotated operation.
		return "If idem.Options.Scope is set or unset in the same deploy, the keys of every annotated operation change (it applies to all of them): " + retry + " runs again, as a new request"
	case every:
		return "Its fingerprint changes: " + retry + " gets 422, as a different request under the same key"
	}
	return "Its fingerprint changes for requests that hold what changed: such " + retry + " gets 422, as a different request under the same key"
}

// renamedOperation finds a new operationId: the namespace of the keys.
func renamedOperation(old, new opContract) []contractChange {
	if old.Name == new.Name {
		return nil
	}
	return []contractChange{{text: fmt.Sprintf("operationId %s → %s (the keys' namespace)", old.Name, new.Name)}}
}

// rescopedOperation finds a new scope: another header, or the scope
// function taken up or given up.
func rescopedOperation(old, new opContract) []contractChange {
	if strings.EqualFold(old.ScopeHeader, new.ScopeHeader) && old.ScopeFunction == new.ScopeFunction {
		return nil
	}
	return []contractChange{{text: fmt.Sprintf("scope %s → %s", scopeText(old), scopeText(new))}}
}

// rekeyedOperation finds a new place the key is read from.
func rekeyedOperation(old, new opContract) []contractChange {
	if keyText(old) == keyText(new) {
		return nil
	}
	return []contractChange{{text: fmt.Sprintf("key %s → %s", keyText(old), keyText(new))}}
}

// keyText words where c's key is read from.
func keyText(c opContract) string {
	if len(c.Key) == 0 {
		return "the Idempotency-Key header"
	}
	parts := make([]string, len(c.Key))
	for i, k := range c.Key {
		in, name, _ := strings.Cut(k, " ")
		parts[i] = describeKeySource(keySource{In: in, Name: name})
	}
	return strings.Join(parts, " and ")
}

// paramChanges compares the parameters by location and name, as their
// canonical form keys them: one counted in the fingerprint is there in
// every request's, as null when it is not sent.
func paramChanges(old, new opContract) []contractChange {
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
	counted := func(shape string) bool { return shape != "" && shape != excludedShape && shape != notIncludedShape }
	var changes []contractChange
	for _, k := range keys {
		v := params[k]
		what := fmt.Sprintf("%s parameter %q", k[0], k[1])
		switch {
		case v[0] == v[1], !counted(v[0]) && !counted(v[1]):
			// unchanged, or counted in neither
		case v[0] == "":
			changes = append(changes, contractChange{what + " added", true})
		case v[1] == "":
			changes = append(changes, contractChange{what + " removed", true})
		case v[1] == excludedShape:
			changes = append(changes, contractChange{what + " now left out (fingerprint.exclude)", true})
		case v[0] == excludedShape:
			changes = append(changes, contractChange{what + " no longer left out (fingerprint.exclude)", true})
		case v[1] == notIncludedShape:
			changes = append(changes, contractChange{what + " now left out (not in fingerprint.include)", true})
		case v[0] == notIncludedShape:
			changes = append(changes, contractChange{what + " no longer left out (fingerprint.include)", true})
		default:
			// only requests that send it
			changes = append(changes, contractChange{fmt.Sprintf("%s type %s → %s", what, v[0], v[1]), false})
		}
	}
	return changes
}

// mediaTypeChanges compares the bodies' media types. With several, the
// fingerprint holds each under its tag, null but for the one sent: adding
// or removing one changes every request's.
func mediaTypeChanges(old, new opContract) []contractChange {
	mediaTypes := func(bodies []contractBody) []string {
		var out []string
		for _, b := range bodies {
			out = append(out, b.MediaType)
		}
		return out
	}
	om, nm := mediaTypes(old.Bodies), mediaTypes(new.Bodies)
	if slices.Equal(om, nm) {
		return nil
	}
	return []contractChange{{fmt.Sprintf("request body media types %s → %s", listText(om), listText(nm)), true}}
}

// bodyChanges compares each body of a media type both contracts have:
// the tag it is keyed by, and the shape of its Go type.
func bodyChanges(old, new opContract) []contractChange {
	var changes []contractChange
	for _, nb := range new.Bodies {
		i := slices.IndexFunc(old.Bodies, func(b contractBody) bool { return b.MediaType == nb.MediaType })
		if i < 0 {
			continue
		}
		ob := old.Bodies[i]
		if ob.Tag != nb.Tag && len(old.Bodies) == len(new.Bodies) {
			changes = append(changes, contractChange{fmt.Sprintf("request body %s keyed %s → %s", nb.MediaType, or(ob.Tag, "(none)"), or(nb.Tag, "(none)")), true})
		}
		if ob.Shape != nb.Shape {
			changes = append(changes, bodyShapeChange(ob, nb))
		}
	}
	return changes
}

// bodyShapeChange says how a body's members changed with the shape of
// its Go type, or that the type did when no member did. A member written
// whether sent or not (as null or a zero value) is in every request's
// fingerprint; one left out when empty only in those of requests that
// send it.
func bodyShapeChange(ob, nb contractBody) contractChange {
	var changes []string
	every := false
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
	return contractChange{fmt.Sprintf("request body %s: %s", nb.MediaType, strings.Join(changes, ", ")), every}
}

// excludeChanges finds the JSON pointers fingerprint.exclude added and
// removed.
func excludeChanges(old, new opContract) []contractChange {
	var changes []contractChange
	for _, p := range new.Exclude {
		if !slices.Contains(old.Exclude, p) {
			changes = append(changes, contractChange{text: fmt.Sprintf("fingerprint.exclude %s added", p)})
		}
	}
	for _, p := range old.Exclude {
		if !slices.Contains(new.Exclude, p) {
			changes = append(changes, contractChange{text: fmt.Sprintf("fingerprint.exclude %s removed", p)})
		}
	}
	return changes
}

// includeChanges finds fingerprint.include set or dropped, which changes
// what every request's fingerprint holds, and the entries it added and
// removed.
func includeChanges(old, new opContract) []contractChange {
	switch {
	case len(old.Include) == 0 && len(new.Include) == 0:
		return nil
	case len(old.Include) == 0:
		return []contractChange{{fmt.Sprintf("fingerprint.include [%s] set: only what it lists counts", strings.Join(new.Include, ", ")), true}}
	case len(new.Include) == 0:
		return []contractChange{{fmt.Sprintf("fingerprint.include [%s] dropped: every parameter and body member counts", strings.Join(old.Include, ", ")), true}}
	}
	var changes []contractChange
	for _, p := range new.Include {
		if !slices.Contains(old.Include, p) {
			changes = append(changes, contractChange{text: fmt.Sprintf("fingerprint.include %s added", p)})
		}
	}
	for _, p := range old.Include {
		if !slices.Contains(new.Include, p) {
			changes = append(changes, contractChange{text: fmt.Sprintf("fingerprint.include %s removed", p)})
		}
	}
	return changes
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
