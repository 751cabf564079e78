// ListOffsets (key 2), versions 0-11.
//
// Per partition, by Timestamp:
//
//	-1 latest          the high watermark (READ_COMMITTED, v2+: the last stable offset;
//	                   a replica, ReplicaID >= 0: the log end offset)
//	-2 earliest        the log start offset: the whole log's, remote copies included
//	-3 max timestamp   (KIP-734, v7+) the offset of the first record with the largest
//	                   timestamp, and that timestamp (KAFKA-16310); remote copies included
//	-4 earliest local  (KIP-1005, v8+) the local log start offset
//	-5 latest tiered   (KIP-1005, v9+) the last offset copied to remote storage (-1:
//	                   none yet); not tiered: offset -1, timestamp -1
//	-6 earliest pending upload (KIP-1023, v11+) the first offset not yet copied to
//	                   remote storage; not tiered: offset -1, timestamp -1
//	t >= 0             the first offset whose record timestamp is >= t, if it is below
//	                   the HW (READ_COMMITTED: the LSO); else offset -1, timestamp -1;
//	                   a tiered partition's copies in remote storage are searched first
//
// The answer's LeaderEpoch (v4+) is the leader epoch of the batch holding the offset,
// from the log's epoch cache. Only the leader answers; CurrentLeaderEpoch is checked
// against replication's epoch (KIP-320). v0 answers
// OldStyleOffsets with the one offset found (MaxNumOffsets beyond 1 is not honoured:
// Kafka's v0 listed segment base offsets, which no current client uses).
//
// Differences from Apache Kafka: in a compressed batch, a timestamp lookup answers the
// batch's base offset and max timestamp (the engine decodes no codecs).
package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/net/authz"
)

func init() {
	register(API{Key: 2, MinVersion: 0, MaxVersion: 11, Handle: handleListOffsets, Authz: authz.ListOffsets})
}

func handleListOffsets(b *Broker, r *Request) {
	req := r.Body.(*kmsg.ListOffsetsRequest)
	resp := r.ResponseKind().(*kmsg.ListOffsetsResponse)
	resp.Topics = make([]kmsg.ListOffsetsResponseTopic, len(req.Topics))
	for i := range req.Topics {
		rt := &req.Topics[i]
		st := &resp.Topics[i]
		st.Topic = rt.Topic
		st.Partitions = make([]kmsg.ListOffsetsResponseTopicPartition, len(rt.Partitions))
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			sp := &st.Partitions[j]
			*sp = kmsg.NewListOffsetsResponseTopicPartition()
			sp.Partition = rp.Partition
			if err := b.listOffset(r.Header.Version, req.ReplicaID, req.IsolationLevel, rt.Topic, rp, sp); err != nil {
				sp.ErrorCode = err.Code
				continue
			}
			if r.Header.Version == 0 && sp.Offset >= 0 && rp.MaxNumOffsets > 0 {
				sp.OldStyleOffsets = []int64{sp.Offset}
			}
		}
	}
	r.Respond(resp)
}

func (b *Broker) listOffset(v int16, replicaID int32, isolation int8, topic string, rp *kmsg.ListOffsetsRequestTopicPartition, sp *kmsg.ListOffsetsResponseTopicPartition) *kerr.Error {
	p, err := b.parts.Lookup(topic, rp.Partition)
	if err != nil {
		return engineErr(err)
	}
	rep, ke := p.Leader()
	if ke != nil {
		return ke
	}
	if err := rep.CheckLeader(rp.CurrentLeaderEpoch); err != nil {
		return engineErr(err)
	}
	l := p.Log
	// hw is the end of what the asker may read (Kafka's lastFetchableOffset).
	hw := l.HighWatermark()
	switch {
	case replicaID >= 0:
		hw = l.LogEndOffset()
	case isolation == 1:
		hw = l.LastStableOffset()
	}
	sp.Timestamp, sp.Offset, sp.LeaderEpoch = -1, -1, -1
	switch ts := rp.Timestamp; {
	case ts == -1:
		sp.Offset = hw
		sp.LeaderEpoch = rep.LatestEpoch()
	case ts == -2:
		sp.Offset = rep.LogStartOffset()
		sp.LeaderEpoch = epochOfOffset(l, sp.Offset)
	case ts == -4 && v >= 8:
		sp.Offset = rep.LocalLogStartOffset()
		sp.LeaderEpoch = epochOfOffset(l, sp.Offset)
	case ts == -3 && v >= 7:
		mts, off, err := rep.MaxTimestamp(context.Background()) // the copies in remote storage too, when tiered
		if err != nil {
			return engineErr(err)
		}
		if off >= 0 && off < hw {
			sp.Timestamp, sp.Offset = mts, off
			sp.LeaderEpoch = epochOfOffset(l, off)
		}
	case ts == -5 && v >= 9:
		if end, ok := rep.EarliestPendingUpload(); ok {
			sp.Offset = -1
			if end > rep.LogStartOffset() {
				sp.Offset = end - 1
				sp.LeaderEpoch = epochOfOffset(l, sp.Offset)
			}
		}
	case ts == -6 && v >= 11:
		if off, ok := rep.EarliestPendingUpload(); ok {
			sp.Offset = off
			sp.LeaderEpoch = epochOfOffset(l, off)
		}
	case ts >= 0:
		off, t, ok, err := rep.OffsetForTimestamp(context.Background(), ts) // remote copies first, when tiered
		if err != nil {
			return engineErr(err)
		}
		if ok && off < hw {
			sp.Timestamp, sp.Offset = t, off
			sp.LeaderEpoch = epochOfOffset(l, off)
		}
	default:
		return kerr.InvalidRequest
	}
	return nil
}
