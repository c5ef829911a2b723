package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	valschema "github.com/santhosh-tekuri/jsonschema/v6"
)

// -create-schemas writes a frozen schema file that does not exist yet (the
// first schema of a new version). It never overwrites: a frozen schema only
// changes by adding a new version.
var createSchemas = flag.Bool("create-schemas", false, "write missing frozen schema files (never overwrites)")

// frozen compares generated output with a frozen file under testdata.
func frozen(t *testing.T, path string, got []byte) {
	t.Helper()
	want, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) && *createSchemas {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("created %s", path)
		return
	}
	if err != nil {
		t.Fatalf("%v (a new version's schema is created with -create-schemas)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("generated schema differs from frozen %s.\n"+
			"The frozen shape cannot change: bump the version, add a one-step migration and\n"+
			"freeze the new schema (docs/wire.md). Generated:\n%s", path, got)
	}
}

func TestFrozenSchemas(t *testing.T) {
	frozen(t, fmt.Sprintf("testdata/schema_v%d.json", CurrentVersion), CommandSchema())
	frozen(t, "testdata/schema_event_v1.json", EventSchema())
	frozen(t, fmt.Sprintf("testdata/schema_checkpoint_v%d.json", CurrentStateVersion), CheckpointSchema())
	frozenBuiltins(t)
	for _, name := range AgentSchemaNames() {
		frozen(t, fmt.Sprintf("testdata/agent/%s.v%d.json", name, AgentProtocolVersion), AgentSchema(name))
	}
}

// builtinsFirst is the frozen document of the built-in kinds' first data
// schemas: version 1 of every kind that existed when it was frozen.
const builtinsFirst = "testdata/schema_events_builtin_v1.json"

// frozenBuiltins: the built-in kinds' schemas first frozen in builtinsFirst
// never change and none is dropped; every kind and data version added
// since is frozen in its own file, testdata/events/<kind>.v<N>.json
// (created with -create-schemas), and stays registered.
func frozenBuiltins(t *testing.T) {
	var first map[string]json.RawMessage
	if err := json.Unmarshal(readFile(t, builtinsFirst), &first); err != nil {
		t.Fatal(err)
	}
	reg := DefaultEvents()
	v1 := map[string]json.RawMessage{}
	for k := range first {
		v1[k] = reg.SchemaV(k, 1)
	}
	b, err := json.MarshalIndent(v1, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	frozen(t, builtinsFirst, append(b, '\n'))
	for _, k := range reg.Kinds() {
		for v := 1; v <= reg.Version(k); v++ {
			if v > 1 || first[k] == nil {
				frozen(t, fmt.Sprintf("testdata/events/%s.v%d.json", k, v), reg.SchemaV(k, v))
			}
		}
	}
	files, err := filepath.Glob("testdata/events/*.v*.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".json")
		i := strings.LastIndex(name, ".v")
		v, err := strconv.Atoi(name[i+2:])
		if err != nil || reg.SchemaV(name[:i], v) == nil {
			t.Errorf("%s: frozen, but data version %q of kind %q is not registered", f, name[i+2:], name[:i])
		}
	}
}

// frozenValidator compiles the frozen command schema file of a version
// itself, so fixtures are checked against the committed artifact,
// independently of the code that generated it.
func frozenValidator(t testing.TB, version int) *valschema.Schema {
	t.Helper()
	path := fmt.Sprintf("testdata/schema_v%d.json", version)
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	doc, err := valschema.UnmarshalJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	c := valschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource("frozen.json", doc); err != nil {
		t.Fatal(err)
	}
	return c.MustCompile("frozen.json")
}

// fixtures lists the fixture files of one version (without .want.json).
func fixtures(t testing.TB, version int) []string {
	t.Helper()
	all, err := filepath.Glob(fmt.Sprintf("testdata/v%d/*.json", version))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range all {
		if filepath.Ext(f[:len(f)-len(".json")]) != ".want" {
			out = append(out, f)
		}
	}
	return out
}

func readFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
