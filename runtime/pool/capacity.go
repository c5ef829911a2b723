package pool

import (
	"errors"
	"time"
)

// ErrAtCapacity reports that this owner process holds its maximum of loaded
// sessions and none could hibernate in time.
var ErrAtCapacity = errors.New("pool: owner process at its loaded-session capacity")

// capacityWait bounds how long a load waits for a quiet session to make room.
const capacityWait = 3 * time.Second
