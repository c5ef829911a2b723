// Command cpushare prints a CPU profile's share by owner of the work: the
// embedded nats-server, the nats.go client, each Baton package, Go's
// garbage collector and the rest of the Go runtime. make bench's profiles
// hold the owner's and the server's samples together (the server runs in
// the bench's process); docs/performance.md reads them with this.
//
//	go run ./internal/tools/cpushare /tmp/cpu.delivery_to_step_start_100
//
// A sample counts for the innermost frame of its stack that belongs to
// one of those owners, so time spent in encoding/json or the allocator on
// behalf of Baton's code counts as Baton's. It runs go tool pprof -traces.
package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: cpushare <cpu profile>")
		os.Exit(2)
	}
	out, err := exec.Command("go", "tool", "pprof", "-traces", os.Args[1]).Output()
	if err != nil {
		fmt.Fprintln(os.Stderr, "cpushare: go tool pprof:", err)
		os.Exit(1)
	}
	shares, total := tally(out)
	print(shares, total)
}

// tally sums the samples of pprof's -traces output by owner.
func tally(out []byte) (map[string]float64, float64) {
	shares := map[string]float64{}
	total := 0.0
	var value float64
	owner := ""
	flush := func() {
		if value > 0 {
			if owner == "" {
				owner = "Go runtime: scheduler, syscalls, other"
			}
			shares[owner] += value
			total += value
		}
		value, owner = 0, ""
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(line, "-----------+"):
			flush()
			continue
		case line == "":
			continue
		}
		frame := line
		if v, rest, ok := sampleValue(line); ok {
			value, frame = v, rest
		}
		if owner == "" {
			owner = ownerOf(frame)
		}
	}
	flush()
	return shares, total
}

// sampleValue splits a trace's first line, "<value><unit> <frame>".
func sampleValue(line string) (float64, string, bool) {
	f := strings.Fields(line)
	if len(f) < 2 {
		return 0, "", false
	}
	scale := map[string]float64{"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1}
	for unit, mult := range scale {
		if num, ok := strings.CutSuffix(f[0], unit); ok {
			if v, err := strconv.ParseFloat(num, 64); err == nil {
				return v * mult, strings.Join(f[1:], " "), true
			}
		}
	}
	return 0, "", false
}

// ownerOf names a frame's owner by the import path its function begins
// with, or "" for code that works on behalf of its caller (the standard
// library, the runtime's allocator; a generic function of the standard
// library instantiated with a Baton type is still its caller's).
func ownerOf(frame string) string {
	const mod = "github.com/baton-rt/baton/"
	switch {
	case strings.HasPrefix(frame, "github.com/nats-io/nats-server/"):
		return "nats-server (embedded)"
	case strings.HasPrefix(frame, "github.com/nats-io/nats.go") || strings.HasPrefix(frame, "github.com/nats-io/nats%2ego"):
		return "nats.go client"
	case strings.HasPrefix(frame, mod):
		pkg := frame[len(mod):]
		if i := strings.IndexAny(pkg, ".("); i > 0 {
			pkg = pkg[:i]
		}
		return "baton " + pkg
	case strings.HasPrefix(frame, "main."):
		return "the bench (load and probe)"
	case strings.HasPrefix(frame, "runtime.gcBgMarkWorker") || strings.HasPrefix(frame, "runtime.gcDrain") ||
		strings.HasPrefix(frame, "runtime.bgsweep") || strings.HasPrefix(frame, "runtime.bgscavenge"):
		return "Go GC (background)"
	}
	return ""
}

func print(shares map[string]float64, total float64) {
	names := make([]string, 0, len(shares))
	for k := range shares {
		names = append(names, k)
	}
	sort.Slice(names, func(i, j int) bool { return shares[names[i]] > shares[names[j]] })
	for _, k := range names {
		fmt.Printf("%-40s %8.2fs %5.1f%%\n", k, shares[k], 100*shares[k]/total)
	}
	fmt.Printf("%-40s %8.2fs\n", "total", total)
}
