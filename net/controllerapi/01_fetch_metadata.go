// Fetch (key 1) on the controller listener, versions 12-18: brokers read the committed
// metadata log (docs/CLUSTER.md, "The paths between nodes").
//
// Only topic __cluster_metadata (by name before v13, by metadata.MetadataTopicID from
// v13), partition 0: other topics answer UNKNOWN_TOPIC_OR_PARTITION (UNKNOWN_TOPIC_ID
// by id), other partitions UNKNOWN_TOPIC_OR_PARTITION, a fetch offset below 0
// OFFSET_OUT_OF_RANGE, a ClusterID of another cluster INCONSISTENT_CLUSTER_ID. The
// answer comes from this voter's committed log, whether or not it leads:
//
//	HighWatermark  the last committed offset + 1 (the voter's applied offset)
//	CurrentLeader  the raft leader (-1: unknown) and term
//	Records        committed entries from FetchOffset on (offset 0 reads from 1),
//	               each framed offset u64 | length u32 | entry frame (net/peer's
//	               AppendMetadataEntry), about min(MaxBytes, partition MaxBytes) bytes
//	               of them (at least one entry when there is one; at most 64 MiB)
//	SnapshotID     when FetchOffset is compacted away: {EndOffset = snapshot offset + 1,
//	               Epoch = its term} and no records; read it with FetchSnapshot (59)
//
// With nothing committed past FetchOffset the request long-polls up to MaxWaitMillis
// (on a goroutine of its own). Sessions (KIP-227) are not used: SessionID 0.
//
// Differences from Apache Kafka: KRaft's fetch reads the leader's log including
// uncommitted entries and detects divergence (KIP-595); brokers here only ever read
// committed entries, from any voter, so they never diverge.

package controllerapi

import (
	"context"
	"math"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/controller/quorum"
	"github.com/samsa-broker/samsa/coordinator/metadata"
	"github.com/samsa-broker/samsa/net/peer"
	"github.com/samsa-broker/samsa/net/request"
)

func init() {
	register(request.Spec{Key: 1, MinVersion: 12, MaxVersion: 18}, handleMetadataFetch)
}

// maxMetadataFetchBytes bounds one metadata fetch's records.
const maxMetadataFetchBytes = 64 << 20

func handleMetadataFetch(h *Handler, r *request.Request) {
	req := r.Body.(*kmsg.FetchRequest)
	resp := r.ResponseKind().(*kmsg.FetchResponse)
	v := r.Header.Version
	if code := h.checkClusterID(req.ClusterID); code != 0 {
		resp.ErrorCode = code
		r.Respond(resp)
		return
	}
	var want *kmsg.FetchRequestTopicPartition // the one metadata partition asked for
	var wantTopic *kmsg.FetchResponseTopic
	for _, rt := range req.Topics {
		out := kmsg.NewFetchResponseTopic()
		out.Topic, out.TopicID = rt.Topic, rt.TopicID
		isMeta := (v < 13 && rt.Topic == peer.MetadataTopic) || (v >= 13 && rt.TopicID == [16]byte(metadata.MetadataTopicID))
		for i := range rt.Partitions {
			rp := kmsg.NewFetchResponseTopicPartition()
			rp.Partition = rt.Partitions[i].Partition
			rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = -1, -1, -1
			switch {
			case !isMeta && v >= 13:
				rp.ErrorCode = kerr.UnknownTopicID.Code
			case !isMeta || rp.Partition != 0 || want != nil:
				rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case rt.Partitions[i].FetchOffset < 0:
				rp.ErrorCode = kerr.OffsetOutOfRange.Code
			default:
				want = &rt.Partitions[i]
			}
			out.Partitions = append(out.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, out)
		if want != nil && wantTopic == nil {
			wantTopic = &resp.Topics[len(resp.Topics)-1]
		}
	}
	if want == nil {
		r.Respond(resp)
		return
	}
	// The answer's partition for want: the one left without an error code and -1s.
	var out *kmsg.FetchResponseTopicPartition
	for i := range wantTopic.Partitions {
		if p := &wantTopic.Partitions[i]; p.Partition == 0 && p.ErrorCode == 0 {
			out = p
			break
		}
	}
	from := uint64(max(want.FetchOffset, 1))
	maxBytes := int(min(max(req.MaxBytes, 1), max(want.PartitionMaxBytes, 1), maxMetadataFetchBytes))
	wait := time.Duration(max(req.MaxWaitMillis, 0)) * time.Millisecond
	h.async(func(ctx context.Context) {
		res, err := h.voter.ReadCommitted(from, maxBytes)
		if err == nil && len(res.Entries) == 0 && !res.SnapshotNeeded && wait > 0 {
			wctx, cancel := context.WithTimeout(ctx, wait)
			_, _ = h.voter.WaitCommitted(wctx, from-1)
			cancel()
			res, err = h.voter.ReadCommitted(from, maxBytes)
		}
		if err != nil {
			h.log.Warn("reading the committed metadata log", "from", from, "err", err)
			out.ErrorCode = kerr.NotLeaderForPartition.Code // the voter stopped: ask another
			r.Respond(resp)
			return
		}
		fillMetadataFetch(out, res)
		r.Respond(resp)
	})
}

// fillMetadataFetch writes a committed-log read into a Fetch answer's partition.
func fillMetadataFetch(out *kmsg.FetchResponseTopicPartition, res quorum.ReadResult) {
	out.HighWatermark = int64(min(res.Committed+1, math.MaxInt64))
	out.LastStableOffset, out.LogStartOffset = out.HighWatermark, -1
	out.CurrentLeader.LeaderID, out.CurrentLeader.LeaderEpoch = res.Leader, int32(min(res.Term, math.MaxInt32))
	if res.SnapshotNeeded {
		out.SnapshotID.EndOffset, out.SnapshotID.Epoch = int64(res.SnapshotOffset+1), int32(min(res.SnapshotTerm, math.MaxInt32))
		return
	}
	size := 0
	for _, e := range res.Entries {
		size += peer.MetadataEntrySize(len(e.Data))
	}
	b := make([]byte, 0, size)
	for _, e := range res.Entries {
		b = peer.AppendMetadataEntry(b, e.Offset, e.Data)
	}
	out.RecordBatches = b
}
