// FetchSnapshot (key 59) on the controller listener, versions 0-1: a broker whose
// metadata offset is compacted away reads the voter's snapshot (metadata.EncodeSnapshot
// of the image at the snapshot's offset), in chunks by Position.
//
// Only topic __cluster_metadata partition 0 (else UNKNOWN_TOPIC_OR_PARTITION). SnapshotID
// {EndOffset, Epoch} names the snapshot: {-1, -1} asks for the newest, which the
// answer names; any other id must be the voter's newest ({offset + 1, term}), else
// SNAPSHOT_NOT_FOUND (it was replaced: start over). Position must lie within the
// snapshot (POSITION_OUT_OF_RANGE). The answer carries Size (the whole snapshot),
// Position and up to MaxBytes bytes from it (at most 16 MiB), and the quorum's leader.
// A voter without a snapshot answers SNAPSHOT_NOT_FOUND.
//
// Differences from Apache Kafka: {-1, -1} for the newest snapshot is Samsa's (KRaft
// brokers learn the id from the Fetch answer first; Samsa's do too, then read it as
// one snapshot across chunks); the snapshot's bytes are entry frames, not record
// batches.

package controllerapi

import (
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/net/peer"
	"github.com/samsa-broker/samsa/net/request"
)

func init() {
	register(request.Spec{Key: 59, MinVersion: 0, MaxVersion: 1}, handleFetchSnapshot)
}

// maxSnapshotChunk bounds one FetchSnapshot answer's bytes.
const maxSnapshotChunk = 16 << 20

func handleFetchSnapshot(h *Handler, r *request.Request) {
	req := r.Body.(*kmsg.FetchSnapshotRequest)
	resp := r.ResponseKind().(*kmsg.FetchSnapshotResponse)
	if code := h.checkClusterID(req.ClusterID); code != 0 {
		resp.ErrorCode = code
		r.Respond(resp)
		return
	}
	leader, term := h.voter.Leader()
	for _, rt := range req.Topics {
		out := kmsg.NewFetchSnapshotResponseTopic()
		out.Topic = rt.Topic
		for _, p := range rt.Partitions {
			rp := kmsg.NewFetchSnapshotResponseTopicPartition()
			rp.Partition = p.Partition
			rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = leader, int32(min(term, math.MaxInt32))
			if rt.Topic != peer.MetadataTopic || p.Partition != 0 {
				rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			} else {
				h.snapshotChunk(&rp, p, req.MaxBytes)
			}
			out.Partitions = append(out.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, out)
	}
	r.Respond(resp)
}

// snapshotChunk fills rp with the part of the voter's newest snapshot that p asks for.
func (h *Handler) snapshotChunk(rp *kmsg.FetchSnapshotResponseTopicPartition, p kmsg.FetchSnapshotRequestTopicPartition, maxBytes int32) {
	off, term, data, err := h.voter.Snapshot()
	if err != nil || off == 0 {
		rp.ErrorCode = kerr.SnapshotNotFound.Code
		return
	}
	endOffset, epoch := int64(min(off+1, math.MaxInt64)), int32(min(term, math.MaxInt32))
	if id := p.SnapshotID; !(id.EndOffset == -1 && id.Epoch == -1) && (id.EndOffset != endOffset || id.Epoch != epoch) {
		rp.ErrorCode = kerr.SnapshotNotFound.Code
		return
	}
	size := int64(len(data))
	if p.Position < 0 || p.Position > size {
		rp.ErrorCode = kerr.PositionOutOfRange.Code
		return
	}
	n := min(int64(max(maxBytes, 1)), maxSnapshotChunk, size-p.Position)
	rp.SnapshotID.EndOffset, rp.SnapshotID.Epoch = endOffset, epoch
	rp.Size, rp.Position = size, p.Position
	rp.Bytes = data[p.Position : p.Position+n]
}
