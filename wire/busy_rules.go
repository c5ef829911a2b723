package wire

import (
	"errors"
	"fmt"
	"strings"
)

// The rules of the busy modes (inbox version 5, state version 9): a
// delivery's mode and debounce window, a configure command's default mode,
// and a checkpoint's default mode, open debounce window, the live turn's
// state before it started and its journaled calls.

// checkModeWindow checks a mode and its debounce window (the members
// named modeName and msName): the mode is one of Modes (or "", when
// allowEmpty: the session's default); the window is required with the
// mode debounce, MinDebounceMs..MaxDebounceMs, and absent (0) with any
// other mode.
func checkModeWindow(modeName, mode, msName string, ms int64, allowEmpty bool) error {
	if !ValidMode(mode) && (mode != "" || !allowEmpty) {
		return fmt.Errorf("%s %q is not one of %s", modeName, mode, strings.Join(Modes(), ", "))
	}
	switch {
	case mode == ModeDebounce && ms == 0:
		return fmt.Errorf("%s debounce needs %s", modeName, msName)
	case mode != ModeDebounce && ms != 0:
		return fmt.Errorf("%s is only for %s debounce", msName, modeName)
	case ms != 0 && (ms < MinDebounceMs || ms > MaxDebounceMs):
		return fmt.Errorf("%s %d is not in %d..%d", msName, ms, MinDebounceMs, MaxDebounceMs)
	}
	return nil
}

// validate checks a configure command's body: a default mode of Modes,
// and defaultDebounceMs with debounce, only with it.
func (c *Configure) validate() error {
	return checkModeWindow("defaultMode", c.DefaultMode, "defaultDebounceMs", c.DefaultDebounceMs, false)
}

// validateConfigure refuses the envelope's parent members on a configure
// command: it is a user's (a session's own setting), never a session
// runtime's.
func (c *Command) validateConfigure() error {
	if c.Kind == KindConfigure && (c.ParentSessionID != "" || c.Handle != "" || c.Depth != 0) {
		return errors.New("a configure command is a user's, never a session's: no parentSessionId, handle or depth")
	}
	return nil
}
