package generator

import (
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"slices"
	"strconv"

	"github.com/oapi-codegen/oapi-codegen/v2/pkg/codegen"
)

// The constants of oapi-codegen's enums, named as its GenerateEnums
// names them, for the prediction of its models' names (predict.go).

// enumConst is an enum of oapi-codegen's output, whose constants are
// named after its values, or after its type and values when prefixed.
type enumConst struct {
	td       codegen.TypeDefinition
	prefixed bool
}

// names returns the enum's constants' names, with their values.
func (e *enumConst) names() map[string]string {
	if !e.prefixed {
		return e.td.Schema.EnumValues
	}
	named := make(map[string]string, len(e.td.Schema.EnumValues))
	for k, v := range e.td.Schema.EnumValues {
		named[e.td.TypeName+codegen.UppercaseFirstCharacter(k)] = v
	}
	return named
}

// enumConstDecls returns the constants oapi-codegen declares for the
// enums among types, the types its models are made of, as its
// GenerateEnums names them: each enum once, by type name; prefixed with
// the type's name when an enum shares a value's name with another
// (always, with compatibility.always-prefix-enum-values), or with a type,
// or names one value like its own type. ok is false where oapi-codegen
// would refuse an enum.
func enumConstDecls(types []codegen.TypeDefinition, alwaysPrefix bool) (decls []nameDecl, ok bool) {
	var enums []*enumConst
	seen := map[string]bool{}
	others := map[string]bool{} // the types that are not enums
	for _, td := range types {
		if len(td.Schema.EnumValues) == 0 {
			others[td.TypeName] = true
		}
		if seen[td.TypeName] {
			continue
		}
		seen[td.TypeName] = true
		if len(td.Schema.EnumValues) > 0 {
			enums = append(enums, &enumConst{td: td, prefixed: alwaysPrefix || td.ForceEnumPrefix})
		}
	}
	prefixMeetingEnums(enums)
	for _, e := range enums {
		for k := range e.td.Schema.EnumValues {
			if others[k] || (!e.prefixed && k == e.td.TypeName) {
				e.prefixed = true
			}
		}
	}
	for _, e := range enums {
		str := e.td.Schema.GoType == "string"
		named := e.names()
		for _, name := range slices.Sorted(maps.Keys(named)) {
			lit, ok := enumLiteral(named[name], str)
			if !ok {
				return nil, false
			}
			decls = append(decls, nameDecl{name: name, kind: token.CONST, constType: e.td.TypeName, constValue: lit})
		}
	}
	return decls, true
}

// prefixMeetingEnums marks the enums oapi-codegen prefixes because they
// share a value's name with another enum, or their constants' names meet.
func prefixMeetingEnums(enums []*enumConst) {
	// oapi-codegen prefixes two enums that share a value's name, or whose
	// constants' names meet, until none meet; prefixing only adds
	// meetings, so the enums it prefixes are those found by meeting here,
	// in any order, without comparing every pair.
	byValue := map[string][]*enumConst{}
	for _, e := range enums {
		for k := range e.td.Schema.EnumValues {
			byValue[k] = append(byValue[k], e)
		}
	}
	for _, sharing := range byValue {
		if len(sharing) > 1 {
			for _, e := range sharing {
				e.prefixed = true
			}
		}
	}
	for changed := true; changed; {
		changed = false
		byName := map[string][]*enumConst{}
		for _, e := range enums {
			for name := range e.names() {
				byName[name] = append(byName[name], e)
			}
		}
		for _, meeting := range byName {
			if len(meeting) < 2 || !slices.ContainsFunc(meeting, func(e *enumConst) bool { return !e.prefixed }) {
				continue // both prefixed: oapi-codegen leaves them
			}
			for _, e := range meeting {
				changed = changed || !e.prefixed
				e.prefixed = true
			}
		}
	}
}

// enumLiteral is the literal of an enum constant's value, as oapi-codegen
// writes it for a string enum (str) or another; "" for a value that is
// not one literal. ok is false where oapi-codegen refuses the enum.
func enumLiteral(value string, str bool) (lit string, ok bool) {
	switch {
	case str:
		return codegen.StringToGoString(value), true
	case !numberOrBool(value):
		return "", false // oapi-codegen refuses the enum
	}
	// Written as it is, the value is one literal, or an identifier
	// (true) or expression (-1) that is none.
	x, err := parser.ParseExpr(value)
	if err != nil {
		return "", false
	}
	if b, ok := x.(*ast.BasicLit); ok {
		return b.Value, true
	}
	return "", true
}

// numberOrBool is whether oapi-codegen writes value as a non-string
// enum's constant, as its GenerateEnums checks.
func numberOrBool(value string) bool {
	if value == "true" || value == "false" {
		return true
	}
	_, err := strconv.ParseFloat(value, 64)
	return err == nil
}
