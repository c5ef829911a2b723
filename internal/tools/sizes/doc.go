// Command sizes is the size check `make lint` runs: no production file over
// 600 lines and no function over 80 (docs/architecture.md, "Sizes" in the
// house style). It walks the module's non-test Go files (it skips
// *_test.go, testdata, vendor and directories whose names begin with "." or
// "_", as the go tool does, and generated files: those with the standard
// "Code generated … DO NOT EDIT." line), parses each with go/parser and
// measures
//
//   - every file, by its number of lines;
//   - every function and method (ast.FuncDecl), from the func keyword to
//     its closing brace, doc comment excluded;
//   - every function literal in a top-level var declaration (a handler table,
//     `var run = func() {…}`), named after the variable.
//
// It prints one line per offender, `path:line name N lines`, and exits 1.
// The exceptions (a declarative table, a file being split) are the entries
// of allowList in allow.go, each with its reason; an entry that no longer
// matches an offender is reported too, so the list only shrinks.
//
// Usage, from the module root:
//
//	go run ./internal/tools/sizes [-root dir] [-max-file 600] [-max-func 80]
package main
