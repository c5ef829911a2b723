package owner

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/baton-rt/baton/internal/app"
)

// ownFlags are the flags of one WithFlags option.
type ownFlags struct {
	register func(fs *flag.FlagSet)
	check    func() error
}

// registerOwn adds the flags of every WithFlags option to fs, which holds
// owner's own flags: each option registers into a flag set of its own
// first, so a name fs already has is refused with a usage error naming it
// rather than the panic of flag.FlagSet.Var.
func (o options) registerOwn(fs *flag.FlagSet) error {
	for _, own := range o.own {
		set, err := own.collect(fs.Name())
		if err != nil {
			return err
		}
		var clash []string
		set.VisitAll(func(fl *flag.Flag) {
			if fs.Lookup(fl.Name) != nil {
				clash = append(clash, "--"+fl.Name)
				return
			}
			fs.Var(fl.Value, fl.Name, fl.Usage)
		})
		if len(clash) > 0 {
			return fmt.Errorf("%w: %w: WithFlags: %s already defined (a flag of owner, or of an earlier WithFlags)",
				app.ErrUsage, ErrOption, strings.Join(clash, ", "))
		}
	}
	return nil
}

// collect runs register on a flag set of its own; a panic (a name defined
// twice) is an error.
func (own ownFlags) collect(name string) (set *flag.FlagSet, err error) {
	set = flag.NewFlagSet(name, flag.ContinueOnError)
	set.SetOutput(io.Discard)
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: %w: WithFlags: register panicked: %v", app.ErrUsage, ErrOption, p)
		}
	}()
	own.register(set)
	return set, nil
}

// checkOwn runs every WithFlags check in order; an error is a usage
// error.
func (o options) checkOwn() error {
	for _, own := range o.own {
		if own.check == nil {
			continue
		}
		if err := own.check(); err != nil {
			if errors.Is(err, app.ErrUsage) {
				return err
			}
			return fmt.Errorf("%w: %w", app.ErrUsage, err)
		}
	}
	return nil
}
