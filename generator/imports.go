package generator

import (
	"go/ast"
	"go/token"
	"slices"
	"strings"
)

// usedImports returns the source of f, a file of idemgen's templates,
// importing the packages it uses and no other. A template imports every
// package it may use, in the groups it wants them (blank lines between
// them), and no condition says when: the file keeps those it uses, in the
// template's groups, and adds the packages of types it takes from
// oapi-codegen's output (openapi_types.UUID, time.Time, a type of
// x-go-type-import), as the files beside it import them, to its group of
// the standard library's or of the others. A qualifier that nothing
// imports is left for checkCompile to report.
func usedImports(p *goPackage, f *goFile) []byte {
	groups := importGroups(p, f)
	used, _ := f.qualifiers(p.declarations(func(string, token.Pos, token.Pos) {})) // checkCompile reports twice-declared names
	// decl holds the import specs, then the declaration.
	var decl strings.Builder
	for _, g := range groups {
		var specs []goImport
		for _, i := range g {
			if slices.Contains(used, i.name) {
				specs = append(specs, i)
			}
		}
		if len(specs) == 0 {
			continue
		}
		slices.SortFunc(specs, func(a, b goImport) int { return strings.Compare(a.path, b.path) })
		if decl.Len() > 0 {
			decl.WriteString("\n")
		}
		for _, i := range specs {
			decl.WriteString("\t" + i.spec() + "\n")
		}
	}
	if decl.Len() > 0 {
		specs := decl.String()
		decl.Reset()
		decl.WriteString("import (\n" + specs + ")")
	}
	// f was formatted, and the declaration is written as gofmt writes
	// one: formatting the file again would change nothing.
	return replaceImports(p.fset, f, decl.String())
}

// importGroups are f's imports in the groups its template wrote, with the
// imports of the package's other files that f does not import by their
// name added: to the first group of the standard library's packages, or
// the first of others, made where f has none.
func importGroups(p *goPackage, f *goFile) [][]goImport {
	var groups [][]goImport
	known := map[string]bool{}
	line := -1
	for _, i := range f.imports() {
		l := p.fset.Position(i.pos).Line
		if len(groups) == 0 || l > line+1 {
			groups = append(groups, nil)
		}
		groups[len(groups)-1] = append(groups[len(groups)-1], i)
		known[i.name], line = true, l
	}
	for _, other := range p.files {
		if other == f {
			continue
		}
		for _, i := range other.imports() {
			if known[i.name] || i.name == "_" || i.name == "." {
				continue
			}
			known[i.name] = true
			g := slices.IndexFunc(groups, func(g []goImport) bool { return isStd(g[0].path) == isStd(i.path) })
			switch {
			case g >= 0:
				groups[g] = append(groups[g], i)
			case isStd(i.path):
				groups = append([][]goImport{{i}}, groups...)
			default:
				groups = append(groups, []goImport{i})
			}
		}
	}
	return groups
}

// isStd is whether an import path is of the standard library's: its
// first element has no dot.
func isStd(path string) bool {
	first, _, _ := strings.Cut(path, "/")
	return !strings.Contains(first, ".")
}

// replaceImports is f's source with its import declarations replaced by
// decl, written where the first was (a template writes one, after the
// package clause).
func replaceImports(fset *token.FileSet, f *goFile, decl string) []byte {
	offset := func(pos token.Pos) int { return fset.Position(pos).Offset }
	at := offset(f.ast.Name.End())
	out := slices.Clone(f.src[:at])
	written := false
	for _, d := range f.ast.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.IMPORT {
			continue
		}
		out = append(out, f.src[at:offset(g.Pos())]...)
		if !written {
			out = append(out, decl...)
			written = true
		}
		at = offset(g.End())
	}
	if !written {
		out = append(out, "\n\n"+decl...)
	}
	return append(out, f.src[at:]...)
}
