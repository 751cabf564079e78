package engine

import (
	"errors"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Stats counts, since Open, the storage failures of the data path by kind,
// for the broker to export as metrics. Every failure is counted once, under
// its first matching kind.
type Stats struct {
	NoSpace        int64 // writes that failed with ENOSPC (the append was undone)
	EIO            int64 // reads, writes or syncs that failed with EIO
	OtherIO        int64 // other I/O errors of the data path
	CorruptBatches int64 // damaged batches found (at Open, by a scrub, by a read)
	DirsOffline    int64 // log directories taken offline
	DamagedLogs    int64 // logs with damage recorded now
	IndexRebuilds  int64 // indexes rebuilt since Open (at Open or found wrong in use)
	ScrubbedBytes  int64 // bytes whose CRCs the scrubber and Scrub checked
	ScrubPasses    int64 // completed background scrub passes
	// The log cleaner's (CleanerStats has the rest, and the figures per log).
	CleanerPasses       int64 // passes completed
	CleanerBytesRead    int64 // bytes read by the cleaner
	CleanerBytesWritten int64 // bytes of cleaned segments written
	UncleanableLogs     int64 // compacted logs the cleaner gave up on (damaged or undecodable data)
}

type failureKind int

const (
	failNoSpace failureKind = iota
	failEIO
	failIO
	failCorrupt
	failDirOffline
	numFailureKinds
)

var failureNames = [numFailureKinds]string{"no space", "EIO", "I/O error", "corrupt batch", "log directory offline"}

func classify(err error) failureKind {
	switch {
	case errors.Is(err, ErrCorrupt):
		return failCorrupt
	case errors.Is(err, syscall.ENOSPC):
		return failNoSpace
	case errors.Is(err, syscall.EIO):
		return failEIO
	}
	return failIO
}

// failureLogEvery is how often one partition's failures of one kind are
// logged at most; the ones in between are counted and reported with the next.
const failureLogEvery = time.Minute

// failures is the Manager's failure accounting.
type failures struct {
	counts        [numFailureKinds]atomic.Int64
	indexRebuilds atomic.Int64
	scrubbed      atomic.Int64
	scrubPasses   atomic.Int64

	mu   sync.Mutex
	last map[failureKey]*failureLog // under mu
}

type failureKey struct {
	where string // partition or directory
	kind  failureKind
}

type failureLog struct {
	at         time.Time
	suppressed int64
}

// report counts a failure of the data path and logs it, once per partition
// (or directory) and kind per failureLogEvery.
func (m *Manager) report(where string, kind failureKind, err error, attrs ...any) {
	m.fail.counts[kind].Add(1)
	now := time.Now()
	k := failureKey{where, kind}
	m.fail.mu.Lock()
	if m.fail.last == nil {
		m.fail.last = make(map[failureKey]*failureLog)
	}
	fl := m.fail.last[k]
	if fl != nil && now.Sub(fl.at) < failureLogEvery {
		fl.suppressed++
		m.fail.mu.Unlock()
		return
	}
	var suppressed int64
	if fl == nil {
		fl = &failureLog{}
		m.fail.last[k] = fl
	} else {
		suppressed = fl.suppressed
	}
	fl.at, fl.suppressed = now, 0
	m.fail.mu.Unlock()
	args := append([]any{"where", where, "kind", failureNames[kind], "err", err}, attrs...)
	if suppressed > 0 {
		args = append(args, "suppressed", suppressed)
	}
	m.logger.Error("storage failure", args...)
}

// reportIO classifies err and reports it (nil is ignored).
func (m *Manager) reportIO(where string, err error, attrs ...any) {
	if err == nil || errors.Is(err, ErrClosed) {
		return
	}
	m.report(where, classify(err), err, attrs...)
}

// Stats returns the failure counters.
func (m *Manager) Stats() Stats {
	st := Stats{
		NoSpace:        m.fail.counts[failNoSpace].Load(),
		EIO:            m.fail.counts[failEIO].Load(),
		OtherIO:        m.fail.counts[failIO].Load(),
		CorruptBatches: m.fail.counts[failCorrupt].Load(),
		DirsOffline:    m.fail.counts[failDirOffline].Load(),
		IndexRebuilds:  m.fail.indexRebuilds.Load(),
		ScrubbedBytes:  m.fail.scrubbed.Load(),
		ScrubPasses:    m.fail.scrubPasses.Load(),
	}
	st.DamagedLogs = int64(len(m.Damaged()))
	st.CleanerPasses = m.cl.stats.passes.Load()
	st.CleanerBytesRead = m.cl.stats.bytesRead.Load()
	st.CleanerBytesWritten = m.cl.stats.bytesWritten.Load()
	logs := m.Logs()
	m.cl.mu.Lock()
	for _, l := range logs {
		if l.cstate.uncleanable != nil {
			st.UncleanableLogs++
		}
	}
	m.cl.mu.Unlock()
	return st
}

// RecoveryStats says what Open did to bring the logs back (Manager.Recovery)
// or what it did to one log (Log.Recovery).
type RecoveryStats struct {
	Logs                 int           // logs opened
	CleanLogs            int           // opened after a clean shutdown (tail checked only)
	RecoveredLogs        int           // recovered after a crash (scanned from the recovery point)
	SegmentsScanned      int           // segments whose every batch was read and checked
	BytesScanned         int64         // bytes of valid batches those scans read
	BytesTruncated       int64         // bytes cut off: torn or corrupt tails, segments after them
	PreallocatedBytesCut int64         // blocks allocated ahead of the appends (zeros) cut off an active segment's tail (prealloc.go)
	SegmentsDeleted      int           // segments deleted after a cut
	IndexesRebuilt       int           // segments whose indexes were rebuilt
	TailBytesVerified    int64         // bytes of tail batches CRC-checked after a clean shutdown
	DamagedBatches       int           // damage found and recorded (not cut) at Open
	SwapsCompleted       int           // swaps of cleaned segments a crash cut, finished
	SwapsDiscarded       int           // ... cut before their commit point, undone
	Duration             time.Duration // wall time of Open's recovery (Manager only)
}

func (r *RecoveryStats) add(o RecoveryStats) {
	r.Logs += o.Logs
	r.CleanLogs += o.CleanLogs
	r.RecoveredLogs += o.RecoveredLogs
	r.SegmentsScanned += o.SegmentsScanned
	r.BytesScanned += o.BytesScanned
	r.BytesTruncated += o.BytesTruncated
	r.PreallocatedBytesCut += o.PreallocatedBytesCut
	r.SegmentsDeleted += o.SegmentsDeleted
	r.IndexesRebuilt += o.IndexesRebuilt
	r.TailBytesVerified += o.TailBytesVerified
	r.DamagedBatches += o.DamagedBatches
	r.SwapsCompleted += o.SwapsCompleted
	r.SwapsDiscarded += o.SwapsDiscarded
}

// Recovery returns what Open did.
func (m *Manager) Recovery() RecoveryStats { return m.recovery }

// Recovery returns what Open did to this log (zero for a log created since).
func (l *Log) Recovery() RecoveryStats { return l.rec }
