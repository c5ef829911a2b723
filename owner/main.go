package owner

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/baton-rt/baton/internal/app"
	"github.com/baton-rt/baton/runtime"
)

// Main is the main function of an owner binary that runs agent: it parses
// the process's flags (--help lists them), runs the owner (Run) until
// SIGTERM, SIGINT or SIGHUP, drains, and exits — 0 after a clean shutdown, --help
// or --version, 2 for a usage error (a bad flag or value, an invalid
// Option), 1 when the owner failed. A second signal aborts the drain at
// once (exit 128 + the signal's number). Logs go to stderr: text on a
// terminal, JSON otherwise (--log-format, --log-level or LOG_LEVEL).
func Main(agent runtime.Agent, opts ...Option) {
	o, err := newOptions(opts)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", o.name, err)
		os.Exit(2)
	}
	app.Main(binary(agent, o))
}

// binary is Main's command for app.Main.
func binary(agent runtime.Agent, o options) app.Binary[flags] {
	return app.Binary[flags]{
		Name: o.name,
		Parse: func(args []string) (flags, error) {
			f, err := parseFlags(args, o)
			if err != nil {
				o.runCleanups()
			}
			return f, err
		},
		Logger: func(f flags, w io.Writer) *slog.Logger { return f.common.Logger(w) },
		Run: func(ctx context.Context, f flags, log *slog.Logger) error {
			defer o.runCleanups()
			f.cfg.Logger = log
			return run(ctx, f.cfg, f.agent.agent(agent), f.extras(o))
		},
	}
}

// DefaultAbout is the paragraph --help shows above the flags unless
// WithAbout replaces it.
const DefaultAbout = `Runs an owner pool process of one exact deployment: it holds a lease, serves
start and wake requests on baton.deploy.<deployment>.*, runs sessions with
this binary's agent and drains on SIGTERM, SIGINT or SIGHUP (a second signal
aborts). With an empty --nats-url it embeds a NATS server (JetStream, store
--data-dir); with --nats-only it runs only that server, for owners and
ingresses of any deployment to connect to.`

// Option changes what Main offers: the binary's name and help text, flags
// of its own, and the test aids it opts into. An Option built with a bad argument makes
// Main exit with a usage error (ErrOption).
type Option func(*options) error

type options struct {
	name   string // usage line and error prefix
	about  string
	fault  bool                              // --fault
	attach func(l ExecLog, processID string) // --exec-log
	own    []ownFlags                        // WithFlags, in order
	tasks  map[string]runtime.TaskHandler    // WithTask
	clean  []func()                          // WithCleanup, in order
}

func newOptions(opts []Option) (options, error) {
	o := options{name: "owner", about: DefaultAbout}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return o, err
		}
	}
	return o, nil
}

// WithName names the binary in its usage line ("Usage: <name> [flags]"),
// its error messages and --version (default "owner").
func WithName(name string) Option {
	return func(o *options) error {
		if name == "" {
			return fmt.Errorf("%w: WithName: an empty name", ErrOption)
		}
		o.name = name
		return nil
	}
}

// WithAbout replaces DefaultAbout, the text --help shows above the flags.
func WithAbout(text string) Option {
	return func(o *options) error {
		o.about = text
		return nil
	}
}

// WithFlags adds flags of the binary's own to Main's: register adds them
// to Main's flag set before the command line is parsed (--help lists them
// beside owner's), and check, when not nil, runs once parsing and owner's
// own checks succeeded (not for --help, --version or --nats-only), to
// check their values or build what they configure. An error of check is a
// usage error: Main prints it and exits 2, as for a bad owner flag. A
// flag whose name is already an owner flag (or one of an earlier
// WithFlags) is refused the same way, naming it, before anything runs;
// so is a register that panics (a name it defines twice). The flags'
// values are set when Run starts, so an agent reads what check left
// behind, never the flag variables before Main parsed them.
func WithFlags(register func(fs *flag.FlagSet), check func() error) Option {
	return func(o *options) error {
		if register == nil {
			return fmt.Errorf("%w: WithFlags: a nil register", ErrOption)
		}
		o.own = append(o.own, ownFlags{register: register, check: check})
		return nil
	}
}

// WithTask registers handler for the background tasks of kind: a step
// that returns runtime.OutcomeTask with a TaskSpec of that kind starts
// one, any owner process of the deployment runs it (at least once: make
// its effect idempotent by its ID), and its result returns to the session
// as task.result (docs/agent.md, "Background tasks"). "sleep" is built in;
// registering it replaces the built-in. An empty kind, a nil handler or a
// kind registered twice is an ErrOption.
func WithTask(kind string, handler runtime.TaskHandler) Option {
	return func(o *options) error {
		switch {
		case kind == "" || len(kind) > runtime.MaxTaskKindBytes:
			return fmt.Errorf("%w: WithTask: kind %q: want 1 to %d bytes", ErrOption, kind, runtime.MaxTaskKindBytes)
		case handler == nil:
			return fmt.Errorf("%w: WithTask(%q): a nil handler", ErrOption, kind)
		case o.tasks[kind] != nil:
			return fmt.Errorf("%w: WithTask: kind %q registered twice", ErrOption, kind)
		}
		if o.tasks == nil {
			o.tasks = map[string]runtime.TaskHandler{}
		}
		o.tasks[kind] = handler
		return nil
	}
}

// WithCleanup adds f to what Main runs before the process exits: once the
// owner has stopped (Run returned after the drain, so no step runs any
// more), or after a usage error, --help or --version — for what a
// WithFlags check started, such as a connection or a subprocess the agent
// uses. The functions run once each, the last added first; a second
// signal's abort exits without them.
func WithCleanup(f func()) Option {
	return func(o *options) error {
		if f == nil {
			return fmt.Errorf("%w: WithCleanup: a nil function", ErrOption)
		}
		o.clean = append(o.clean, f)
		return nil
	}
}

// runCleanups runs WithCleanup's functions, last first.
func (o options) runCleanups() {
	for i := len(o.clean) - 1; i >= 0; i-- {
		o.clean[i]()
	}
}

// WithFaultFlag adds the test aid --fault: the process SIGKILLs itself at
// a named point of the pool (right after the Nth commit, index write or
// claim), for crash tests. Offer it in test binaries only: any command
// line can then make the process kill itself.
func WithFaultFlag() Option {
	return func(o *options) error {
		o.fault = true
		return nil
	}
}

// ExecLog is the execution log WithExecLog hands an agent: Record notes
// that the step stepKey of session sessionID runs in process (the demo
// agent's Log takes it as it is).
type ExecLog interface {
	Record(sessionID, stepKey, process string)
}

// WithExecLog adds the test aid --exec-log <file>: when the flag is given,
// Run opens the file (created or appended to; one JSON line per step)
// before the owner starts, calls attach with it and the process ID, and
// closes it when the owner has stopped. attach hands the log to the agent,
// which records each step it runs, so tests that kill processes can check
// from outside that no committed step ran twice.
func WithExecLog(attach func(log ExecLog, processID string)) Option {
	return func(o *options) error {
		if attach == nil {
			return fmt.Errorf("%w: WithExecLog: a nil hook", ErrOption)
		}
		o.attach = attach
		return nil
	}
}
