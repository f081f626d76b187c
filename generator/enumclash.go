package generator

import (
	"fmt"
	"go/token"
	"maps"
	"slices"
	"strings"
)

// enumRename is the renaming of an enum's constants that are named like
// other declarations: the enum's type and schema, and the values whose
// constants are renamed, with their old names.
type enumRename struct {
	typeName string
	td       typeDef
	// By the value, as the constant's literal: the old name and the new.
	old, chosen map[string]string
	names       []any // x-enum-varnames
}

// enumConstants renames the constants of enum values that oapi-codegen
// names like another declaration, a type usually: it prefixes an enum's
// constants with the enum's type name when they collide with type names,
// and the prefixed names can collide again (Stripe's source.type value
// ach_credit_transfer makes SourceTypeAchCreditTransfer, the type of the
// schema source_type_ach_credit_transfer). Each such constant gets
// "Value" appended to its name through x-enum-varnames, which changes no
// value.
func (r *resolver) enumConstants(scan *nameScan, tds map[string][]typeDef) bool {
	changed := false
	for _, name := range scan.dups {
		decls := scan.decls[name]
		var consts []nameDecl
		for _, d := range decls {
			if d.kind == token.CONST && d.constType != "" && enumDef(tds, d.constType) != nil {
				consts = append(consts, d)
			}
		}
		if len(consts) == 0 || r.done["const "+name] {
			continue
		}
		r.done["const "+name] = true
		if len(consts) == len(decls) {
			consts = consts[1:] // enum constants only: the first keeps its name
		}
		for _, d := range consts {
			td := enumDef(tds, d.constType)
			s := td.schema()
			if _, set := s.Extensions["x-enum-varnames"]; set && r.enumByTy[d.constType] == nil {
				continue // the spec names them itself
			}
			if _, set := s.Extensions["x-enumNames"]; set {
				continue
			}
			e := r.enumByTy[d.constType]
			if e == nil {
				e = &enumRename{typeName: d.constType, td: *td, old: map[string]string{}, chosen: map[string]string{}}
				// x-enum-varnames names every value of the enum. The
				// constants keep the names they have: when oapi-codegen
				// prefixes them with the type's name, that is the whole
				// name, so that they keep it even when the renaming
				// removes the collisions that made oapi-codegen prefix
				// them (x-enum-varnames names are prefixed again only on
				// a collision).
				e.names = make([]any, len(s.Enum))
				prefixed := strings.HasPrefix(name, d.constType)
				for i, v := range s.Enum {
					value := fmt.Sprintf("%v", v)
					e.names[i] = value
					if now := scan.constNamed(d.constType, constLiteral(e.td, value)); prefixed && now != "" {
						e.names[i] = now
					}
				}
				r.enumByTy[d.constType] = e
				r.enums = append(r.enums, e)
			}
			if _, ok := e.chosen[d.constValue]; !ok {
				e.old[d.constValue] = name
				e.chosen[d.constValue] = r.free(scan, name+"Value")
				for i, v := range s.Enum {
					if constLiteral(e.td, fmt.Sprintf("%v", v)) == d.constValue {
						e.names[i] = e.chosen[d.constValue]
					}
				}
				if s.Extensions == nil {
					s.Extensions = map[string]any{}
				}
				s.Extensions["x-enum-varnames"] = slices.Clone(e.names)
				r.extend(s, "x-enum-varnames")
				changed = true
			}
		}
	}
	return changed
}

// enumDef returns the type definition of the enum type name.
func enumDef(tds map[string][]typeDef, name string) *typeDef {
	for i, td := range tds[name] {
		if len(td.Schema.EnumValues) > 0 && td.schema() != nil {
			return &tds[name][i]
		}
	}
	return nil
}

// constLiteral is how oapi-codegen writes value as the enum's constant.
func constLiteral(td typeDef, value string) string {
	if td.Schema.GoType == "string" {
		return `"` + value + `"`
	}
	return value
}

// reportEnums adds the resolution of each renamed enum, with the names its
// constants have in the final output.
func (r *resolver) reportEnums(scan *nameScan) {
	for _, e := range r.enums {
		var renames []string
		for _, lit := range slices.Sorted(maps.Keys(e.old)) {
			now := scan.constNamed(e.typeName, lit)
			if now == "" {
				now = e.chosen[lit]
			}
			renames = append(renames, e.old[lit]+" is "+now)
		}
		text := fmt.Sprintf("oapi-codegen names %d constants of enum %s (%s) like other declarations; renamed them with x-enum-varnames, their values unchanged: %s", len(renames), e.typeName, e.td.JsonName, strings.Join(renames, ", "))
		if len(renames) == 1 {
			text = fmt.Sprintf("oapi-codegen names a constant of enum %s (%s) like another declaration; renamed it with x-enum-varnames, its value unchanged: %s", e.typeName, e.td.JsonName, renames[0])
		}
		r.found = append(r.found, resolution{r.locate(e.td.schema()), text})
	}
}
