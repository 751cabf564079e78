package replication

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// A follower whose fetch offset moved to tiered storage (Kafka's TierStateMachine,
// KIP-405):
//
//	Fetch ─▶ OFFSET_MOVED_TO_TIERED_STORAGE, the whole log's start   (state earliestLocal)
//	ListOffsets EARLIEST_LOCAL_TIMESTAMP (-4) ─▶ the leader's local log start L
//	                                             and the leader epoch at L
//	truncate fully, start at L ─▶ RemoteLog.RebuildAuxState(L): the producer state and
//	leader epoch of the copy ending at L − 1 ─▶ keep the whole log's start
//	                                                                (state fetching)
//	Fetch from L
//
// A failure at any step leaves the partition in earliestLocal after the backoff, and
// the steps run again from ListOffsets, so a replica never fetches from L without its
// state rebuilt (Kafka retries the same way: its fetch offset stays below L until the
// rebuild succeeds).

// earliestLocalListOffsetsVersion is the ListOffsets version asked for: the first
// with EARLIEST_LOCAL_TIMESTAMP (KIP-405).
const earliestLocalListOffsetsVersion = 8

// earliestLocalTimestamp is ListOffsets' EARLIEST_LOCAL_TIMESTAMP: the local log
// start offset, and the leader epoch of its batch.
const earliestLocalTimestamp = -4

// earliestLocalRequestLocked builds a ListOffsets request (EARLIEST_LOCAL_TIMESTAMP,
// as a replica) for the partitions in earliestLocal.
func (f *Fetcher) earliestLocalRequestLocked(now time.Time) (Request, bool) {
	var req *kmsg.ListOffsetsRequest
	var parts []flightPart
	for _, fp := range f.parts {
		if fp.state != earliestLocal || now.Before(fp.delay) {
			continue
		}
		if req == nil {
			req = kmsg.NewPtrListOffsetsRequest()
			req.Version = earliestLocalListOffsetsVersion
			req.ReplicaID = f.m.cfg.NodeID
		}
		n := len(req.Topics)
		if n == 0 || req.Topics[n-1].Topic != fp.tp.Topic {
			t := kmsg.NewListOffsetsRequestTopic()
			t.Topic = fp.tp.Topic
			req.Topics = append(req.Topics, t)
			n++
		}
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.CurrentLeaderEpoch, rp.Timestamp = fp.tp.Partition, fp.epoch, earliestLocalTimestamp
		req.Topics[n-1].Partitions = append(req.Topics[n-1].Partitions, rp)
		parts = append(parts, flightPart{fp: fp, epoch: fp.epoch})
	}
	if req == nil {
		return Request{}, false
	}
	r := Request{Source: f.key.Source, ListOffsets: req}
	f.fl = &flight{req: r, parts: parts}
	return r, true
}

// HandleListOffsets takes the answer (or failure) of a ListOffsets request that Next
// returned.
func (f *Fetcher) HandleListOffsets(now time.Time, req *kmsg.ListOffsetsRequest, resp *kmsg.ListOffsetsResponse, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fl := f.takeFlightLocked(Request{Source: f.key.Source, ListOffsets: req})
	if fl == nil {
		return
	}
	if err != nil || resp == nil {
		f.backoff = now.Add(f.m.cfg.Fetcher.Backoff)
		f.m.log.Debug("follower ListOffsets failed", "source", f.key.Source, "err", err)
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
				if !f.currentLocked(sp) || sp.fp.state != earliestLocal {
					break
				}
				if rp.ErrorCode != 0 || rp.Offset < 0 {
					sp.fp.delay = now.Add(partitionBackoff(sp.fp, rp.ErrorCode, f.m.cfg.Fetcher.Backoff))
					f.m.log.Debug("follower earliest local offset", "partition", sp.fp.tp.String(), "code", rp.ErrorCode, "offset", rp.Offset)
					break
				}
				f.startAtLocalLocked(now, sp.fp, rp.Offset, rp.LeaderEpoch)
				break
			}
		}
	}
}

// startAtLocalLocked empties fp's log to start at the leader's earliest local offset,
// rebuilds the state as of it from remote storage and goes back to fetching; on a
// failure fp stays in earliestLocal, to try again after the backoff.
func (f *Fetcher) startAtLocalLocked(now time.Time, fp *fetchPart, offset int64, leaderEpoch int32) {
	backoff := f.m.cfg.Fetcher.Backoff
	leo := fp.p.log.LogEndOffset()
	if err := fp.p.restartAsFollower(fp.epoch, offset); err != nil {
		f.m.log.Warn("follower start at the leader's earliest local offset", "partition", fp.tp.String(), "offset", offset, "err", err)
		fp.delay = now.Add(backoff)
		return
	}
	if r := f.m.remoteLog(); r != nil && r.Enabled(fp.p) {
		ctx, cancel := context.WithTimeout(f.m.ctx, 30*time.Second)
		err := r.RebuildAuxState(ctx, fp.p, offset)
		cancel()
		if err != nil {
			f.m.log.Warn("follower state from remote storage", "partition", fp.tp.String(), "offset", offset, "err", err)
			fp.delay = now.Add(backoff)
			return
		}
	} else {
		// Tiered on the leader, not here (remote.log.storage.system.enable off on
		// this broker): started over without the state, as after a full sync from
		// the leader's log start.
		f.m.log.Warn("follower fetch offset moved to tiered storage, but the partition is not tiered here: its state is not rebuilt",
			"partition", fp.tp.String())
	}
	if err := fp.p.keepLogStart(fp.logStart); err != nil {
		f.m.log.Warn("follower log start", "partition", fp.tp.String(), "err", err)
	}
	fp.state, fp.errs = fetching, 0
	f.m.log.Info("follower state rebuilt from remote storage: fetching from the leader's earliest local offset",
		"partition", fp.tp.String(), "log_end", leo, "leader_local_log_start", offset, "leader_epoch", leaderEpoch,
		"leader_log_start", fp.logStart)
}
