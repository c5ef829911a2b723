package main

import (
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Package is what the check needs of one package: its path relative to
// the module ("kv", "runtime/session"), its name, its doc comment and the
// project packages its non-test files import (relative paths).
type Package struct {
	Rel, Name, Doc string
	Imports        []string
}

// Load reads every package of the module at root (vendor, testdata and
// hidden directories left out).
func Load(root string) ([]Package, error) {
	mod, err := modulePath(root)
	if err != nil {
		return nil, err
	}
	var out []Package
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		base := d.Name()
		if path != root && (strings.HasPrefix(base, ".") || base == "testdata" || base == "vendor") {
			return filepath.SkipDir
		}
		p, ok, err := loadDir(root, path, mod)
		if ok {
			out = append(out, p)
		}
		return err
	})
	return out, err
}

func modulePath(root string) (string, error) {
	data, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "module" {
			return f[1], nil
		}
	}
	return "", fmt.Errorf("no module line in %s/go.mod", root)
}

func loadDir(root, dir, mod string) (Package, bool, error) {
	fset := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return Package{}, false, err
	}
	rel, err := filepath.Rel(root, dir)
	if err != nil {
		return Package{}, false, err
	}
	p := Package{Rel: filepath.ToSlash(rel)}
	seen := map[string]bool{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, parser.ParseComments|parser.ImportsOnly)
		if err != nil {
			return Package{}, false, err
		}
		p.Name = af.Name.Name
		if af.Doc != nil {
			p.Doc += af.Doc.Text()
		}
		for _, im := range af.Imports {
			path, _ := strconv.Unquote(im.Path.Value)
			if r, ok := strings.CutPrefix(path, mod+"/"); ok && !seen[r] {
				seen[r] = true
				p.Imports = append(p.Imports, r)
			}
		}
	}
	sort.Strings(p.Imports)
	return p, p.Name != "", nil
}

// A claim is one clause of a package doc about its own imports.
type claim struct {
	negative, only bool
	named          []string // project packages the clause names
	text           string
}

var (
	// a clause ends at a full stop, semicolon or colon
	clauseEnd = regexp.MustCompile(`[.;:]`)
	verb      = regexp.MustCompile(`\bimports\b`)
	// a quotation is an example, not a claim, and a parenthetical names
	// what checks a claim or what is allowed
	quoted = regexp.MustCompile(`"[^"]*"`)
	paren  = regexp.MustCompile(`\([^()]*\)`)
)

// claims finds the clauses of doc whose subject is package p.
func claims(p Package, all []string) []claim {
	text := quoted.ReplaceAllString(strings.Join(strings.Fields(p.Doc), " "), `""`)
	for prev := ""; prev != text; { // innermost parentheticals first
		prev, text = text, paren.ReplaceAllString(text, "")
	}
	var out []claim
	for _, loc := range verb.FindAllStringIndex(text, -1) {
		before := text[:loc[0]]
		if i := strings.LastIndexAny(before, ".;:"); i >= 0 {
			before = before[i+1:]
		}
		subject, negative := selfSubject(before, p)
		if !subject {
			continue
		}
		after := text[loc[1]:]
		if i := clauseEnd.FindStringIndex(after); i != nil {
			after = after[:i[0]]
		}
		obj := strings.TrimSpace(after)
		if strings.HasPrefix(obj, "no ") || strings.HasPrefix(obj, "neither ") {
			negative = true
		}
		c := claim{negative: negative, text: strings.TrimSpace(before) + " imports " + obj,
			only: strings.Contains(" "+obj+" ", " only ") || strings.HasSuffix(strings.TrimSpace(before), " only")}
		for _, rel := range all {
			if named(obj, rel) {
				c.named = append(c.named, rel)
			}
		}
		out = append(out, c)
	}
	return out
}

// selfSubject reports whether the words before "imports" make package p
// its subject, and whether they deny ("never imports").
func selfSubject(before string, p Package) (self, negative bool) {
	w := strings.Fields(strings.ToLower(strings.Trim(before, " ,")))
	if n := len(w); n > 0 && (w[n-1] == "never" || w[n-1] == "only" || w[n-1] == "also") {
		negative = w[n-1] == "never"
		w = w[:n-1]
	}
	if n := len(w); n > 0 && w[n-1] == "and" { // "…, and imports": the sentence's subject
		return len(w) > 1 && sentenceSubject(w, p), negative
	}
	if len(w) == 0 {
		return false, negative
	}
	last := strings.Trim(w[len(w)-1], "`")
	return last == "it" || last == "package" || last == p.Name || last == strings.ToLower(p.Rel), negative
}

// sentenceSubject reports whether a sentence's first words name p.
func sentenceSubject(w []string, p Package) bool {
	first := strings.Trim(w[0], "`")
	if first == "the" || first == "this" {
		return len(w) > 1 && w[1] == "package"
	}
	return first == "it" || first == p.Name || first == strings.ToLower(p.Rel)
}

// named reports whether text names package rel as a whole word.
func named(text, rel string) bool {
	re := regexp.MustCompile("(^|[^A-Za-z0-9_/.-])`?" + regexp.QuoteMeta(rel) + "`?($|[^A-Za-z0-9_/-])")
	return re.MatchString(text)
}

// Check returns every false claim.
func Check(pkgs []Package) []string {
	var all []string
	for _, p := range pkgs {
		all = append(all, p.Rel)
	}
	var bad []string
	for _, p := range pkgs {
		for _, c := range claims(p, all) {
			for _, n := range c.named {
				has := slices.Contains(p.Imports, n)
				switch {
				case c.negative && has:
					bad = append(bad, fmt.Sprintf("%s: its doc says %q, but it imports %s", p.Rel, c.text, n))
				case !c.negative && !has:
					bad = append(bad, fmt.Sprintf("%s: its doc says %q, but it does not import %s", p.Rel, c.text, n))
				}
			}
			if c.only && !c.negative {
				for _, im := range p.Imports {
					if !slices.Contains(c.named, im) {
						bad = append(bad, fmt.Sprintf("%s: its doc says %q, but it also imports %s", p.Rel, c.text, im))
					}
				}
			}
		}
	}
	return bad
}
