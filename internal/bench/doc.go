// Package bench formats benchmark figures as the one-line records that
// `make bench` prints and scripts read:
//
//	BENCH name=<name> n=<count> p50_us=<x> p99_us=<y> [max_us=<m>] [ops_per_s=<z>] [baseline=<name> ratio=<r>] [k=v ...]
//
// A Reporter remembers every figure it printed, so a later figure can name an
// earlier one as its baseline: ratio is p50 over p50 for latencies and ops/s
// over ops/s for throughputs, both measured in the same run.
package bench
