package kafka

import (
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/samsa-broker/samsa/engine"
	"github.com/samsa-broker/samsa/net/fetchsession"
	"github.com/samsa-broker/samsa/purgatory"
	"github.com/samsa-broker/samsa/replication"
)

// dataPath is the per-broker state of the data-path handlers (Produce, Fetch,
// ListOffsets, DeleteRecords): the purgatories of long-poll fetches and share fetches
// and the fetch-session cache. It hangs off Broker.dataPath, created by the first data
// request or by StartDataPath at start-up.
//
// The high watermark is replication's (Deps.Replicas): the leader's durable end and its
// followers' fetch offsets move it, and its hooks retry the fetches waiting here
// (LogChanged). On one node the ISR is {self}:
//
//	append ─▶ Log.OnDurable(last) ─▶ HW = the leader's durable end ─▶ waits.CheckAndComplete(log)
//	          (fsync: after the group-committed fdatasync; none/interval: inline)
//
// A Produce request moves the HWs of all its partitions first and only then retries
// the fetches waiting on them (replication.Produce), so one wake-up sees the whole
// request. The HW, what consumers see, never passes data that is not durable under the
// fsync policy, and equals the LEO right after the append otherwise. Logs opened with
// HW < LEO (a restart) catch up when the replica manager makes their replicas leaders.
type dataPath struct {
	// waits holds long-poll fetches, keyed by the logs they read.
	waits *purgatory.Purgatory[*engine.Log]
	// shareWaits holds long-poll share fetches (78_share_fetch.go), keyed alike.
	shareWaits *purgatory.Purgatory[*engine.Log]
	sessions   *fetchsession.Cache
}

// maxFetchSessions is the size of the fetch-session cache (Kafka's
// max.incremental.fetch.session.cache.slots default).
const maxFetchSessions = 1000

// quietRescan is how often a session serves its quiet partitions anyway
// (net/fetchsession; read when a broker's data path starts: tests change it before).
var quietRescan = 5 * time.Second

// data returns the broker's data-path state, creating it on first use.
func (b *Broker) data() *dataPath {
	if dp := b.dataPath.Load(); dp != nil {
		return dp
	}
	dp := &dataPath{
		waits:      purgatory.New[*engine.Log]("fetch", purgatory.Options{}),
		shareWaits: purgatory.New[*engine.Log]("share-fetch", purgatory.Options{}),
		sessions:   fetchsession.NewCache(maxFetchSessions, quietRescan),
	}
	if !b.dataPath.CompareAndSwap(nil, dp) {
		dp.waits.Close()
		dp.shareWaits.Close()
		return b.dataPath.Load()
	}
	return dp
}

// StartDataPath creates the data-path state now rather than on the first data
// request. CloseDataPath undoes it.
func (b *Broker) StartDataPath() { b.data() }

// CloseDataPath expires pending long-poll fetches (they are answered with what the
// logs hold) and stops the purgatories' timers. Call it after the transport has
// drained. Idempotent; a later request recreates the fetch state.
func (b *Broker) CloseDataPath() {
	if dp := b.dataPath.Swap(nil); dp != nil {
		dp.waits.Close()
		dp.shareWaits.Close()
	}
}

// LogChanged completes the fetches waiting on l that may complete now and wakes the
// followers' quiet partitions of it; a moved HW wakes the consumers' too (an append
// the HW has not passed gives a consumer nothing). The replica manager's hooks call it
// (HighWatermarkMoved: hwMoved set, LeaderAppended: not), on any goroutine.
func (b *Broker) LogChanged(l *engine.Log, hwMoved bool) {
	dp := b.dataPath.Load()
	if dp == nil || l == nil {
		return
	}
	dp.waits.CheckAndComplete(l)
	dp.shareWaits.CheckAndComplete(l)
	dp.sessions.Wake(l, hwMoved)
}

// engineErr maps an engine or replication error to the Kafka error of the data path.
func engineErr(err error) *kerr.Error {
	var ke *kerr.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ke):
		return ke
	case errors.Is(err, replication.ErrNotLeader), errors.Is(err, replication.ErrUnknownReplica),
		errors.Is(err, replication.ErrStaleBrokerEpoch):
		return kerr.NotLeaderForPartition
	case errors.Is(err, replication.ErrUnknownPartition):
		return kerr.UnknownTopicOrPartition
	case errors.Is(err, replication.ErrFencedLeaderEpoch):
		return kerr.FencedLeaderEpoch
	case errors.Is(err, replication.ErrUnknownLeaderEpoch):
		return kerr.UnknownLeaderEpoch
	case errors.Is(err, replication.ErrNotEnoughReplicas):
		return kerr.NotEnoughReplicas
	case errors.Is(err, replication.ErrNotEnoughReplicasAfterAppend):
		return kerr.NotEnoughReplicasAfterAppend
	case errors.Is(err, replication.ErrTimeout):
		return kerr.RequestTimedOut
	case errors.Is(err, replication.ErrOffsetOutOfRange):
		return kerr.OffsetOutOfRange
	case errors.Is(err, replication.ErrRemoteStorage):
		return kerr.KafkaStorageError
	case errors.Is(err, replication.ErrInvalidAcks):
		return kerr.InvalidRequiredAcks
	case errors.Is(err, engine.ErrUnsupportedMagic):
		return kerr.UnsupportedVersion
	case errors.Is(err, engine.ErrBatchTooLarge):
		return kerr.MessageTooLarge
	case errors.Is(err, engine.ErrCorrupt):
		return kerr.CorruptMessage
	case errors.Is(err, engine.ErrInvalidRecord):
		return kerr.InvalidRecord
	case errors.Is(err, engine.ErrOutOfOrderSequence):
		return kerr.OutOfOrderSequenceNumber
	case errors.Is(err, engine.ErrInvalidProducerEpoch):
		return kerr.InvalidProducerEpoch
	case errors.Is(err, engine.ErrInvalidTxnState):
		return kerr.InvalidTxnState
	case errors.Is(err, engine.ErrTransactionCoordinatorFenced):
		return kerr.TransactionCoordinatorFenced
	case errors.Is(err, engine.ErrOffsetOutOfRange):
		return kerr.OffsetOutOfRange
	case errors.Is(err, engine.ErrClosed), errors.Is(err, engine.ErrNoLog):
		return kerr.NotLeaderForPartition
	default: // I/O: engine.ErrLogDirOffline and the errors that led to it
		return kerr.KafkaStorageError
	}
}

// checkLeaderEpoch applies KIP-320's fencing: a client's current leader epoch (-1: not
// checked) must equal the partition's.
func checkLeaderEpoch(current, actual int32) *kerr.Error {
	switch {
	case current < 0 || current == actual:
		return nil
	case current > actual:
		return kerr.UnknownLeaderEpoch
	default:
		return kerr.FencedLeaderEpoch
	}
}

// epochOfOffset returns the leader epoch of the batch holding offset (-1 if unknown).
func epochOfOffset(l *engine.Log, offset int64) int32 {
	e := l.LatestEpoch()
	for e >= 0 {
		// The end offset of the epochs before e is where e starts.
		prev, start := l.EndOffsetForEpoch(e - 1)
		if prev < 0 || start <= offset {
			return e
		}
		e = prev
	}
	return -1
}
