package natsd

import (
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// A cluster port another process takes between freePorts and the node's
// bind leaves that node never ready; StartCluster starts the cluster again
// on other ports.
func TestStartClusterRetriesATakenPort(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	var calls atomic.Int32
	freePortsFn = func(n int) ([]int, error) {
		ports, err := freePorts(n)
		if calls.Add(1) == 1 && err == nil {
			ports[n-1] = taken.Addr().(*net.TCPAddr).Port // the third node's, taken
		}
		return ports, err
	}
	nodeReadyTimeout = 3 * time.Second
	defer func() { freePortsFn, nodeReadyTimeout = freePorts, 30*time.Second }()

	nodes, err := StartCluster(t.TempDir(), 3, false)
	if err != nil {
		t.Fatalf("StartCluster: %v", err)
	}
	defer Shutdown(nodes...)
	if calls.Load() < 2 {
		t.Fatalf("%d attempts: the taken port was not met", calls.Load())
	}
	for _, s := range nodes {
		if s.ClusterAddr() == nil || s.ClusterAddr().Port == taken.Addr().(*net.TCPAddr).Port {
			t.Fatalf("node %s on cluster address %v", s.Name(), s.ClusterAddr())
		}
	}
}
