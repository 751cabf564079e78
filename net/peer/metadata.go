package peer

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/controller"
	"github.com/samsa-broker/samsa/coordinator/metadata"
)

// ErrSnapshotTooLarge: the snapshot exceeds MetadataSource's MaxSnapshotBytes.
var ErrSnapshotTooLarge = errors.New("peer: metadata snapshot too large")

// SnapshotNeededError is Fetch's error when the offset asked for is compacted away on
// the voter: it wraps controller.ErrSnapshotNeeded and names the voter's snapshot.
type SnapshotNeededError struct {
	Offset, SnapshotOffset, SnapshotTerm uint64
}

func (e *SnapshotNeededError) Error() string {
	return fmt.Sprintf("%v: offset %d, snapshot at %d (term %d)", controller.ErrSnapshotNeeded, e.Offset, e.SnapshotOffset, e.SnapshotTerm)
}

func (e *SnapshotNeededError) Unwrap() error { return controller.ErrSnapshotNeeded }

// MetadataSource reads the committed metadata log from the voters over the network
// (coordinator/controller's MetadataSource on a broker-only node): Fetch (1) and
// FetchSnapshot (59) of __cluster_metadata, as docs/CLUSTER.md frames them. It asks
// the voter it last learned leads the quorum, else the voters in turn.
type MetadataSource struct {
	c *Client
	// MaxSnapshotBytes bounds a snapshot's size (default 1 GiB): a voter announcing a
	// larger one is refused with ErrSnapshotTooLarge before anything is allocated.
	MaxSnapshotBytes int64
	// SnapshotChunk is the MaxBytes of one FetchSnapshot (default 4 MiB).
	SnapshotChunk int32
}

// MetadataSource returns a source reading the metadata log from the voters.
func (c *Client) MetadataSource() *MetadataSource {
	return &MetadataSource{c: c, MaxSnapshotBytes: 1 << 30, SnapshotChunk: 4 << 20}
}

// metadataTopicID is the metadata topic's id as kmsg spells it.
var metadataTopicID = [16]byte(metadata.MetadataTopicID)

// Fetch implements controller.MetadataSource: committed entries from offset on,
// waiting up to wait for some when there are none, at most about maxBytes of them
// (always at least one entry when one exists). A *SnapshotNeededError (wrapping
// controller.ErrSnapshotNeeded) when offset is compacted away. It retries other voters
// on connection errors until ctx ends.
func (s *MetadataSource) Fetch(ctx context.Context, offset uint64, maxBytes int, wait time.Duration) (controller.MetadataBatch, error) {
	if offset > math.MaxInt64 {
		return controller.MetadataBatch{}, fmt.Errorf("peer: metadata offset %d out of range", offset)
	}
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = s.c.cfg.NodeID
	req.ReplicaState.ID = s.c.cfg.NodeID
	req.ReplicaState.Epoch = -1
	req.MaxWaitMillis = int32(min(wait.Milliseconds(), math.MaxInt32))
	req.MinBytes = 1
	req.MaxBytes = int32(min(maxBytes, math.MaxInt32))
	req.IsolationLevel = 1
	req.SessionEpoch = -1 // no fetch session
	if s.c.cfg.ClusterID != "" {
		req.ClusterID = &s.c.cfg.ClusterID
	}
	t := kmsg.NewFetchRequestTopic()
	t.Topic, t.TopicID = MetadataTopic, metadataTopicID
	p := kmsg.NewFetchRequestTopicPartition()
	p.Partition, p.FetchOffset, p.PartitionMaxBytes = 0, int64(offset), req.MaxBytes
	p.CurrentLeaderEpoch, p.LastFetchedEpoch, p.LogStartOffset = -1, -1, -1
	t.Partitions = []kmsg.FetchRequestTopicPartition{p}
	req.Topics = []kmsg.FetchRequestTopic{t}

	resp, err := s.voterRequest(ctx, req)
	if err != nil {
		return controller.MetadataBatch{}, err
	}
	fr := resp.(*kmsg.FetchResponse)
	if fr.ErrorCode != 0 {
		return controller.MetadataBatch{}, fmt.Errorf("peer: metadata fetch: %w", kerr.ErrorForCode(fr.ErrorCode))
	}
	if len(fr.Topics) != 1 || len(fr.Topics[0].Partitions) != 1 || fr.Topics[0].Partitions[0].Partition != 0 {
		return controller.MetadataBatch{}, fmt.Errorf("%w: metadata fetch: want one partition of %s", ErrMalformedResponse, MetadataTopic)
	}
	fp := &fr.Topics[0].Partitions[0]
	if fp.ErrorCode != 0 {
		return controller.MetadataBatch{}, fmt.Errorf("peer: metadata fetch: %w", kerr.ErrorForCode(fp.ErrorCode))
	}
	b := controller.MetadataBatch{Leader: fp.CurrentLeader.LeaderID, Term: uint64(max(fp.CurrentLeader.LeaderEpoch, 0))}
	if fp.HighWatermark < 0 {
		return b, fmt.Errorf("%w: metadata high watermark %d", ErrMalformedResponse, fp.HighWatermark)
	}
	b.HighWatermark = uint64(fp.HighWatermark)
	s.c.NoteLeaderTerm(b.Leader, b.Term)
	if fp.SnapshotID.EndOffset >= 0 {
		if fp.SnapshotID.EndOffset == 0 || fp.SnapshotID.Epoch < 0 {
			return b, fmt.Errorf("%w: snapshot id %d/%d", ErrMalformedResponse, fp.SnapshotID.EndOffset, fp.SnapshotID.Epoch)
		}
		return b, &SnapshotNeededError{Offset: offset, SnapshotOffset: uint64(fp.SnapshotID.EndOffset - 1), SnapshotTerm: uint64(fp.SnapshotID.Epoch)}
	}
	if b.Entries, err = DecodeMetadataEntries(nil, fp.RecordBatches, max(offset, 1)); err != nil { // offset 0 reads from 1
		return b, err
	}
	if n := len(b.Entries); n > 0 && b.Entries[n-1].Offset >= b.HighWatermark {
		return b, fmt.Errorf("%w: entry %d at or past the high watermark %d", ErrMalformedEntries, b.Entries[n-1].Offset, b.HighWatermark)
	}
	return b, nil
}

// Snapshot implements controller.MetadataSource: the voters' latest snapshot: its offset (the last entry it covers)
// and its data (metadata.EncodeSnapshot). It reads it in chunks by position, all from
// one snapshot: when the voter replaces it meanwhile (SNAPSHOT_NOT_FOUND) it starts
// over with the new one.
func (s *MetadataSource) Snapshot(ctx context.Context) (uint64, []byte, error) {
	for {
		off, data, err := s.snapshotOnce(ctx)
		if errors.Is(err, kerr.SnapshotNotFound) && ctx.Err() == nil {
			continue
		}
		return off, data, err
	}
}

func (s *MetadataSource) snapshotOnce(ctx context.Context) (uint64, []byte, error) {
	id := kmsg.NewFetchSnapshotRequestTopicPartitionSnapshotID()
	id.EndOffset, id.Epoch = -1, -1 // the latest; the answer names it
	var (
		data []byte
		size int64 = -1
	)
	for pos := int64(0); size < 0 || pos < size; {
		req := kmsg.NewPtrFetchSnapshotRequest()
		req.ReplicaID, req.MaxBytes = s.c.cfg.NodeID, s.SnapshotChunk
		if s.c.cfg.ClusterID != "" {
			req.ClusterID = &s.c.cfg.ClusterID
		}
		t := kmsg.NewFetchSnapshotRequestTopic()
		t.Topic = MetadataTopic
		p := kmsg.NewFetchSnapshotRequestTopicPartition()
		p.CurrentLeaderEpoch, p.SnapshotID, p.Position = -1, id, pos
		t.Partitions = []kmsg.FetchSnapshotRequestTopicPartition{p}
		req.Topics = []kmsg.FetchSnapshotRequestTopic{t}
		resp, err := s.voterRequest(ctx, req)
		if err != nil {
			return 0, nil, err
		}
		fr := resp.(*kmsg.FetchSnapshotResponse)
		if fr.ErrorCode != 0 {
			return 0, nil, fmt.Errorf("peer: fetch snapshot: %w", kerr.ErrorForCode(fr.ErrorCode))
		}
		if len(fr.Topics) != 1 || len(fr.Topics[0].Partitions) != 1 {
			return 0, nil, fmt.Errorf("%w: fetch snapshot: want one partition", ErrMalformedResponse)
		}
		fp := &fr.Topics[0].Partitions[0]
		if fp.ErrorCode != 0 {
			return 0, nil, fmt.Errorf("peer: fetch snapshot: %w", kerr.ErrorForCode(fp.ErrorCode))
		}
		s.c.NoteLeaderTerm(fp.CurrentLeader.LeaderID, uint64(max(fp.CurrentLeader.LeaderEpoch, 0)))
		switch {
		case fp.SnapshotID.EndOffset <= 0 || fp.SnapshotID.Epoch < 0:
			return 0, nil, fmt.Errorf("%w: fetch snapshot: snapshot id %d/%d", ErrMalformedResponse, fp.SnapshotID.EndOffset, fp.SnapshotID.Epoch)
		case id.EndOffset >= 0 && (fp.SnapshotID.EndOffset != id.EndOffset || fp.SnapshotID.Epoch != id.Epoch):
			return 0, nil, fmt.Errorf("peer: fetch snapshot: %w (answered another)", kerr.SnapshotNotFound)
		case fp.Size < 0 || fp.Size > s.MaxSnapshotBytes:
			return 0, nil, fmt.Errorf("%w: %d bytes (limit %d)", ErrSnapshotTooLarge, fp.Size, s.MaxSnapshotBytes)
		case size >= 0 && fp.Size != size:
			return 0, nil, fmt.Errorf("%w: fetch snapshot: size changed from %d to %d", ErrMalformedResponse, size, fp.Size)
		case fp.Position != pos || int64(len(fp.Bytes)) > fp.Size-pos || (len(fp.Bytes) == 0 && pos < fp.Size):
			return 0, nil, fmt.Errorf("%w: fetch snapshot: %d bytes at %d, asked at %d of %d", ErrMalformedResponse, len(fp.Bytes), fp.Position, pos, fp.Size)
		}
		if size < 0 {
			size = fp.Size
			id.EndOffset, id.Epoch = fp.SnapshotID.EndOffset, fp.SnapshotID.Epoch
			data = make([]byte, 0, size)
		}
		data = append(data, fp.Bytes...)
		pos += int64(len(fp.Bytes))
	}
	return uint64(id.EndOffset - 1), data, nil
}

// voterRequest sends a metadata request to the known leader, else the voters in turn,
// until one answers or ctx ends; a voter that has not answered within VoterTimeout
// (beyond the long poll) is left for the next.
func (s *MetadataSource) voterRequest(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	return s.c.toVoters(ctx, PurposeMetadata, req, nil, s.c.cfg.VoterTimeout)
}
