package owner_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The external module's tests make their module with the commands
// docs/agent.md shows under "Depend on Baton before it is published": a
// line <!-- module:NAME --> right before a fenced sh block marks the block
// as the commands of way NAME, one go command a line, which the tests run
// as written but for the placeholder checkoutPath, replaced by this
// checkout.

// agentDoc is docs/agent.md, relative to this package.
var agentDoc = filepath.Join("..", "docs", "agent.md")

// checkoutPath is the placeholder for the Baton checkout in the commands.
const checkoutPath = "/path/to/baton"

// moduleEnv is the go command's environment of each documented way, on
// top of the test's: the replace resolves outside any workspace, the
// workspace is the go.work in the module's directory. GOFLAGS holds no
// -mod=mod (a user's default is -mod=readonly): it would add the
// requirements a missing `go mod tidy` leaves out, and so hide it. GOPROXY
// is the environment's: modules and checksums already in the module cache
// need no network.
var moduleEnv = map[string][]string{
	"replace":   {"GOWORK=off", "GOFLAGS=-buildvcs=false"},
	"workspace": {"GOWORK=", "GOFLAGS=-buildvcs=false"},
}

// extModule is the external module in a directory of its own, and the
// environment its go commands run with.
type extModule struct {
	dir string
	env []string
}

// newExtModule copies the external module's main.go into a new directory
// and runs there the documented commands of way (moduleEnv's keys).
func newExtModule(t *testing.T, way string) extModule {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(extDir, "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	m := extModule{dir: t.TempDir(), env: moduleEnv[way]}
	if err := os.WriteFile(filepath.Join(m.dir, "main.go"), src, 0o644); err != nil {
		t.Fatal(err)
	}
	checkout, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range docCommands(t, way) {
		for i := range args {
			args[i] = strings.ReplaceAll(args[i], checkoutPath, checkout)
		}
		m.goCmd(t, args[1:]...)
	}
	return m
}

// docCommands is the commands of the block marked <!-- module:way --> in
// docs/agent.md, each split into its words; every one is a go command.
func docCommands(t *testing.T, way string) [][]string {
	t.Helper()
	b, err := os.ReadFile(agentDoc)
	if err != nil {
		t.Fatal(err)
	}
	marker := "<!-- module:" + way + " -->\n```sh\n"
	_, rest, ok := strings.Cut(string(b), marker)
	block, _, ok2 := strings.Cut(rest, "\n```\n")
	if !ok || !ok2 {
		t.Fatalf("%s has no %q followed by a closed fenced block", agentDoc, strings.TrimSpace(marker))
	}
	var cmds [][]string
	for line := range strings.SplitSeq(block, "\n") {
		args := strings.Fields(line)
		if len(args) < 2 || args[0] != "go" || strings.ContainsAny(line, "#&|;'\"$`\\") {
			t.Fatalf("%s, block %s: %q is not a plain go command", agentDoc, way, line)
		}
		cmds = append(cmds, args)
	}
	if !strings.Contains(block, checkoutPath) {
		t.Fatalf("%s, block %s: no command names the checkout %s", agentDoc, way, checkoutPath)
	}
	return cmds
}

// goCmd runs the go command in the module's directory with its
// environment and returns its standard output.
func (m extModule) goCmd(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), "go", args...)
	cmd.Dir = m.dir
	cmd.Env = append(os.Environ(), m.env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go %s in %s: %v\n%s", strings.Join(args, " "), m.dir, err, stderr.String())
	}
	return string(out)
}
