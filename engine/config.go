package engine

import (
	"fmt"
	"log/slog"
	"math"
	"strings"
	"time"

	"github.com/samsa-broker/samsa/engine/vfs"
)

// TopicPartition names one partition log.
type TopicPartition struct {
	Topic     string
	Partition int32
}

func (tp TopicPartition) String() string { return fmt.Sprintf("%s-%d", tp.Topic, tp.Partition) }

// TimestampType is message.timestamp.type.
type TimestampType int8

const (
	CreateTime    TimestampType = 0
	LogAppendTime TimestampType = 1
)

// LogConfig holds Kafka's topic-level keys that the engine honours.
type LogConfig struct {
	SegmentBytes       int64         // segment.bytes (1 GiB)
	SegmentMs          int64         // segment.ms (7 days)
	SegmentIndexBytes  int32         // segment.index.bytes (10 MiB)
	IndexIntervalBytes int32         // index.interval.bytes (4096)
	RetentionMs        int64         // retention.ms (7 days; -1 = forever)
	RetentionBytes     int64         // retention.bytes (-1 = no limit)
	MaxMessageBytes    int32         // max.message.bytes (1048588)
	TimestampType      TimestampType // message.timestamp.type
	FileDeleteDelayMs  int64         // file.delete.delay.ms (60000)

	// Compact is cleanup.policy containing compact: the log cleaner keeps
	// the last record of each key (see Cleaner in the package doc).
	Compact bool
	// Delete is cleanup.policy containing delete. It is read only with
	// Compact ("compact,delete": both apply); a log without Compact is
	// always subject to retention.ms and retention.bytes. A compacted
	// log without Delete keeps its segments whatever their age and size
	// (segments below the log start offset still go).
	Delete bool
	// MinCleanableDirtyRatio is min.cleanable.dirty.ratio (0.5): the
	// cleaner takes a log once the dirty part (not yet cleaned) is more
	// than this fraction of the cleanable log.
	MinCleanableDirtyRatio float64
	// MinCompactionLagMs is min.compaction.lag.ms (0): a segment whose
	// largest timestamp is younger than this is not cleaned.
	MinCompactionLagMs int64
	// MaxCompactionLagMs is max.compaction.lag.ms (MaxInt64): a log whose
	// oldest dirty segment starts with a batch older than this is cleaned
	// whatever its dirty ratio, and, with Compact, the active segment is
	// rolled after this long (as after segment.ms) so that it can be.
	MaxCompactionLagMs int64
	// DeleteRetentionMs is delete.retention.ms (86400000): how long a
	// tombstone, or a transaction marker whose transaction the cleaner has
	// emptied, is kept after the cleaner first kept it (its batch's delete
	// horizon, KIP-534).
	DeleteRetentionMs int64

	// RemoteStorage is remote.storage.enable with the broker's
	// remote.log.storage.system.enable (KIP-405): sealed segments are
	// copied to remote storage, and retention by time and size deletes a
	// local segment only once it is copied (Log.SetRemoteEnd), by
	// LocalRetentionMs and LocalRetentionBytes (local.retention.ms and
	// local.retention.bytes; -2: retention.ms and retention.bytes).
	// retention.ms and retention.bytes then govern the whole log, local
	// and remote, which the remote log manager enforces on the copies.
	RemoteStorage       bool
	LocalRetentionMs    int64
	LocalRetentionBytes int64
	// RemoteCopyDisable is remote.log.copy.disable (KIP-950): a tiered log
	// copies no more segments (the copies made stay readable), and its
	// local segments follow retention.ms and retention.bytes, copied or not.
	RemoteCopyDisable bool
	// RemoteLogDeleteOnDisable is remote.log.delete.on.disable (KIP-950):
	// read by the remote log manager when RemoteStorage is off, to delete
	// the copies made while it was on.
	RemoteLogDeleteOnDisable bool
}

// DefaultLogConfig returns Apache Kafka's defaults.
func DefaultLogConfig() LogConfig {
	return LogConfig{
		SegmentBytes:       1 << 30,
		SegmentMs:          7 * 24 * 3600 * 1000,
		SegmentIndexBytes:  10 << 20,
		IndexIntervalBytes: 4096,
		RetentionMs:        7 * 24 * 3600 * 1000,
		RetentionBytes:     -1,
		MaxMessageBytes:    1048588,
		TimestampType:      CreateTime,
		FileDeleteDelayMs:  60000,

		Delete:                 true,
		MinCleanableDirtyRatio: 0.5,
		MinCompactionLagMs:     0,
		MaxCompactionLagMs:     math.MaxInt64,
		DeleteRetentionMs:      24 * 3600 * 1000,
		LocalRetentionMs:       -2,
		LocalRetentionBytes:    -2,
	}
}

// sanitized returns cfg with out-of-range values replaced by the nearest
// usable value (the broker validates topic configs; the engine only refuses
// to misbehave).
//
// The zero LogConfig stands for DefaultLogConfig().
func (c LogConfig) sanitized() LogConfig {
	d := DefaultLogConfig()
	if c == (LogConfig{}) {
		return d
	}
	if c.SegmentBytes < minSegmentBytes {
		if c.SegmentBytes <= 0 {
			c.SegmentBytes = d.SegmentBytes
		} else {
			c.SegmentBytes = minSegmentBytes
		}
	}
	if c.SegmentBytes > maxSegmentBytes {
		c.SegmentBytes = maxSegmentBytes
	}
	if c.SegmentMs <= 0 {
		c.SegmentMs = d.SegmentMs
	}
	if c.SegmentIndexBytes <= 0 {
		c.SegmentIndexBytes = d.SegmentIndexBytes
	}
	if c.SegmentIndexBytes < 4*timeEntrySize {
		c.SegmentIndexBytes = 4 * timeEntrySize
	}
	if c.IndexIntervalBytes < 0 {
		c.IndexIntervalBytes = d.IndexIntervalBytes
	}
	if c.MaxMessageBytes <= 0 {
		c.MaxMessageBytes = d.MaxMessageBytes
	}
	if c.FileDeleteDelayMs < 0 {
		c.FileDeleteDelayMs = 0
	}
	if !(c.MinCleanableDirtyRatio >= 0) { // NaN too
		c.MinCleanableDirtyRatio = d.MinCleanableDirtyRatio
	}
	if c.MinCleanableDirtyRatio > 1 {
		c.MinCleanableDirtyRatio = 1
	}
	if c.MinCompactionLagMs < 0 {
		c.MinCompactionLagMs = 0
	}
	if c.MaxCompactionLagMs <= 0 {
		c.MaxCompactionLagMs = d.MaxCompactionLagMs
	}
	if c.DeleteRetentionMs < 0 {
		c.DeleteRetentionMs = d.DeleteRetentionMs
	}
	if c.LocalRetentionMs < -2 {
		c.LocalRetentionMs = -2
	}
	if c.LocalRetentionBytes < -2 {
		c.LocalRetentionBytes = -2
	}
	return c
}

// deletes reports whether retention by time and size applies.
func (c *LogConfig) deletes() bool { return !c.Compact || c.Delete }

// localRetention is the retention by time and size of the local segments:
// local.retention.* with remote storage (-2 meaning retention.*),
// retention.* without, or with remote.log.copy.disable.
func (c *LogConfig) localRetention() (ms, bytes int64) {
	ms, bytes = c.RetentionMs, c.RetentionBytes
	if c.RemoteStorage && !c.RemoteCopyDisable {
		if c.LocalRetentionMs != -2 {
			ms = c.LocalRetentionMs
		}
		if c.LocalRetentionBytes != -2 {
			bytes = c.LocalRetentionBytes
		}
	}
	return ms, bytes
}

// rollMs is the age at which the active segment is rolled: segment.ms, or
// max.compaction.lag.ms when lower on a compacted log (Kafka's
// LogConfig.maxSegmentMs).
func (c *LogConfig) rollMs() int64 {
	if c.Compact && c.MaxCompactionLagMs < c.SegmentMs {
		return c.MaxCompactionLagMs
	}
	return c.SegmentMs
}

const (
	minSegmentBytes = 14 // Kafka's lower bound (LegacyRecord.RECORD_OVERHEAD_V0)
	maxSegmentBytes = 1<<31 - 1
)

// SyncPolicy selects when appended data is made durable.
type SyncPolicy int

const (
	// SyncFsync acknowledges after the group-committed fdatasync (WaitDurable
	// blocks until then).
	SyncFsync SyncPolicy = iota
	// SyncInterval flushes in the background every FlushInterval or
	// FlushBytes; WaitDurable returns at once.
	SyncInterval
	// SyncNone leaves durability to replication; data is flushed on roll and
	// on Close only.
	SyncNone
)

func (p SyncPolicy) String() string {
	switch p {
	case SyncFsync:
		return "fsync"
	case SyncInterval:
		return "interval"
	case SyncNone:
		return "none"
	}
	return fmt.Sprintf("SyncPolicy(%d)", int(p))
}

// ParseSyncPolicy parses "fsync", "interval" or "none".
func ParseSyncPolicy(s string) (SyncPolicy, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "fsync":
		return SyncFsync, nil
	case "interval":
		return SyncInterval, nil
	case "none":
		return SyncNone, nil
	}
	return 0, fmt.Errorf("%w: sync policy %q (want fsync, interval or none)", ErrInvalidConfig, s)
}

// Options configures a Manager.
type Options struct {
	Dirs                   []string      // log.dirs; created if missing
	Sync                   SyncPolicy    // durability policy
	FlushInterval          time.Duration // SyncInterval: log.flush.interval.ms (default 1s)
	FlushBytes             int64         // SyncInterval: flush a log after this many dirty bytes (0 = no byte trigger)
	RetentionCheckInterval time.Duration // log.retention.check.interval.ms; 0 = no background retention
	DefaultConfig          LogConfig     // for logs found on disk at Open
	Logger                 *slog.Logger  // nil = discard
	Now                    func() time.Time
	// FS is the file system every file operation goes through; nil is
	// vfs.Default, the operating system's. Its files must be backed by
	// operating-system files (vfs.OSFile): indexes are mapped and fetches
	// use sendfile.
	FS vfs.FS
	// PowerLossJournal (tests only) journals, in the file at this path,
	// the size of every file at each fdatasync and the namespace changes
	// not yet made durable (vfs.OpenJournal), and at Open, before
	// anything else, cuts every file back to what the journal says was
	// durable when the previous process died. A SIGKILL then stands for a
	// power loss. The broker sets it from the test-only key
	// samsa.test.power.loss.journal=<path>; keep the path outside the log
	// directories. It costs a write(2) per fdatasync and per file
	// creation, rename and removal.
	PowerLossJournal string
	// ScrubBytesPerSecond runs the background scrubber, which checks the
	// CRC of every batch of every log at this many bytes per second and
	// records what it finds as damage; 0 = off.
	ScrubBytesPerSecond int64
	// ScrubInterval is the pause between two passes of the scrubber
	// (default 1h).
	ScrubInterval time.Duration
	// Cleaner configures the log cleaner (compaction of the logs whose
	// LogConfig.Compact is set).
	Cleaner CleanerOptions
	// DisableTxnVerification turns off KIP-890's check that a
	// transactional batch opening a transaction in a partition was
	// verified with the coordinator (the broker's
	// transaction.partition.verification.enable=false; Kafka's default,
	// and the zero value here, is on).
	DisableTxnVerification bool
	// NoPrealloc turns off writing the active segment ahead of its appends
	// with zeros under the fsync policy (prealloc.go; the broker's
	// samsa.log.segment.preallocate.enable=false).
	NoPrealloc bool
	// FlushConcurrentRounds is how many group-commit rounds of one log
	// directory may run at once (flusher.go; the broker's
	// samsa.log.flush.concurrent.rounds). 0 is DefaultFlushConcurrentRounds,
	// 1 one round at a time.
	FlushConcurrentRounds int
	// FlushSyncfsMinLogs, when positive, makes a group-commit round of at least
	// that many logs durable with one syncfs(2) of the directory's file system
	// instead of an fdatasync per dirty file (flusher_syncfs.go; the broker's
	// samsa.log.flush.syncfs.min.partitions). 0 is off.
	FlushSyncfsMinLogs int
	// NoFlushWriteback turns off rounds made durable by one cache flush
	// (flusher_writeback.go; the broker's samsa.log.flush.writeback.enable=false):
	// every dirty file is then fdatasynced.
	NoFlushWriteback bool

	// manualBackground (tests) starts no flusher, checkpointer, retention
	// or scrubber goroutine: the test runs flusher rounds itself
	// (Manager.flushRound), so that a seeded run replays exactly.
	manualBackground bool
	// earlyWaiters (benchmarks) makes a flusher round take its durability
	// waiters when it starts, as it did before it took them after its syncs
	// (flusher.go), and write-back rounds keep the log ends they planned
	// with (wbPlan.extend): the A side of BenchmarkManyProducers.
	earlyWaiters bool
	// preallocBudget (tests) replaces preallocDirBudget when positive.
	preallocBudget int64
}

// CleanerOptions are the broker's log.cleaner.* keys. The zero value is
// Kafka's defaults.
type CleanerOptions struct {
	// Disable is log.cleaner.enable=false: no cleaner goroutine runs
	// (Manager.Compact still cleans on demand).
	Disable bool
	// Threads is log.cleaner.threads (1).
	Threads int
	// DedupeBufferSize is log.cleaner.dedupe.buffer.size (128 MiB): the
	// memory of the key → offset maps, shared out between the threads
	// (at least 1 KiB each).
	DedupeBufferSize int64
	// LoadFactor is log.cleaner.io.buffer.load.factor (0.9): how full an
	// offset map is filled (at most 0.99).
	LoadFactor float64
	// IOBufferSize is log.cleaner.io.buffer.size (512 KiB): each thread's
	// read buffer (and write buffer), grown to the largest batch met.
	IOBufferSize int
	// IOMaxBytesPerSecond is log.cleaner.io.max.bytes.per.second: the
	// bytes read plus written by all threads per second (0 = no limit,
	// Kafka's Double.MaxValue).
	IOMaxBytesPerSecond float64
	// Backoff is log.cleaner.backoff.ms (15 s): the sleep of a thread that
	// found nothing to clean.
	Backoff time.Duration
	// MaxDecompressedBytes bounds what the records of one batch may take
	// once decompressed (default 64 MiB; Kafka has no such bound): a
	// batch beyond it makes its log uncleanable (CleanerStats tells).
	MaxDecompressedBytes int
}

func (o CleanerOptions) sanitized() CleanerOptions {
	if o.Threads <= 0 {
		o.Threads = 1
	}
	if o.DedupeBufferSize <= 0 {
		o.DedupeBufferSize = 128 << 20
	}
	if o.DedupeBufferSize/int64(o.Threads) < 1<<10 {
		o.DedupeBufferSize = int64(o.Threads) << 10
	}
	if !(o.LoadFactor > 0) {
		o.LoadFactor = 0.9
	}
	if o.LoadFactor > 0.99 {
		o.LoadFactor = 0.99
	}
	if o.IOBufferSize <= 0 {
		o.IOBufferSize = 512 << 10
	}
	if o.IOBufferSize < 4<<10 {
		o.IOBufferSize = 4 << 10
	}
	if o.IOMaxBytesPerSecond < 0 {
		o.IOMaxBytesPerSecond = 0
	}
	if o.Backoff <= 0 {
		o.Backoff = 15 * time.Second
	}
	if o.MaxDecompressedBytes <= 0 {
		o.MaxDecompressedBytes = 64 << 20
	}
	return o
}
