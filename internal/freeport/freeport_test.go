package freeport

import (
	"net"
	"strconv"
	"testing"
)

// TestPickBelowEphemeralRange: the ports are distinct, free, and below
// the kernel's ephemeral range, where no outgoing connection or port-0
// listener can be given them.
func TestPickBelowEphemeralRange(t *testing.T) {
	lo, ok := ephemeralStart()
	if !ok || lo-Floor < 1000 {
		t.Fatalf("this test needs Linux's %s with room below it: start %d, read %v", rangeFile, lo, ok)
	}
	ports, err := Pick(5)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if p < Floor || p >= lo {
			t.Fatalf("port %d outside [%d, %d)", p, Floor, lo)
		}
		if seen[p] {
			t.Fatalf("port %d twice in %v", p, ports)
		}
		seen[p] = true
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			t.Fatalf("port %d not free: %v", p, err)
		}
		l.Close()
	}
}
