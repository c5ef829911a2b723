package remote_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/baton-rt/baton/internal/natsd"
	"github.com/nats-io/nats-server/v2/server"
)

// The permissions test runs a server from the NATS configuration blocks of
// docs/api.md. The convention: a line <!-- permissions:NAME --> right
// before a fenced block marks that block as the documented configuration
// NAME, an authorization { users = [ … ] } whose users the test takes
// verbatim (docBlock, docUsers). Passwords are variables
// ($WORKER_V1_PASSWORD, …), which the test's configuration file defines.

// apiDoc is docs/api.md, relative to this package.
const apiDoc = "../../docs/api.md"

// docBlock is the fenced block marked <!-- permissions:name --> in
// docs/api.md.
func docBlock(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(apiDoc)
	if err != nil {
		t.Fatal(err)
	}
	marker := "<!-- permissions:" + name + " -->\n```\n"
	_, rest, ok := strings.Cut(string(b), marker)
	if !ok {
		t.Fatalf("%s has no %q followed by a fenced block", apiDoc, strings.TrimSpace(marker))
	}
	block, _, ok := strings.Cut(rest, "\n```\n")
	if !ok {
		t.Fatalf("%s: the block of %s is not closed", apiDoc, name)
	}
	return block
}

var usersOpen = regexp.MustCompile(`(?s)^authorization \{\n  users = \[\n(.*)\n  \]\n\}$`)

// docUsers is the user entries of the documented block name (what is
// between "users = [" and its "]").
func docUsers(t *testing.T, name string) string {
	t.Helper()
	m := usersOpen.FindStringSubmatch(docBlock(t, name))
	if m == nil {
		t.Fatalf("%s: the block of %s is not authorization { users = [ … ] }", apiDoc, name)
	}
	return m[1]
}

// forDeployment is the worker block of deployment v1 for deployment dep,
// as the docs say to adapt it: v1 replaced everywhere, the variable's
// name too.
func forDeployment(users, dep string) string {
	return strings.NewReplacer("v1", dep, "V1", strings.ToUpper(dep)).Replace(users)
}

// permServer starts a JetStream server from a configuration file whose
// authorization has users (the documented entries) and vars (the
// passwords' variables); it stops when the test ends.
func permServer(t *testing.T, vars map[string]string, users ...string) *server.Server {
	t.Helper()
	dir := t.TempDir()
	var conf strings.Builder
	for k, v := range vars {
		fmt.Fprintf(&conf, "%s: %q\n", k, v)
	}
	fmt.Fprintf(&conf, "server_name: perms\nhost: 127.0.0.1\nport: -1\njetstream { store_dir: %q }\n", filepath.Join(dir, "js"))
	conf.WriteString("authorization {\n  users = [\n")
	for _, u := range users {
		conf.WriteString(u + "\n")
	}
	conf.WriteString("  ]\n}\n")
	path := filepath.Join(dir, "server.conf")
	if err := os.WriteFile(path, []byte(conf.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	opts, err := server.ProcessConfigFile(path)
	if err != nil {
		t.Fatalf("the documented permissions do not load: %v\n%s", err, conf.String())
	}
	opts.NoLog, opts.NoSigs = true, true
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	t.Cleanup(func() { natsd.Shutdown(s) })
	if !s.ReadyForConnections(20 * time.Second) {
		t.Fatal("the server from the documented permissions is not ready")
	}
	return s
}

// userURL is s's client URL with user's credentials.
func userURL(s *server.Server, user, password string) string {
	return strings.Replace(s.ClientURL(), "nats://", "nats://"+user+":"+password+"@", 1)
}
