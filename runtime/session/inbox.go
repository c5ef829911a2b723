package session

import (
	"strconv"

	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/wire"
)

// decodeCommand is the machine's input for an inbox message: the decoded
// command, or, for a payload that does not decode, a rejected command the
// machine records as wire.rejected and never applies.
func decodeCommand(seq uint64, data []byte) runtime.Command {
	c, err := wire.Decode(data)
	if err != nil {
		return rejected(seq, err)
	}
	return fromWire(seq, c)
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }
