package bench

import (
	"errors"
	"fmt"
	"io"
)

// ErrLimits is wrapped by errors measuring physical limits.
var ErrLimits = errors.New("bench: limits")

// Limits are this machine's physical ceilings, measured by MeasureLimits. Every
// report can state a broker's figure as a share of them.
type Limits struct {
	Dir       string `json:"dir"`
	FileBytes int64  `json:"file_bytes"`
	// WriteMBps is sequential 1 MiB writes into the page cache; WriteThenSyncMBps
	// adds one fdatasync at the end (FinalSyncMs).
	WriteMBps         float64 `json:"write_mbps"`
	WriteThenSyncMBps float64 `json:"write_then_sync_mbps"`
	FinalSyncMs       float64 `json:"final_sync_ms"`
	// WriteSyncMBps is 1 MiB write + fdatasync, repeated.
	WriteSyncMBps float64 `json:"write_fdatasync_mbps"`
	// Fdatasync* is 4 KiB append + fdatasync latency.
	FdatasyncP50Ms   float64 `json:"fdatasync_p50_ms"`
	FdatasyncP99Ms   float64 `json:"fdatasync_p99_ms"`
	FdatasyncSamples int     `json:"fdatasync_samples"`
	LoopbackMBps     float64 `json:"loopback_tcp_mbps"`
	SendfileMBps     float64 `json:"sendfile_mbps"`
}

// WriteTable prints the limits.
func (l *Limits) WriteTable(w io.Writer) {
	fmt.Fprintf(w, "physical limits (dir %s, %d MiB files)\n", l.Dir, l.FileBytes>>20)
	fmt.Fprintf(w, "  %-38s %10.0f MB/s\n", "sequential write (page cache)", l.WriteMBps)
	fmt.Fprintf(w, "  %-38s %10.0f MB/s  (final fdatasync %.1f ms)\n", "sequential write, then one fdatasync", l.WriteThenSyncMBps, l.FinalSyncMs)
	fmt.Fprintf(w, "  %-38s %10.0f MB/s\n", "1 MiB write + fdatasync", l.WriteSyncMBps)
	fmt.Fprintf(w, "  %-38s %10.3f ms p50 %8.3f ms p99 (%d samples)\n", "4 KiB write + fdatasync latency", l.FdatasyncP50Ms, l.FdatasyncP99Ms, l.FdatasyncSamples)
	fmt.Fprintf(w, "  %-38s %10.0f MB/s\n", "loopback TCP", l.LoopbackMBps)
	fmt.Fprintf(w, "  %-38s %10.0f MB/s\n", "sendfile file to loopback TCP", l.SendfileMBps)
}
