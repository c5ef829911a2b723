package owner_test

import (
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/baton-rt/baton/ingress"
	"github.com/baton-rt/baton/internal/harness"
)

// extDir holds the external module's main.go; its go.mod is made by the
// commands docs/agent.md shows (extModule).
var extDir = filepath.Join("testdata", "extagent")

const mod = "github.com/baton-rt/baton/"

// A module of its own builds an owner binary from owner.Main and an echo
// agent, and that binary serves a deployment: a delivery through an
// ingress of the deployment starts a session, the agent's answer is
// committed to the session's event stream, and SIGTERM drains it cleanly.
func TestExternalModuleServesDeliveries(t *testing.T) {
	t.Parallel()
	h := harness.For(t)
	bin := filepath.Join(t.TempDir(), "extowner")
	newExtModule(t, "replace").goCmd(t, "build", "-o", bin, ".")
	s := h.Server()
	env := h.Env(s.URL())
	ps := harness.NewProcs(t, 40)
	p := h.OwnerProc(ps, "extowner", bin, []string{"--nats-url", s.URL(), "--deployment-id", "v1",
		"--process-id", "ext-1", "--log-format", "json"}, 30*time.Second)
	ing := h.Ingress(s.URL(), ingress.Config{Deployment: "v1", InsecureDev: true})

	var c harness.Client
	var rec ingress.Receipt
	h.Check(c.Call(t.Context(), http.MethodPost, ing.URL()+"/v1/deliveries",
		map[string]string{"alias": "ext.1", "text": "hello"}, http.StatusAccepted, &rec))
	if !rec.Created || rec.DeploymentID != "v1" {
		t.Fatalf("POST /v1/deliveries: %+v, want a session created on v1", rec)
	}
	evs := h.Bind(env, 10*time.Second).WaitOutput(rec.SessionID, "echo: hello")
	if got := harness.Outputs(evs); !slices.Equal(got, []string{"echo: hello"}) {
		t.Fatalf("outputs %q, want the echo only", got)
	}
	h.CheckStream(evs)
	h.Terminate("extowner", p, 15*time.Second)
}

// The external module's own package imports no internal package of Baton
// (Go would refuse to build it, and this names the offender), and does
// import owner, so the check is not vacuous.
func TestExternalModuleImportsPublicPackagesOnly(t *testing.T) {
	t.Parallel()
	m := newExtModule(t, "replace")
	imports := strings.Fields(m.goCmd(t, "list", "-f", "{{join .Imports \" \"}}", "."))
	if !slices.Contains(imports, mod+"owner") {
		t.Fatalf("the external module imports %v, not %sowner", imports, mod)
	}
	for _, imp := range imports {
		if strings.HasPrefix(imp, mod) && strings.Contains(imp+"/", "/internal/") {
			t.Errorf("the external module imports %s: a user's module cannot", imp)
		}
	}
}

// The workspace that docs/agent.md shows as the other way to depend on an
// unpublished Baton builds the owner binary.
func TestExternalModuleBuildsInWorkspace(t *testing.T) {
	t.Parallel()
	m := newExtModule(t, "workspace")
	bin := filepath.Join(t.TempDir(), "extowner")
	m.goCmd(t, "build", "-o", bin, ".")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("go build in the workspace wrote no binary: %v", err)
	}
}

// docs/agent.md, "Write your own agent", shows the external module's
// main.go as it is.
func TestAgentDocShowsExternalModule(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile(filepath.Join("..", "docs", "agent.md"))
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(filepath.Join(extDir, "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n## Write your own agent\n")
	_, block, ok2 := strings.Cut(section, "\n```go\n")
	block, _, ok3 := strings.Cut(block, "\n```\n")
	if !ok || !ok2 || !ok3 {
		t.Fatal(`docs/agent.md has no Go block under "## Write your own agent"`)
	}
	if block+"\n" != string(src) {
		t.Fatalf("docs/agent.md's agent differs from %s:\n%s", filepath.Join(extDir, "main.go"), block)
	}
}
