package group

import (
	"github.com/samsa-broker/samsa/coordinator/statelog"
	"github.com/samsa-broker/samsa/engine"
)

// OffsetsTopic is the internal topic holding committed offsets and group metadata.
const OffsetsTopic = "__consumer_offsets"

// OffsetsLogConfig is the engine configuration of __consumer_offsets partitions:
// compacted, never deleted by time or size, 100 MiB segments
// (offsets.topic.segment.bytes).
func OffsetsLogConfig() engine.LogConfig {
	cfg := engine.DefaultLogConfig()
	cfg.Compact = true
	cfg.RetentionMs = -1
	cfg.RetentionBytes = -1
	cfg.SegmentBytes = 100 << 20
	return cfg
}

// replayLog calls fn with every record of log, a partition of __consumer_offsets (or
// of another internal topic whose records engine.AppendRecords frames), from its start to its
// end: a transaction's records at its COMMIT marker, never those of an aborted one,
// and those still open in st (txn_offsets.go).
func replayLog(log *engine.Log, fn func(Record) error, st *txnReplay) error {
	return statelog.ReplayLog(log, func(b []byte, from int64) error { return st.decode(b, from, fn) })
}
