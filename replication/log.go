package replication

import (
	"errors"
	"time"

	"github.com/samsa-broker/samsa/engine"
)

// Log is what a replica needs of its partition log. *engine.Log implements it, and so
// does the simulation's in-memory log. Every method is safe for concurrent use.
//
// OnDurable carries the durability policy: under the engine's fsync policy done runs
// once offset is fdatasynced (on the flusher's goroutine); under the others it runs
// inline at once. A leader counts its own end toward the high watermark only as far as
// OnDurable has reported, and a follower sends its next fetch only once OnDurable has
// reported what it appended, so one code path serves both policies: under fsync an
// offset counts once it is durable on a replica, under `replicated` once appended.
type Log interface {
	TopicPartition() engine.TopicPartition
	LogStartOffset() int64
	LogEndOffset() int64
	HighWatermark() int64
	// SetHighWatermark sets the high watermark, clamped to [log start, log end]; it
	// never moves it backwards (truncation lowers it).
	SetHighWatermark(offset int64)
	// Append writes batches; a leader append stamps offsets and o.LeaderEpoch, a
	// follower append (o.Follower) keeps the batches' offsets and epochs.
	Append(batches []byte, o engine.AppendOptions) (engine.AppendResult, error)
	OnDurable(offset int64, done func(error))
	// OnDurableHeld is OnDurable whose wake-up of the flusher waits for h.Release,
	// as an Append with AppendOptions.Hold does: a request's partitions are synced
	// in one round (engine.FlushHold).
	OnDurableHeld(offset int64, h *engine.FlushHold, done func(error))
	// TruncateTo removes every record at or after offset (a batch straddling it goes
	// whole).
	TruncateTo(offset int64) error
	// TruncateFullyAndStartAt empties the log and starts it at offset (full sync).
	TruncateFullyAndStartAt(offset int64) error
	// DeleteRecordsBefore raises the log start offset (at most to the high watermark).
	DeleteRecordsBefore(offset int64) (int64, error)
	// LatestEpoch and EndOffsetForEpoch read the leader-epoch cache (Kafka's
	// LeaderEpochFileCache), which Append keeps: a batch with a higher epoch than the
	// latest starts that epoch. (A new leader's epoch is not written before its first
	// append: see Partition.EndOffsetForEpoch.)
	LatestEpoch() int32
	EndOffsetForEpoch(epoch int32) (foundEpoch int32, endOffset int64)
}

var _ Log = (*engine.Log)(nil)

// LogStore opens and deletes partition logs. The Manager opens a log when it first
// needs a partition (Apply: become leader or follower) and deletes it on a Stop with
// Delete. EngineLogs adapts an *engine.Manager.
type LogStore interface {
	// OpenLog returns the log of tp, creating it with cfg when missing (an existing
	// log takes cfg).
	OpenLog(tp engine.TopicPartition, cfg engine.LogConfig) (Log, error)
	// DeleteLog removes the log of tp; a missing log is not an error.
	DeleteLog(tp engine.TopicPartition) error
}

// LogBatchOpener is implemented by a LogStore that opens many logs at once for
// less than one at a time (the engine's: one sync of a log directory for every log
// it creates there). Apply calls it, when the LogStore has it, with the partitions
// of a delta that have no replica yet; it then opens each with OpenLog as before
// (which finds it open). An error is not returned by Apply: the OpenLog that
// follows reports it for its partition.
type LogBatchOpener interface {
	OpenLogs(tps []engine.TopicPartition, cfgs []engine.LogConfig) error
}

// EngineLogs returns the LogStore of an engine.
func EngineLogs(m *engine.Manager) LogStore { return engineLogs{m} }

type engineLogs struct{ m *engine.Manager }

func (e engineLogs) OpenLog(tp engine.TopicPartition, cfg engine.LogConfig) (Log, error) {
	l, err := e.m.CreateLog(tp, cfg)
	if err != nil {
		return nil, err
	}
	return l, nil
}

func (e engineLogs) OpenLogs(tps []engine.TopicPartition, cfgs []engine.LogConfig) error {
	want := make([]engine.NewLog, len(tps))
	for i := range tps {
		want[i] = engine.NewLog{TP: tps[i], Config: cfgs[i]}
	}
	_, err := e.m.CreateLogs(want)
	return err
}

func (e engineLogs) DeleteLog(tp engine.TopicPartition) error {
	if err := e.m.DeleteLog(tp); err != nil && !isNoLog(err) {
		return err
	}
	return nil
}

// Clock tells the time. The Manager reads it for follower catch-up times, ISR
// decisions, backoffs, throttles and produce timeouts; a simulation passes a fake one.
type Clock interface {
	Now() time.Time
}

type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }

func isNoLog(err error) bool { return errors.Is(err, engine.ErrNoLog) }
