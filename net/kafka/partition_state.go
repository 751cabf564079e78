package kafka

import (
	"errors"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/samsa-broker/samsa/engine"
	"github.com/samsa-broker/samsa/purgatory"
)

// dataPath is the per-broker state of the data-path handlers (Produce, Fetch,
// ListOffsets, DeleteRecords, InitProducerId): the purgatory of long-poll fetches, the
// fetch-session cache and the producer-id block. It hangs off Broker.dataPath, created
// by the first data request or by StartDataPath at start-up.
//
// High watermark, one node (ISR = {self}):
//
//	append ─▶ Log.OnDurable(last) ─▶ SetHighWatermark(last+1) ─▶ waits.CheckAndComplete(log)
//	          (fsync: after the group-committed fdatasync; none/interval: inline)
//
// A Produce request moves the HWs of all its partitions first and only then retries
// the fetches waiting on them (00_produce.go), so one wake-up sees the whole request.
//
// so the HW, what consumers see, never passes data that is not durable under the fsync
// policy, and equals the LEO right after the append otherwise. Logs opened with HW <
// LEO (a restart) get the same treatment once, when the dataPath is created.
type dataPath struct {
	// waits holds long-poll fetches, keyed by the logs they read.
	waits    *purgatory.Purgatory[*engine.Log]
	sessions *fetchSessions
	pids     pidBlock
}

// data returns the broker's data-path state, creating it on first use.
func (b *Broker) data() *dataPath {
	if dp := b.dataPath.Load(); dp != nil {
		return dp
	}
	dp := &dataPath{
		waits:    purgatory.New[*engine.Log]("fetch", purgatory.Options{}),
		sessions: newFetchSessions(maxFetchSessions),
	}
	if !b.dataPath.CompareAndSwap(nil, dp) {
		dp.waits.Close()
		return b.dataPath.Load()
	}
	for _, l := range b.eng.Logs() {
		dp.catchUpHighWatermark(l)
	}
	return dp
}

// StartDataPath creates the data-path state now rather than on the first data
// request, so the high watermarks of logs recovered behind their end (after a crash)
// catch up as soon as their data is durable. CloseDataPath undoes it.
func (b *Broker) StartDataPath() { b.data() }

// CloseDataPath expires pending long-poll fetches (they are answered with what the
// logs hold) and stops the fetch purgatory's timer. Call it after the transport has
// drained and before closing the engine. Idempotent; a later request recreates the
// state.
func (b *Broker) CloseDataPath() {
	if dp := b.dataPath.Swap(nil); dp != nil {
		dp.waits.Close()
	}
}

// catchUpHighWatermark raises the HW of a log opened with HW < LEO to its LEO once
// that is durable.
func (dp *dataPath) catchUpHighWatermark(l *engine.Log) {
	leo := l.LogEndOffset()
	if l.HighWatermark() >= leo {
		return
	}
	l.OnDurable(leo-1, func(err error) {
		if err == nil {
			dp.advance(l, leo)
		}
	})
}

// advance moves l's HW to hw (never backwards) and retries the fetches waiting on l.
func (dp *dataPath) advance(l *engine.Log, hw int64) {
	l.SetHighWatermark(hw)
	dp.waits.CheckAndComplete(l)
}

// pidBlock hands out producer ids from blocks the active controller allocates
// (AllocateProducerIds, recorded in the metadata log), so an id is never handed out
// twice, across restarts too. get may block on the controller: call it off the read
// path.
type pidBlock struct {
	mu        sync.Mutex
	next, end int64
}

func (p *pidBlock) get(b *Broker) (int64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.next >= p.end {
		first, n, err := b.allocateProducerIDs()
		if err != nil {
			return 0, err
		}
		p.next, p.end = first, first+n
	}
	id := p.next
	p.next++
	return id, nil
}

// engineErr maps an engine error to the Kafka error of the data path.
func engineErr(err error) *kerr.Error {
	var ke *kerr.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ke):
		return ke
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
