//go:build !linux

package purgatory

// cpuNanos is unavailable off Linux; benchmarks then report 0 cpu-ns/op.
func cpuNanos() int64 { return 0 }
