// Command docimports is the package-doc check of make lint: a package's
// doc comment that says what the package imports must be true. For every
// clause of a package doc whose subject is the package itself ("record
// imports only subjects and wire", "The package is a leaf: it imports the
// standard library only", "handoff never imports kv"):
//
//   - a project package it names as imported must be imported (by the
//     package's non-test files);
//   - with "only", the package imports no project package it does not name
//     ("the standard library only": none);
//   - a project package it names after "never imports", "imports no" or
//     "imports neither" must not be imported.
//
// A parenthetical is no part of a claim (it usually names what checks the
// claim, or what is allowed), nor is a quotation. Package names are matched as whole words against
// the module's package paths ("kv", "runtime/session", "internal/failpoint").
// It exits 1 and prints each false claim, 2 on a read error.
package main
