package replication

import (
	"context"
	"errors"

	"github.com/samsa-broker/samsa/engine"
)

// RemoteLog is tiered storage's side of this node's partitions (KIP-405):
// what the remote log manager (replication/tiered) answers for a partition
// whose older segments live in remote storage. The node's wiring sets it
// with SetRemoteLog; without it every partition is local only. Its methods
// may be called from any goroutine.
type RemoteLog interface {
	// Enabled reports whether p's log is tiered (remote.storage.enable on
	// a broker with remote.log.storage.system.enable).
	Enabled(p *Partition) bool
	// LogStartOffset is the whole log's start: the start of its oldest
	// copy in remote storage, when that is below the local log start
	// (Kafka's logStartOffset beside localLogStartOffset); ok false when
	// no copy is known.
	LogStartOffset(p *Partition) (start int64, ok bool)
	// RemoteEnd is the offset after the last one copied (Kafka's
	// highestOffsetInRemoteStorage + 1); 0 when nothing is.
	RemoteEnd(p *Partition) int64
	// Read returns whole record batches from offset (the batch holding it
	// first) out of remote storage, at most maxBytes of them but at least
	// one. An offset below the whole log's start wraps ErrOffsetOutOfRange;
	// a failure of the store wraps ErrRemoteStorage (retriable).
	Read(ctx context.Context, p *Partition, offset int64, maxBytes int32) ([]byte, error)
	// Fetch is a consumer's fetch of p from offset, below its local log
	// start: Read, and with committed (READ_COMMITTED) AbortedTransactions
	// up to the records' end, bounded as Kafka bounds a remote fetch (its
	// quota, its wait); see RemoteFetch. It has the errors of Read.
	Fetch(p *Partition, offset int64, maxBytes int32, committed bool) (RemoteFetch, error)
	// AbortedTransactions returns the aborted transactions of the copies
	// that overlap [from, upTo), from their transaction indexes (what a
	// READ_COMMITTED fetch of remote records carries), with the errors of
	// Read.
	AbortedTransactions(ctx context.Context, p *Partition, from, upTo int64) ([]engine.AbortedTxn, error)
	// OffsetForTimestamp is engine.Log.OffsetForTimestamp over the copies:
	// ok false when no copy holds a record with a timestamp >= ts.
	OffsetForTimestamp(ctx context.Context, p *Partition, ts int64) (offset, timestamp int64, ok bool, err error)
	// MaxTimestamp is engine.Log.MaxTimestamp over the copies at or above
	// the whole log's start: the largest timestamp and the offset of its
	// first record; ok false when no copy is known. Errors as Read's.
	MaxTimestamp(ctx context.Context, p *Partition) (timestamp, offset int64, ok bool, err error)
	// PartitionDeleted tells that p's replica here is deleted with its
	// topic: its copies in remote storage are to be deleted too (Kafka's
	// stopPartitions with deleteRemoteLog). Called by Apply before the log
	// goes; it must not block.
	PartitionDeleted(p *Partition)
	// RebuildAuxState gives p's follower replica, emptied to start at
	// offset (its leader's local log start), the producer state and leader
	// epoch of the copy that ends right before offset (Kafka's
	// buildRemoteLogAuxState); without such a copy it does nothing.
	RebuildAuxState(ctx context.Context, p *Partition, offset int64) error
}

// RemoteFetch is what a consumer's fetch of a partition below its local log
// start gets (RemoteLog.Fetch).
type RemoteFetch struct {
	// Records are whole batches, as read (chunks), none when nothing was
	// read in time; their buffers are lent (engine.Buffers): the caller
	// releases them once it has written them, or drops them unreleased.
	Records engine.Buffers
	Aborted []engine.AbortedTxn // READ_COMMITTED: the aborted transactions overlapping Records
	// Throttled: nothing was read, the broker's remote reads being over
	// remote.log.manager.fetch.max.bytes.per.second. Kafka then answers the
	// partition empty, without an error, through the fetch's long poll.
	Throttled bool
}

// ErrRemoteStorage: remote storage could not serve a read now (Kafka's
// RemoteStorageException, answered KAFKA_STORAGE_ERROR: the client retries).
var ErrRemoteStorage = errors.New("replication: remote storage unavailable")

type remoteLogBox struct{ r RemoteLog }

// SetRemoteLog sets tiered storage's side of the partitions (nil: none).
func (m *Manager) SetRemoteLog(r RemoteLog) {
	if r == nil {
		m.remote.Store(nil)
		return
	}
	m.remote.Store(&remoteLogBox{r})
}

// remoteLog returns the tiered storage set, or nil.
func (m *Manager) remoteLog() RemoteLog {
	if b := m.remote.Load(); b != nil {
		return b.r
	}
	return nil
}

// Tiered reports whether p's log is tiered.
func (p *Partition) Tiered() bool {
	r := p.m.remoteLog()
	return r != nil && r.Enabled(p)
}

// LogStartOffset is the whole log's start: when p is tiered and its oldest
// copy lies below the local log start, that copy's start, or the offset
// DeleteRecords raised it to (engine.Log.RemoteLogStart) when higher; else
// the local log start.
func (p *Partition) LogStartOffset() int64 {
	local := p.log.LogStartOffset()
	if r := p.m.remoteLog(); r != nil && r.Enabled(p) {
		if s, ok := r.LogStartOffset(p); ok && s < local {
			if el := p.EngineLog(); el != nil {
				s = max(s, el.RemoteLogStart())
			}
			return min(s, local)
		}
	}
	return local
}

// followerLogStart is the log start a follower's fetch answer carries when
// it is not OFFSET_OUT_OF_RANGE: the whole log's (Kafka's logStartOffset in
// the Fetch response), so that a follower of a tiered log keeps a start that
// DeleteRecords raised below the local one (keepLogStart) and answers it once
// it leads. On a tiered log it is sent only as far as it is sure: with copies
// known, the whole log's start (a listing of them behind the metadata's end
// shows older copies, so a lower start, never a higher one); with none
// known, which may be a listing not caught up yet, only the start
// DeleteRecords raised, else -1 (none). The local start would pass for the
// whole log's there, and a follower that kept it would hide the copies
// below it. (An answer OFFSET_OUT_OF_RANGE carries the local start, where a
// follower behind it starts over; one OFFSET_MOVED_TO_TIERED_STORAGE, the
// whole log's, and the follower asks ListOffsets EARLIEST_LOCAL_TIMESTAMP for
// the local start: outOfRange.)
func (p *Partition) followerLogStart() int64 {
	r := p.m.remoteLog()
	el := p.EngineLog()
	if r == nil || !r.Enabled(p) || el == nil {
		return p.log.LogStartOffset()
	}
	if _, ok := r.LogStartOffset(p); ok {
		return p.LogStartOffset()
	}
	if s := el.RemoteLogStart(); s > 0 {
		return s
	}
	return -1
}

// MinTieredFetchVersion is the first Fetch version a follower is answered
// OFFSET_MOVED_TO_TIERED_STORAGE at; below it a fetch offset in remote storage
// is OFFSET_OUT_OF_RANGE with the local log start, where the follower starts
// over. Kafka's protocol has the error from v14 (FetchRequest.json: "Version 14
// is the same as version 13 but it also receives a new error called
// OffsetMovedToTieredStorageException"), and Kafka's leader answers it to any
// follower. Samsa's followers before it sent v15 and knew only
// OFFSET_OUT_OF_RANGE: they backed off on any other error and fetched again,
// for ever. v16 (KIP-951's leader endpoints, for clients) changes nothing a
// follower reads and no Samsa follower sent it before, so during a rolling
// upgrade a leader of this build tells the two apart by the version: followers
// of this build send FetcherConfig.Version's default, 17.
const MinTieredFetchVersion int16 = 16

// outOfRange answers a follower's fetch at fetchOffset outside the local log
// [res.LogStartOffset, res.LogEndOffset]: OFFSET_MOVED_TO_TIERED_STORAGE
// (Kafka's ReplicaManager.handleOffsetOutOfRangeError for a follower) when the
// offset lies below the local log start of a tiered log but not below the
// whole log's start, as far as that is sure (copies known: followerLogStart),
// at version >= MinTieredFetchVersion, with the whole log's start, which the
// follower keeps as it starts over; else OFFSET_OUT_OF_RANGE with the local
// log start. Called without p.mu.
func (p *Partition) outOfRange(res FetchResult, fetchOffset int64, version int16) (FetchResult, error) {
	if version < MinTieredFetchVersion || fetchOffset >= res.LogStartOffset {
		return res, ErrOffsetOutOfRange
	}
	r := p.m.remoteLog()
	if r == nil || !r.Enabled(p) {
		return res, ErrOffsetOutOfRange
	}
	if _, ok := r.LogStartOffset(p); !ok {
		return res, ErrOffsetOutOfRange
	}
	if start := p.LogStartOffset(); fetchOffset >= start && fetchOffset < res.LogStartOffset {
		res.LogStartOffset = start
		return res, ErrOffsetMovedToTieredStorage
	}
	return res, ErrOffsetOutOfRange
}

// keepLogStart records on a follower of a tiered log the leader's whole-log
// start (Kafka's maybeIncrementLogStartOffset on the follower): it only
// rises, and is kept below the local log start too, where the local log does
// not hold it (engine.Log.RaiseRemoteLogStart).
func (p *Partition) keepLogStart(start int64) error {
	el := p.EngineLog()
	if r := p.m.remoteLog(); r == nil || !r.Enabled(p) || el == nil || start <= el.RemoteLogStart() {
		return nil
	}
	return el.RaiseRemoteLogStart(start)
}

// DeleteRecordsBefore is DeleteRecords on the whole log: on a tiered log the
// whole log's start rises to offset (kept by the engine; the remote log
// manager deletes the copies wholly below it, and reads below it are out of
// range), and the local log start with it when offset passes it. It returns
// the new log start. offset must not exceed the high watermark.
func (p *Partition) DeleteRecordsBefore(offset int64) (int64, error) {
	el := p.EngineLog()
	if r := p.m.remoteLog(); r == nil || !r.Enabled(p) || el == nil {
		return p.log.DeleteRecordsBefore(offset)
	}
	if offset > el.HighWatermark() || offset < 0 {
		return p.LogStartOffset(), ErrOffsetOutOfRange
	}
	if err := el.RaiseRemoteLogStart(offset); err != nil {
		return p.LogStartOffset(), err
	}
	if offset > el.LogStartOffset() {
		if _, err := el.DeleteRecordsBefore(offset); err != nil {
			return p.LogStartOffset(), err
		}
	}
	return p.LogStartOffset(), nil
}

// LocalLogStartOffset is the local log's start (KIP-1005's earliest-local).
func (p *Partition) LocalLogStartOffset() int64 { return p.log.LogStartOffset() }

// EarliestPendingUpload is KIP-1005's earliest-pending-upload offset: the
// first offset not yet copied to remote storage, and false when p is not
// tiered.
func (p *Partition) EarliestPendingUpload() (int64, bool) {
	r := p.m.remoteLog()
	if r == nil || !r.Enabled(p) {
		return -1, false
	}
	return max(r.RemoteEnd(p), p.LogStartOffset()), true
}

// ReadRemote reads whole batches from offset out of remote storage (see
// RemoteLog.Read); p must be tiered and offset below the local log start.
func (p *Partition) ReadRemote(ctx context.Context, offset int64, maxBytes int32) ([]byte, error) {
	r := p.m.remoteLog()
	if r == nil || !r.Enabled(p) {
		return nil, ErrOffsetOutOfRange
	}
	return r.Read(ctx, p, offset, maxBytes)
}

// FetchRemote is a consumer's fetch of p below its local log start (see
// RemoteLog.Fetch); p must be tiered.
func (p *Partition) FetchRemote(offset int64, maxBytes int32, committed bool) (RemoteFetch, error) {
	r := p.m.remoteLog()
	if r == nil || !r.Enabled(p) {
		return RemoteFetch{}, ErrOffsetOutOfRange
	}
	return r.Fetch(p, offset, maxBytes, committed)
}

// RemoteAbortedTransactions returns the aborted transactions overlapping
// [from, upTo) of p's copies in remote storage (see RemoteLog).
func (p *Partition) RemoteAbortedTransactions(ctx context.Context, from, upTo int64) ([]engine.AbortedTxn, error) {
	r := p.m.remoteLog()
	if r == nil || !r.Enabled(p) {
		return nil, nil
	}
	return r.AbortedTransactions(ctx, p, from, upTo)
}

// OffsetForTimestamp is ListOffsets' search by timestamp over the whole log:
// the copies in remote storage first when p is tiered, then the local log.
func (p *Partition) OffsetForTimestamp(ctx context.Context, ts int64) (offset, timestamp int64, ok bool, err error) {
	if r := p.m.remoteLog(); r != nil && r.Enabled(p) {
		if offset, timestamp, ok, err = r.OffsetForTimestamp(ctx, p, ts); err != nil || ok && offset < p.log.LogStartOffset() {
			return offset, timestamp, ok, err
		}
	}
	el := p.EngineLog()
	if el == nil {
		return 0, 0, false, nil
	}
	return el.OffsetForTimestamp(ts)
}

// MaxTimestamp is ListOffsets' MAX_TIMESTAMP (KIP-734) over the whole log:
// the largest timestamp and the offset of the first record with it (Kafka's
// UnifiedLog.fetchOffsetByTimestamp), from the copies in remote storage when
// p is tiered and one of them holds a timestamp as large as the local log's
// (the earlier record wins a tie), else from the local log. Offset -1: no
// record.
func (p *Partition) MaxTimestamp(ctx context.Context) (timestamp, offset int64, err error) {
	timestamp, offset = -1, -1
	if el := p.EngineLog(); el != nil {
		timestamp, offset = el.MaxTimestamp()
	}
	if r := p.m.remoteLog(); r != nil && r.Enabled(p) {
		rts, roff, ok, err := r.MaxTimestamp(ctx, p)
		if err != nil {
			return -1, -1, err
		}
		if ok && (offset < 0 || rts >= timestamp) {
			return rts, roff, nil
		}
	}
	return timestamp, offset, nil
}
