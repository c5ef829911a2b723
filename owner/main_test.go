package owner_test

import (
	"errors"
	"os"
	"os/exec"
	"testing"
)

// exampleMainEnv names, in a child process of the test binary, the main
// function (of exampleMains) the child runs instead of the tests: an
// example shows a binary's main and runs it as a process of its own, since
// Main exits the process.
const exampleMainEnv = "BATON_OWNER_EXAMPLE_MAIN"

var exampleMains = map[string]func(){
	"withflags": withFlagsMain,
}

func TestMain(m *testing.M) {
	if name := os.Getenv(exampleMainEnv); name != "" {
		exampleMains[name]() // owner.Main exits
		os.Exit(3)
	}
	os.Exit(m.Run())
}

// runMain runs the example main name with args as a process of its own and
// returns its output (stdout, then stderr) and exit code.
func runMain(name string, args ...string) (string, int) {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), exampleMainEnv+"="+name)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return string(out), exit.ExitCode()
	}
	if err != nil {
		return err.Error(), -1
	}
	return string(out), 0
}
