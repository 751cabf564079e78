package engine

import (
	"fmt"
	"log/slog"
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
	Compact            bool          // cleanup.policy contains compact (compaction is not implemented)
	FileDeleteDelayMs  int64         // file.delete.delay.ms (60000)
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
	return c
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

	// manualBackground (tests) starts no flusher, checkpointer, retention
	// or scrubber goroutine: the test runs flusher rounds itself
	// (Manager.flushRound), so that a seeded run replays exactly.
	manualBackground bool
}
