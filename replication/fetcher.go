package replication

import (
	"context"
	"errors"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/engine"
)

// FetcherKey names a fetcher: its source broker and its index among that broker's
// num.replica.fetchers.
type FetcherKey struct {
	Source int32
	Index  int
}

// partState is a follower partition's state in its fetcher.
type partState int8

const (
	// fetching: in the fetch requests (with LastFetchedEpoch, unless the fetcher uses
	// OffsetForLeaderEpoch).
	fetching partState = iota
	// truncating: waiting for an OffsetForLeaderEpoch answer to find where this log
	// and the leader's agree.
	truncating
	// earliestLocal: the leader answered OFFSET_MOVED_TO_TIERED_STORAGE (its records
	// from the fetch offset on are in remote storage); waiting for its ListOffsets
	// answer naming its earliest local offset (EARLIEST_LOCAL_TIMESTAMP), where this
	// replica starts over with its state rebuilt from remote storage (Kafka's
	// TierStateMachine).
	earliestLocal
)

// fetchPart is one follower partition of a fetcher.
type fetchPart struct {
	p       *Partition
	tp      engine.TopicPartition
	topicID [16]byte
	epoch   int32 // the leader epoch this replica follows in
	state   partState
	delay   time.Time // no fetch before (a partition error's backoff)
	errs    int       // partition errors since its last answer without one
	inSync  bool      // at the leader's HW as of the last answer
	lag     int64     // leader HW − log end, as of the last answer
	// the whole log's start an OFFSET_MOVED_TO_TIERED_STORAGE answer carried, kept
	// once the replica starts over (earliestLocal)
	logStart int64

	// what the fetcher's session holds for it, valid while sentGen is the
	// session's gen (clientSession)
	sent    sessWant
	sentGen uint64
}

// Request is what a fetcher sends next: exactly one of Fetch, OffsetForLeaderEpoch
// and ListOffsets is set, to Source (the fetcher's own FetchClient).
type Request struct {
	Source               int32
	Fetch                *kmsg.FetchRequest
	OffsetForLeaderEpoch *kmsg.OffsetForLeaderEpochRequest
	ListOffsets          *kmsg.ListOffsetsRequest
}

// Empty reports whether there is nothing to send.
func (r Request) Empty() bool {
	return r.Fetch == nil && r.OffsetForLeaderEpoch == nil && r.ListOffsets == nil
}

// flight is the request a fetcher sent and has no answer to yet.
type flight struct {
	req   Request
	parts []flightPart
	sess  sessBuild
}

type flightPart struct {
	fp    *fetchPart
	epoch int32
}

// Fetcher copies the partitions one source broker leads to this node (Kafka's
// ReplicaFetcherThread), as a steppable state machine:
//
//	Next(now)    ─▶ the request to send (OffsetForLeaderEpoch for truncating
//	                partitions first, then ListOffsets for those whose offset moved
//	                to tiered storage, else one Fetch for all ready partitions,
//	                through the incremental session), or nothing and when to ask again
//	Handle*(…)   ─▶ per partition: truncate at a diverging epoch (or the
//	                OffsetForLeaderEpoch answer), append the leader's batches at its
//	                offsets and epochs, take its HW and log start; start over empty at
//	                the leader's log start when behind it (full sync), or at its
//	                earliest local offset with the state rebuilt from remote storage
//	                when its offset moved to tiered storage; back off on errors
//
// One request is in flight at a time. After appending, the next request waits until
// every append is reported durable (Log.OnDurable): under fsync a follower's fetch
// offset is then its durable end, which is what the leader counts toward the HW.
// Without Manual, a goroutine drives it (run). Safe for concurrent use: mu guards the
// partitions and the session; Apply adds and removes partitions while a request is in
// flight (an answer for a removed partition, or one whose epoch changed, is dropped).
type Fetcher struct {
	m   *Manager
	key FetcherKey

	mu      sync.Mutex
	parts   []*fetchPart // sorted by topic, partition
	sess    clientSession
	fl      *flight
	backoff time.Time // no request before (transport or top-level error)

	durable atomic.Int32 // appends not yet reported durable
	onDur   func(error)
	hold    engine.FlushHold // an answer's appends wake the flusher once, after the last (under mu)

	// driver (without Manual)
	wake    chan struct{}
	cancel  context.CancelFunc
	done    chan struct{}
	stopped atomic.Bool
}

func newFetcher(m *Manager, key FetcherKey) *Fetcher {
	f := &Fetcher{m: m, key: key, wake: make(chan struct{}, 1)}
	f.onDur = func(error) {
		if f.durable.Add(-1) == 0 {
			f.signal()
		}
	}
	return f
}

// Key is the fetcher's source broker and index.
func (f *Fetcher) Key() FetcherKey { return f.key }

// Len is the number of partitions it copies.
func (f *Fetcher) Len() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.parts)
}

func (f *Fetcher) signal() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

func (f *Fetcher) find(tp engine.TopicPartition) (int, bool) {
	return slices.BinarySearchFunc(f.parts, tp, func(fp *fetchPart, tp engine.TopicPartition) int { return cmpTP(fp.tp, tp) })
}

// add starts copying p, following in epoch.
func (f *Fetcher) add(p *Partition, epoch int32) {
	f.mu.Lock()
	fp := &fetchPart{p: p, tp: p.tp, topicID: p.topicID, epoch: epoch}
	if f.m.cfg.Fetcher.UseOffsetForLeaderEpoch {
		fp.state = truncating
	}
	if i, found := f.find(p.tp); found {
		f.parts[i] = fp
	} else {
		f.parts = slices.Insert(f.parts, i, fp)
	}
	f.mu.Unlock()
	f.signal()
}

// remove stops copying p. Once it returns the fetcher no longer writes p's log.
func (f *Fetcher) remove(p *Partition) {
	f.mu.Lock()
	if i, found := f.find(p.tp); found && f.parts[i].p == p {
		f.parts = slices.Delete(f.parts, i, i+1)
	}
	f.mu.Unlock()
	f.signal()
}

// Next returns the request to send now, or (empty, when to ask again; zero: when
// something changes, i.e. a partition is added, an append becomes durable or an
// answer is handled).
func (f *Fetcher) Next(now time.Time) (Request, time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fl != nil || f.durable.Load() > 0 || len(f.parts) == 0 {
		return Request{}, time.Time{}
	}
	if now.Before(f.backoff) {
		return Request{}, f.backoff
	}
	if r, ok := f.epochsRequestLocked(now); ok {
		return r, time.Time{}
	}
	if r, ok := f.earliestLocalRequestLocked(now); ok {
		return r, time.Time{}
	}
	return f.fetchRequestLocked(now)
}

// epochsRequestLocked builds an OffsetForLeaderEpoch request for the truncating
// partitions. A log with no epoch to ask about truncates to its HW (Kafka's rule).
func (f *Fetcher) epochsRequestLocked(now time.Time) (Request, bool) {
	var req *kmsg.OffsetForLeaderEpochRequest
	var parts []flightPart
	for _, fp := range f.parts {
		if fp.state != truncating || now.Before(fp.delay) {
			continue
		}
		last := lastRecordEpoch(fp.p.log)
		if last < 0 {
			l := fp.p.log
			if hw := l.HighWatermark(); hw < l.LogEndOffset() {
				if err := fp.p.truncateAsFollower(fp.epoch, hw); err != nil {
					f.m.log.Warn("follower truncation to the HW", "partition", fp.tp.String(), "err", err)
				}
			}
			fp.state = fetching
			continue
		}
		if req == nil {
			req = kmsg.NewPtrOffsetForLeaderEpochRequest()
			req.Version = 4
			req.ReplicaID = f.m.cfg.NodeID
		}
		n := len(req.Topics)
		if n == 0 || req.Topics[n-1].Topic != fp.tp.Topic {
			t := kmsg.NewOffsetForLeaderEpochRequestTopic()
			t.Topic = fp.tp.Topic
			req.Topics = append(req.Topics, t)
			n++
		}
		rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		rp.Partition, rp.CurrentLeaderEpoch, rp.LeaderEpoch = fp.tp.Partition, fp.epoch, last
		req.Topics[n-1].Partitions = append(req.Topics[n-1].Partitions, rp)
		parts = append(parts, flightPart{fp: fp, epoch: fp.epoch})
	}
	if req == nil {
		return Request{}, false
	}
	r := Request{Source: f.key.Source, OffsetForLeaderEpoch: req}
	f.fl = &flight{req: r, parts: parts}
	return r, true
}

func (f *Fetcher) fetchRequestLocked(now time.Time) (Request, time.Time) {
	cfg := &f.m.cfg.Fetcher
	var wake time.Time
	soonest := func(t time.Time) {
		if wake.IsZero() || t.Before(wake) {
			wake = t
		}
	}
	throttled := false
	var throttleAt time.Time
	if f.m.throttle != nil {
		ok, at := f.m.throttle.Allow(now)
		throttled, throttleAt = !ok, at
	}
	var wants []want
	var parts []flightPart
	for _, fp := range f.parts {
		if fp.state != fetching {
			if fp.state == earliestLocal && now.Before(fp.delay) {
				soonest(fp.delay) // its ListOffsets, asked again
			}
			continue
		}
		if now.Before(fp.delay) {
			soonest(fp.delay)
			continue
		}
		if throttled && fp.p.isThrottled() && !fp.inSync {
			soonest(throttleAt)
			continue
		}
		l := fp.p.log
		f.repairDamage(fp)
		last := int32(-1)
		if !cfg.UseOffsetForLeaderEpoch {
			last = lastRecordEpoch(l)
		}
		k := sessKey{topic: fp.tp.Topic, id: fp.topicID, partition: fp.tp.Partition}
		wants = append(wants, want{key: k, fp: fp, w: sessWant{offset: l.LogEndOffset(), logStart: l.LogStartOffset(),
			maxBytes: cfg.MaxBytes, curEpoch: fp.epoch, last: last}})
		parts = append(parts, flightPart{fp: fp, epoch: fp.epoch})
	}
	if len(wants) == 0 {
		return Request{}, wake
	}
	req := kmsg.NewPtrFetchRequest()
	req.Version = cfg.Version // a client may negotiate another: both forms are filled
	req.ReplicaID = f.m.cfg.NodeID
	req.ReplicaState.ID, req.ReplicaState.Epoch = f.m.cfg.NodeID, f.m.brokerEpoch()
	req.MaxWaitMillis = int32(cfg.MaxWait / time.Millisecond)
	req.MinBytes, req.MaxBytes = cfg.MinBytes, cfg.ResponseMaxBytes
	req.IsolationLevel = 0
	sb := f.sess.build(req, wants)
	r := Request{Source: f.key.Source, Fetch: req}
	f.fl = &flight{req: r, parts: parts, sess: sb}
	return r, time.Time{}
}

// lastRecordEpoch is the leader epoch of the log's last record (-1: none), what a
// follower sends as LastFetchedEpoch. It skips epochs the cache holds with no record
// (an epoch this node led without appending): truncation at the log end leaves those in
// the cache, and naming one would draw a diverging epoch that truncates nothing.
func lastRecordEpoch(l Log) int32 {
	leo, ls := l.LogEndOffset(), l.LogStartOffset()
	if leo <= ls {
		return -1
	}
	e := l.LatestEpoch()
	lastStart := int64(math.MaxInt64) // where the epoch after e starts
	fromLatest := true
	for e >= 0 {
		prev, start := l.EndOffsetForEpoch(e - 1) // start: where e starts
		switch {
		case start < 0: // e is 0, the first epoch there can be
			if fromLatest || ls < lastStart {
				return e
			}
			return -1
		case start >= lastStart: // e is below the cache's first epoch: not one of this log's
			return -1
		case start < leo:
			return e
		}
		lastStart, e, fromLatest = start, prev, false
	}
	return -1
}

// takeFlight returns the flight a response answers, if it is this fetcher's current one.
func (f *Fetcher) takeFlightLocked(r Request) *flight {
	fl := f.fl
	if fl == nil || fl.req.Fetch != r.Fetch || fl.req.OffsetForLeaderEpoch != r.OffsetForLeaderEpoch || fl.req.ListOffsets != r.ListOffsets {
		return nil
	}
	f.fl = nil
	return fl
}

// current returns the fetchPart of a flight part if it is still copied in the same epoch.
func (f *Fetcher) currentLocked(fp flightPart) bool {
	i, found := f.find(fp.fp.tp)
	return found && f.parts[i] == fp.fp && fp.fp.epoch == fp.epoch
}

// HandleFetch takes the answer (or failure) of a Fetch that Next returned.
func (f *Fetcher) HandleFetch(now time.Time, req *kmsg.FetchRequest, resp *kmsg.FetchResponse, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fl := f.takeFlightLocked(Request{Source: f.key.Source, Fetch: req})
	if fl == nil {
		return
	}
	backoff := f.m.cfg.Fetcher.Backoff
	if err == nil && resp != nil && resp.ErrorCode != 0 {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	if err != nil || resp == nil {
		f.sess.reset()
		if resp == nil || resp.ErrorCode != kerr.FetchSessionIDNotFound.Code && resp.ErrorCode != kerr.InvalidFetchSessionEpoch.Code {
			f.backoff = now.Add(backoff) // a lost session is simply opened again, at once
		}
		f.m.log.Debug("follower fetch failed", "source", f.key.Source, "err", err)
		return
	}
	f.sess.commit(fl.sess, resp.SessionID)
	byID := resp.Version >= 13 // topics by id; before, by name
	for i := range resp.Topics {
		t := &resp.Topics[i]
		for j := range t.Partitions {
			rp := &t.Partitions[j]
			for _, sp := range fl.parts {
				if sp.fp.tp.Partition != rp.Partition || byID && sp.fp.topicID != t.TopicID || !byID && sp.fp.tp.Topic != t.Topic {
					continue
				}
				if f.currentLocked(sp) {
					f.handlePartitionLocked(now, sp.fp, rp)
				}
				break
			}
		}
	}
	f.hold.Release()
}

// leaderCatchUpRetry is the first wait after an error that says the leader has not
// yet applied the metadata this follower follows it by (or the other way round).
const leaderCatchUpRetry = 50 * time.Millisecond

// partitionBackoff is the wait after partition error code, the fp.errs-th in a row.
// The errors of a leader or follower whose image is a moment behind the other's
// (NOT_LEADER_OR_FOLLOWER, UNKNOWN_LEADER_EPOCH, FENCED_LEADER_EPOCH,
// UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC_ID: a new leader's followers start
// fetching as soon as their own image names it, often before its image does) are
// retried after leaderCatchUpRetry, doubling per repeat up to backoff
// (replica.fetch.backoff.ms); Kafka's fetcher waits backoff at once, which an acks=all
// producer waited out after every leader change and after a topic's creation (1 s).
// Other errors wait backoff.
func partitionBackoff(fp *fetchPart, code int16, backoff time.Duration) time.Duration {
	switch code {
	case kerr.NotLeaderForPartition.Code, kerr.UnknownLeaderEpoch.Code, kerr.FencedLeaderEpoch.Code,
		kerr.UnknownTopicOrPartition.Code, kerr.UnknownTopicID.Code:
		d := leaderCatchUpRetry << min(fp.errs, 16)
		fp.errs++
		return min(d, backoff)
	}
	return backoff
}

// handlePartitionLocked applies one partition of a fetch answer.
func (f *Fetcher) handlePartitionLocked(now time.Time, fp *fetchPart, rp *kmsg.FetchResponseTopicPartition) {
	l := fp.p.log
	backoff := f.m.cfg.Fetcher.Backoff
	switch rp.ErrorCode {
	case 0:
		fp.errs = 0
	case kerr.OffsetMovedToTieredStorage.Code:
		// Below the leader's local log start, in remote storage: ask it where its
		// local log starts (earliestLocal), and start over there.
		fp.state, fp.logStart = earliestLocal, rp.LogStartOffset
		f.m.log.Info("follower fetch offset moved to tiered storage: asking the leader for its earliest local offset",
			"partition", fp.tp.String(), "log_end", l.LogEndOffset(), "leader_log_start", rp.LogStartOffset)
		return
	case kerr.OffsetOutOfRange.Code:
		leo := l.LogEndOffset()
		if rp.LogStartOffset >= 0 && leo < rp.LogStartOffset {
			// Behind the leader's log start: start over empty there (full sync).
			if err := fp.p.restartAsFollower(fp.epoch, rp.LogStartOffset); err != nil {
				f.m.log.Warn("follower full sync", "partition", fp.tp.String(), "err", err)
				fp.delay = now.Add(backoff)
				return
			}
			f.m.log.Info("follower behind the leader's log start: copying from it", "partition", fp.tp.String(),
				"log_end", leo, "leader_log_start", rp.LogStartOffset)
			if r := f.m.remoteLog(); r != nil && r.Enabled(fp.p) {
				// Tiered, and a leader that answers OFFSET_OUT_OF_RANGE with its
				// local log start (one of a build before OFFSET_MOVED_TO_TIERED_STORAGE,
				// or whose copies are not listed yet): the records below are in
				// remote storage; the state as of that start comes from the copy
				// ending there.
				ctx, cancel := context.WithTimeout(f.m.ctx, 30*time.Second)
				if err := r.RebuildAuxState(ctx, fp.p, rp.LogStartOffset); err != nil {
					f.m.log.Warn("follower state from remote storage", "partition", fp.tp.String(), "offset", rp.LogStartOffset, "err", err)
				}
				cancel()
			}
			return
		}
		// Ahead of the leader's log end: find the divergence by epoch.
		fp.state = truncating
		return
	default:
		fp.delay = now.Add(partitionBackoff(fp, rp.ErrorCode, backoff))
		f.m.log.Debug("follower fetch partition error", "partition", fp.tp.String(), "code", rp.ErrorCode)
		return
	}
	if rp.DivergingEpoch.EndOffset >= 0 || rp.DivergingEpoch.Epoch >= 0 {
		f.truncateLocked(fp, rp.DivergingEpoch.Epoch, rp.DivergingEpoch.EndOffset)
		return
	}
	if len(rp.RecordBatches) > 0 {
		appended, err := fp.p.appendAsFollower(fp.epoch, rp.RecordBatches, &f.hold)
		switch {
		case errors.Is(err, ErrNotLeader):
			return // no longer following in this epoch: Apply removes it
		case err != nil:
			f.m.log.Warn("follower append", "partition", fp.tp.String(), "err", err)
			fp.delay = now.Add(backoff)
			return
		case appended:
			if fp.p.isThrottled() && f.m.throttle != nil {
				f.m.throttle.Record(now, len(rp.RecordBatches))
			}
			f.durable.Add(1)
			l.OnDurableHeld(l.LogEndOffset()-1, &f.hold, f.onDur)
		}
	}
	leo := l.LogEndOffset()
	if rp.HighWatermark >= 0 {
		l.SetHighWatermark(min(rp.HighWatermark, leo))
		fp.lag = max(0, rp.HighWatermark-leo)
		fp.inSync = leo >= rp.HighWatermark
	}
	if ls := rp.LogStartOffset; ls > l.LogStartOffset() {
		if target := min(ls, l.HighWatermark()); target > l.LogStartOffset() {
			if _, err := l.DeleteRecordsBefore(target); err != nil {
				f.m.log.Debug("follower log start", "partition", fp.tp.String(), "err", err)
			}
		}
	}
	if err := fp.p.keepLogStart(rp.LogStartOffset); err != nil {
		f.m.log.Warn("follower log start", "partition", fp.tp.String(), "err", err)
	}
}

// truncateLocked cuts fp's log where it agrees with the leader's, given the leader's
// answer for the follower's last epoch (Kafka's getOffsetTruncationState): leaderEpoch
// is the leader's largest epoch <= the one asked, leaderEnd where its next epoch starts.
// When the follower does not have leaderEpoch itself, it cuts at the end of its own
// largest epoch below it and asks again (the next fetch carries that epoch).
func (f *Fetcher) truncateLocked(fp *fetchPart, leaderEpoch int32, leaderEnd int64) (complete bool) {
	l := fp.p.log
	leo := l.LogEndOffset()
	target := leo
	complete = true
	switch {
	case leaderEnd < 0:
		target = min(l.HighWatermark(), leo) // the leader knows no epochs
	case leaderEpoch < 0:
		target = min(leaderEnd, leo)
	default:
		fe, fend := l.EndOffsetForEpoch(leaderEpoch)
		switch {
		case fe < 0:
			target = min(leaderEnd, leo)
		case fe != leaderEpoch:
			target, complete = min(fend, leo), false
		default:
			target = min(fend, leaderEnd, leo)
		}
	}
	if target < leo {
		f.m.log.Debug("follower truncating", "partition", fp.tp.String(), "from", leo, "to", target,
			"leader_epoch", leaderEpoch, "leader_end", leaderEnd)
		if err := fp.p.truncateAsFollower(fp.epoch, target); err != nil && !errors.Is(err, ErrNotLeader) {
			f.m.log.Warn("follower truncation", "partition", fp.tp.String(), "err", err)
			fp.delay = f.m.clock.Now().Add(f.m.cfg.Fetcher.Backoff)
		}
	}
	return complete
}

// HandleOffsetForLeaderEpoch takes the answer (or failure) of an OffsetForLeaderEpoch
// request that Next returned.
func (f *Fetcher) HandleOffsetForLeaderEpoch(now time.Time, req *kmsg.OffsetForLeaderEpochRequest, resp *kmsg.OffsetForLeaderEpochResponse, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fl := f.takeFlightLocked(Request{Source: f.key.Source, OffsetForLeaderEpoch: req})
	if fl == nil {
		return
	}
	if err != nil || resp == nil {
		f.backoff = now.Add(f.m.cfg.Fetcher.Backoff)
		return
	}
	for i := range resp.Topics {
		t := &resp.Topics[i]
		for j := range t.Partitions {
			rp := &t.Partitions[j]
			for _, sp := range fl.parts {
				if sp.fp.tp.Topic != t.Topic || sp.fp.tp.Partition != rp.Partition {
					continue
				}
				if !f.currentLocked(sp) || sp.fp.state != truncating {
					break
				}
				if rp.ErrorCode != 0 {
					sp.fp.delay = now.Add(f.m.cfg.Fetcher.Backoff)
					break
				}
				if f.truncateLocked(sp.fp, rp.LeaderEpoch, rp.EndOffset) {
					sp.fp.state = fetching
				}
				break
			}
		}
	}
}

// isThrottled reports whether this replica is throttled (being added by a reassignment).
func (p *Partition) isThrottled() bool {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.throttled
}

// fetcherIndex is Kafka's AbstractFetcherManager.getFetcherId: which of a source's n
// fetchers copies tp (the topic's Java String hashCode, for ASCII names).
func fetcherIndex(tp engine.TopicPartition, n int) int {
	var h int32
	for i := 0; i < len(tp.Topic); i++ {
		h = 31*h + int32(tp.Topic[i])
	}
	v := 31*h + tp.Partition
	if v < 0 {
		v = -v
		if v < 0 {
			v = 0
		}
	}
	return int(v) % n
}

// damageLog is implemented by logs that record damaged ranges (*engine.Log: found at
// open or by the scrubber; reads of them fail with engine.ErrCorrupt).
type damageLog interface {
	FirstDamagedOffset() (int64, bool)
}

// repairDamage cuts a follower's log back to its first damaged offset, so that the
// fetch that follows copies the leader's records from there (an incremental sync of
// the damaged range and everything after it). It costs one atomic load when the log
// has no damage.
func (f *Fetcher) repairDamage(fp *fetchPart) {
	dl, ok := fp.p.log.(damageLog)
	if !ok {
		return
	}
	off, damaged := dl.FirstDamagedOffset()
	if !damaged {
		return
	}
	f.m.log.Warn("follower log damaged; truncating to fetch it again from the leader",
		"partition", fp.tp.String(), "first_damaged_offset", off, "log_end", fp.p.log.LogEndOffset())
	if err := fp.p.truncateAsFollower(fp.epoch, off); err != nil && !errors.Is(err, ErrNotLeader) {
		f.m.log.Error("follower truncation of a damaged range", "partition", fp.tp.String(), "err", err)
	}
}
