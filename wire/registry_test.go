package wire

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The registry guard: versions contiguous from 1, the highest is
// CurrentVersion, every version 0..current has frozen fixtures, a test file
// and a module, and exactly the versions this build produces (its
// encoders) keep a frozen schema: the current one generated, older ones
// compiled from the frozen file for their down-converting encoders.
func TestRegistryGuard(t *testing.T) {
	r := DefaultRegistry()
	for i, v := range r.Versions() {
		if v != i+1 {
			t.Fatalf("versions %v are not contiguous from 1", r.Versions())
		}
	}
	if r.Current() != CurrentVersion {
		t.Fatalf("registry current %d != CurrentVersion %d", r.Current(), CurrentVersion)
	}
	if _, ok := encoders[CurrentVersion]; !ok {
		t.Fatalf("no encoder for the current version")
	}
	for v := 0; v <= CurrentVersion; v++ {
		if len(fixtures(t, v)) == 0 {
			t.Errorf("version %d has no fixtures under testdata/v%d", v, v)
		}
		if _, err := os.Stat(fmt.Sprintf("v%d_test.go", v)); err != nil {
			t.Errorf("version %d has no test file: %v", v, err)
		}
	}
	if got, want := versionModules(t), slices.Collect(rangeInts(0, CurrentVersion)); !slices.Equal(got, want) {
		t.Errorf("version modules v<N>.go / v<N>_migration.go cover %v, want %v", got, want)
	}
	schemas, _ := filepath.Glob("testdata/schema_v*.json")
	var want []string
	for v := 1; v <= CurrentVersion; v++ {
		if _, ok := encoders[v]; ok {
			want = append(want, fmt.Sprintf("testdata/schema_v%d.json", v))
		}
	}
	if !slices.Equal(schemas, want) {
		t.Errorf("frozen command schemas %v, want %v (one per produced version; history is fixtures plus migrations)", schemas, want)
	}
}

// versionModules lists N for every non-test file vN.go or vN_migration.go.
func versionModules(t *testing.T) []int {
	files, err := filepath.Glob("v*.go")
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`^v(\d+)(_migration)?\.go$`)
	var out []int
	for _, f := range files {
		if m := re.FindStringSubmatch(f); m != nil {
			n, _ := strconv.Atoi(m[1])
			if !slices.Contains(out, n) {
				out = append(out, n)
			}
		}
	}
	slices.Sort(out)
	return out
}

func rangeInts(lo, hi int) func(func(int) bool) {
	return func(yield func(int) bool) {
		for i := lo; i <= hi; i++ {
			if !yield(i) {
				return
			}
		}
	}
}

// Migration modules are pure data transforms: no clock, no I/O, and no
// reference to encoder or decoder policy.
func TestMigrationsArePure(t *testing.T) {
	allowedImports := []string{"encoding/json", "errors", "fmt", "maps", "slices", "strconv", "strings"}
	policy := []string{"Encode", "Decode", "encoders", "encodeV1", "encodeV2", "encodeV3", "encodeV4", "encodeV5", "normalizeCommand",
		"commandV1", "commandV2", "commandV3", "commandV4", "commandV5", "commandCurrent", "marshal", "defaultRegistry", "Command"}
	files, _ := filepath.Glob("v*_migration.go")
	if len(files) == 0 {
		t.Fatal("no migration modules found")
	}
	for _, f := range files {
		file, err := parser.ParseFile(token.NewFileSet(), f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range file.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); !slices.Contains(allowedImports, p) {
				t.Errorf("%s imports %s", f, p)
			}
		}
		ast.Inspect(file, func(n ast.Node) bool {
			if id, ok := n.(*ast.Ident); ok && slices.Contains(policy, id.Name) {
				t.Errorf("%s refers to policy identifier %s", f, id.Name)
			}
			return true
		})
	}
}

func TestRegisterIsContiguous(t *testing.T) {
	r := DefaultRegistry()
	noop := func(d map[string]any) (map[string]any, error) { return d, nil }
	for _, v := range []int{0, 1, CurrentVersion + 2} {
		if err := r.Register(v, noop); !errors.Is(err, ErrRegistry) {
			t.Errorf("Register(%d): err = %v, want ErrRegistry", v, err)
		}
	}
	if err := r.Register(CurrentVersion+1, nil); !errors.Is(err, ErrRegistry) {
		t.Errorf("Register(nil): err = %v", err)
	}
	if NewRegistry().Current() != 0 || DefaultRegistry().Current() != CurrentVersion {
		t.Error("DefaultRegistry must return an independent copy")
	}
}

// A migration that forgets to stamp its version is caught.
func TestRegistryChecksStamp(t *testing.T) {
	r := NewRegistry()
	_ = r.Register(1, func(d map[string]any) (map[string]any, error) { return d, nil })
	_, _, err := r.Upgrade([]byte(`{"message":"x"}`))
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "stamped") {
		t.Fatalf("err = %v", err)
	}
}
