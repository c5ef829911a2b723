package owner

import "errors"

// ErrInvalidConfig is the error Config.Validate and Run return for a
// setting out of range; the message names the setting's flag
// ("owner: invalid configuration: --lease-ttl 1500ms: want whole seconds,
// at least 1s").
var ErrInvalidConfig = errors.New("owner: invalid configuration")

// ErrOption is the error Main reports for an Option built with a bad
// argument (WithName(""), WithExecLog(nil)).
var ErrOption = errors.New("owner: invalid option")
