package durability_test

import (
	"flag"
	"os"
	"strconv"
	"testing"

	"github.com/baton-rt/baton/internal/proctest"
)

// parallel is how many of this package's tests run at once unless
// -parallel is given. Its tests mostly wait (leases expiring, timers,
// owner processes booting, SIGKILLed or draining), using a fraction of
// the two cores: the default, GOMAXPROCS, would leave them idle.
const parallel = 4

func TestMain(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		if err := flag.Set("test.parallel", strconv.Itoa(parallel)); err != nil {
			panic(err)
		}
	}
	os.Exit(proctest.Main(m))
}
