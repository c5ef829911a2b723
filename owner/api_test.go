package owner

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// No exported declaration of the package names a type of an internal
// package: another module could not name it (nor so much as write down a
// Config with such a field). The check reads the source: every exported
// function's signature, every exported type, every exported field,
// constant and variable type.
func TestExportedAPINamesNoInternalType(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	defer func() {
		if checked < 10 { // Main, Run, Config, DefaultConfig, the options, the errors…
			t.Errorf("only %d exported declarations checked", checked)
		}
	}()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		internal := internalImports(f)
		exprs := exportedTypeExprs(f)
		checked += len(exprs)
		for _, expr := range exprs {
			ast.Inspect(expr, func(n ast.Node) bool {
				if sel, ok := n.(*ast.SelectorExpr); ok {
					if id, ok := sel.X.(*ast.Ident); ok && internal[id.Name] != "" {
						t.Errorf("%s: the exported API names %s.%s of %s", fset.Position(sel.Pos()), id.Name, sel.Sel.Name, internal[id.Name])
					}
				}
				return true
			})
		}
	}
}

// internalImports maps the names f imports internal packages under to
// their paths.
func internalImports(f *ast.File) map[string]string {
	out := map[string]string{}
	for _, imp := range f.Imports {
		path, _ := strconv.Unquote(imp.Path.Value)
		if !strings.Contains(path+"/", "/internal/") {
			continue
		}
		name := filepath.Base(path)
		if imp.Name != nil {
			name = imp.Name.Name
		}
		out[name] = path
	}
	return out
}

// exportedTypeExprs lists the type expressions of f's exported API:
// exported functions' and methods' signatures, exported type specs (their
// unexported struct fields left out), the types and initial values of
// exported constants and variables.
func exportedTypeExprs(f *ast.File) []ast.Expr {
	var out []ast.Expr
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Name.IsExported() && (d.Recv == nil || exportedRecv(d.Recv)) {
				out = append(out, d.Type)
			}
		case *ast.GenDecl:
			out = append(out, exportedSpecs(d)...)
		}
	}
	return out
}

func exportedSpecs(d *ast.GenDecl) []ast.Expr {
	var out []ast.Expr
	for _, s := range d.Specs {
		switch s := s.(type) {
		case *ast.TypeSpec:
			if s.Name.IsExported() {
				out = append(out, exportedFields(s.Type))
			}
		case *ast.ValueSpec:
			// The value too: an exported value initialised from an
			// internal package may have that package's type.
			if slices.ContainsFunc(s.Names, (*ast.Ident).IsExported) {
				if s.Type != nil {
					out = append(out, s.Type)
				}
				out = append(out, s.Values...)
			}
		}
	}
	return out
}

// exportedFields is a struct type without its unexported fields; any other
// type as is.
func exportedFields(e ast.Expr) ast.Expr {
	st, ok := e.(*ast.StructType)
	if !ok {
		return e
	}
	kept := &ast.FieldList{}
	for _, fl := range st.Fields.List {
		if len(fl.Names) == 0 || fl.Names[0].IsExported() {
			kept.List = append(kept.List, fl)
		}
	}
	return &ast.StructType{Fields: kept}
}

func exportedRecv(recv *ast.FieldList) bool {
	t := recv.List[0].Type
	if star, ok := t.(*ast.StarExpr); ok {
		t = star.X
	}
	id, ok := t.(*ast.Ident)
	return ok && id.IsExported()
}
