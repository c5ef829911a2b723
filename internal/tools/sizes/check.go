package main

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Limits are the largest sizes, in lines, the check lets through.
type Limits struct {
	File int // lines of a file
	Func int // lines of a function, func keyword to closing brace
}

// allow is one exception: a file (Func empty) or one function of it.
type allow struct {
	Path   string
	Func   string
	Reason string
}

// Offender is a file or a function over its limit.
type Offender struct {
	Path  string // slash-separated, relative to the root
	Line  int    // where it begins
	Name  string // the function's name, or "file"
	Lines int
}

func (o Offender) String() string {
	return fmt.Sprintf("%s:%d %s %d lines", o.Path, o.Line, o.Name, o.Lines)
}

// fileName is the Name of an Offender that is a whole file.
const fileName = "file"

// Result is what a check found: the offenders no entry allows, and the
// entries that allowed nothing (stale: their offender was split or renamed).
type Result struct {
	Offenders []Offender
	Stale     []allow
}

// Failed reports whether the check fails.
func (r Result) Failed() bool { return len(r.Offenders) > 0 || len(r.Stale) > 0 }

// Check measures every non-test Go file under root against lim and sorts
// the offenders out with the allow-list.
func Check(root string, lim Limits, allowed []allow) (Result, error) {
	all, err := measureTree(root, lim)
	if err != nil {
		return Result{}, err
	}
	return filter(all, allowed), nil
}

// filter splits the offenders into those no entry allows and the entries
// that allowed none.
func filter(all []Offender, allowed []allow) Result {
	used := make([]bool, len(allowed))
	var res Result
	for _, o := range all {
		i := allowedBy(o, allowed)
		if i < 0 {
			res.Offenders = append(res.Offenders, o)
			continue
		}
		used[i] = true
	}
	for i, a := range allowed {
		if !used[i] {
			res.Stale = append(res.Stale, a)
		}
	}
	return res
}

// allowedBy returns the index of the entry that allows o, or -1.
func allowedBy(o Offender, allowed []allow) int {
	for i, a := range allowed {
		if a.Path != o.Path {
			continue
		}
		if (a.Func == "" && o.Name == fileName) || (a.Func != "" && a.Func == o.Name) {
			return i
		}
	}
	return -1
}

// measureTree measures every file sourceFile accepts under root, in path
// order.
func measureTree(root string, lim Limits) ([]Offender, error) {
	var out []Offender
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && skipDir(d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		if !sourceFile(d.Name()) {
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		found, err := measureFile(path, filepath.ToSlash(rel), lim)
		out = append(out, found...)
		return err
	})
	return out, err
}

// skipDir reports whether a directory holds no production code: testdata,
// vendor, and what the go tool ignores (names beginning with "." or "_").
func skipDir(name string) bool {
	return name == "testdata" || name == "vendor" ||
		strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")
}

// sourceFile reports whether a file is production Go source.
func sourceFile(name string) bool {
	return strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, "_test.go")
}

// measureFile returns the file itself if it is too long, then its functions
// that are, in source order; rel is the path offenders name.
func measureFile(path, rel string, lim Limits) ([]Offender, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution|parser.ParseComments)
	if err != nil {
		return nil, err
	}
	if ast.IsGenerated(f) {
		return nil, nil // a generator's output ("Code generated … DO NOT EDIT."): its sizes are the generator's
	}
	var out []Offender
	if n := countLines(src); n > lim.File {
		out = append(out, Offender{Path: rel, Line: 1, Name: fileName, Lines: n})
	}
	for _, fn := range functions(f) {
		start, end := fset.Position(fn.node.Pos()).Line, fset.Position(fn.node.End()).Line
		if n := end - start + 1; n > lim.Func {
			out = append(out, Offender{Path: rel, Line: start, Name: fn.name, Lines: n})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Line < out[j].Line })
	return out, nil
}

// countLines counts lines as wc -l does, plus a last line without a newline.
func countLines(src []byte) int {
	n := bytes.Count(src, []byte("\n"))
	if len(src) > 0 && src[len(src)-1] != '\n' {
		n++
	}
	return n
}

// function is a measured function: its name as offenders print it and the
// node whose extent is its size.
type function struct {
	name string
	node ast.Node
}

// functions returns a file's function declarations and the function literals
// of its top-level var declarations.
func functions(f *ast.File) []function {
	var out []function
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.FuncDecl:
			out = append(out, function{name: funcName(d), node: d})
		case *ast.GenDecl:
			out = append(out, literals(d)...)
		}
	}
	return out
}

// literals returns the outermost function literals in the values of a var
// declaration, each named after its variable (one literal inside a larger
// value, a table of handlers, is named after the variable too, with the
// literal's line telling them apart).
func literals(d *ast.GenDecl) []function {
	if d.Tok != token.VAR {
		return nil
	}
	var out []function
	for _, spec := range d.Specs {
		vs := spec.(*ast.ValueSpec)
		for i, v := range vs.Values {
			name := "_"
			if i < len(vs.Names) {
				name = vs.Names[i].Name
			}
			ast.Inspect(v, func(n ast.Node) bool {
				lit, ok := n.(*ast.FuncLit)
				if ok {
					out = append(out, function{name: name, node: lit})
				}
				return !ok
			})
		}
	}
	return out
}

// funcName is Name for a function, Recv.Name for a method (pointer or not,
// type parameters dropped).
func funcName(d *ast.FuncDecl) string {
	if d.Recv == nil || len(d.Recv.List) == 0 {
		return d.Name.Name
	}
	return recvName(d.Recv.List[0].Type) + "." + d.Name.Name
}

// recvName is the type name of a receiver: T of T, *T, T[P] and *T[P].
func recvName(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.StarExpr:
		return recvName(t.X)
	case *ast.IndexExpr:
		return recvName(t.X)
	case *ast.IndexListExpr:
		return recvName(t.X)
	case *ast.Ident:
		return t.Name
	}
	return "?"
}
