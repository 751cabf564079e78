package remote

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strconv"
)

// Uuid is Kafka's Uuid: 16 bytes, written as 22 characters of URL-safe
// base64 without padding (the form of topic ids in Kafka's tools and in
// Aiven's object keys).
type Uuid [16]byte

// String is Kafka's Uuid.toString.
func (u Uuid) String() string { return base64.RawURLEncoding.EncodeToString(u[:]) }

// IsZero reports the zero Uuid (Kafka's Uuid.ZERO_UUID), which names no topic
// and no segment.
func (u Uuid) IsZero() bool { return u == Uuid{} }

// ParseUuid reads the form String writes.
func ParseUuid(s string) (Uuid, error) {
	var u Uuid
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) != len(u) {
		return u, fmt.Errorf("remote: %q is not a Kafka Uuid (22 characters of URL-safe base64)", s)
	}
	copy(u[:], b)
	return u, nil
}

// RandomUuid returns a random version-4 Uuid as Kafka's Uuid.randomUuid does:
// never the zero Uuid nor the metadata topic's (1), and never one whose
// string form starts with '-' (a command line would read it as a flag).
func RandomUuid() Uuid {
	for {
		var u Uuid
		_, _ = rand.Read(u[:]) // crypto/rand.Read never fails (Go 1.24)
		u[6] = u[6]&0x0f | 0x40
		u[8] = u[8]&0x3f | 0x80
		if u.IsZero() || u == (Uuid{15: 1}) || u.String()[0] == '-' {
			continue
		}
		return u
	}
}

// TopicIDPartition is Kafka's TopicIdPartition: a partition named by its
// topic's id and its name.
type TopicIDPartition struct {
	TopicID   Uuid
	Topic     string
	Partition int32
}

func (tp TopicIDPartition) String() string {
	return tp.TopicID.String() + ":" + tp.Topic + "-" + strconv.Itoa(int(tp.Partition))
}

// SegmentID is Kafka's RemoteLogSegmentId: the partition and a random Uuid
// drawn for each copy of a segment. Two leaders copying the same offsets get
// two ids, so their objects never share a key.
type SegmentID struct {
	TopicIDPartition
	ID Uuid
}

// NewSegmentID draws the id of a new copy of a segment of tp.
func NewSegmentID(tp TopicIDPartition) SegmentID {
	return SegmentID{TopicIDPartition: tp, ID: RandomUuid()}
}

func (id SegmentID) String() string { return id.TopicIDPartition.String() + ":" + id.ID.String() }

// SegmentState is Kafka's RemoteLogSegmentState, with its ids (the values
// written to __remote_log_metadata).
type SegmentState int8

const (
	CopySegmentStarted    SegmentState = 0 // COPY_SEGMENT_STARTED
	CopySegmentFinished   SegmentState = 1 // COPY_SEGMENT_FINISHED
	DeleteSegmentStarted  SegmentState = 2 // DELETE_SEGMENT_STARTED
	DeleteSegmentFinished SegmentState = 3 // DELETE_SEGMENT_FINISHED
)

func (s SegmentState) String() string {
	switch s {
	case CopySegmentStarted:
		return "COPY_SEGMENT_STARTED"
	case CopySegmentFinished:
		return "COPY_SEGMENT_FINISHED"
	case DeleteSegmentStarted:
		return "DELETE_SEGMENT_STARTED"
	case DeleteSegmentFinished:
		return "DELETE_SEGMENT_FINISHED"
	}
	return "SegmentState(" + strconv.Itoa(int(s)) + ")"
}

// ValidTransition is Kafka's RemoteLogSegmentState.isValidTransition: a copy
// finishes or is deleted; a finished copy is deleted; a deletion may be
// started again (a new leader retries it) and finishes.
func ValidTransition(from, to SegmentState) bool {
	switch from {
	case CopySegmentStarted:
		return to == CopySegmentFinished || to == DeleteSegmentStarted
	case CopySegmentFinished:
		return to == DeleteSegmentStarted
	case DeleteSegmentStarted:
		return to == DeleteSegmentStarted || to == DeleteSegmentFinished
	}
	return false
}

// EpochEntry is one leader epoch of a segment and the first offset written
// in it.
type EpochEntry struct {
	Epoch       int32
	StartOffset int64
}

// SegmentMetadata is Kafka's RemoteLogSegmentMetadata: what the leader knows
// of one copy of a segment. The storage manager uses ID and StartOffset to
// name the objects; the rest travels in __remote_log_metadata.
//
// Invariants (Validate): StartOffset ≥ 0, EndOffset ≥ StartOffset, at least
// one leader epoch, epochs strictly increasing with start offsets
// non-decreasing within [StartOffset, EndOffset], SegmentSize ≥ 0.
type SegmentMetadata struct {
	ID             SegmentID
	StartOffset    int64 // the segment's base offset
	EndOffset      int64 // its last offset (inclusive)
	MaxTimestamp   int64 // the largest timestamp of its batches (ms)
	BrokerID       int32 // the leader that copies it
	EventTimestamp int64 // when this state was reached (ms)
	SegmentSize    int64 // bytes of the .log file
	LeaderEpochs   []EpochEntry
	State          SegmentState
	// CustomMetadata is what the storage manager returned from the copy,
	// kept with the metadata (KIP-917); empty when it returned none.
	CustomMetadata []byte
}

// SegmentMetadataUpdate is Kafka's RemoteLogSegmentMetadataUpdate: a copy's
// new state, as the leader records it.
type SegmentMetadataUpdate struct {
	ID             SegmentID
	BrokerID       int32 // the leader that reached the state
	EventTimestamp int64 // when (ms)
	CustomMetadata []byte
	State          SegmentState
}

// PartitionDeleteState is Kafka's RemotePartitionDeleteState, with its ids
// (the values written to __remote_log_metadata).
type PartitionDeleteState int8

const (
	DeletePartitionMarked   PartitionDeleteState = 0 // DELETE_PARTITION_MARKED
	DeletePartitionStarted  PartitionDeleteState = 1 // DELETE_PARTITION_STARTED
	DeletePartitionFinished PartitionDeleteState = 2 // DELETE_PARTITION_FINISHED
)

// PartitionDeleteMetadata is Kafka's RemotePartitionDeleteMetadata: how far
// the deletion of a deleted partition's copies went.
type PartitionDeleteMetadata struct {
	Partition      TopicIDPartition
	BrokerID       int32 // the node that reached the state
	EventTimestamp int64 // when (ms)
	State          PartitionDeleteState
}

// ErrInvalidMetadata: a SegmentMetadata that breaks its invariants.
var ErrInvalidMetadata = errors.New("remote: invalid remote log segment metadata")

// Validate checks the invariants above.
func (m *SegmentMetadata) Validate() error {
	switch {
	case m.ID.ID.IsZero():
		return fmt.Errorf("%w: no segment id", ErrInvalidMetadata)
	case m.ID.TopicID.IsZero() || m.ID.Topic == "" || m.ID.Partition < 0:
		return fmt.Errorf("%w: partition %v", ErrInvalidMetadata, m.ID.TopicIDPartition)
	case m.StartOffset < 0 || m.EndOffset < m.StartOffset:
		return fmt.Errorf("%w: offsets [%d, %d]", ErrInvalidMetadata, m.StartOffset, m.EndOffset)
	case m.SegmentSize < 0:
		return fmt.Errorf("%w: size %d", ErrInvalidMetadata, m.SegmentSize)
	case len(m.LeaderEpochs) == 0:
		return fmt.Errorf("%w: no leader epochs", ErrInvalidMetadata)
	}
	if !slices.IsSortedFunc(m.LeaderEpochs, func(a, b EpochEntry) int { return int(a.Epoch) - int(b.Epoch) }) {
		return fmt.Errorf("%w: leader epochs out of order", ErrInvalidMetadata)
	}
	for i, e := range m.LeaderEpochs {
		if i > 0 && (e.Epoch == m.LeaderEpochs[i-1].Epoch || e.StartOffset < m.LeaderEpochs[i-1].StartOffset) {
			return fmt.Errorf("%w: leader epoch %d at %d", ErrInvalidMetadata, e.Epoch, e.StartOffset)
		}
		if e.StartOffset > m.EndOffset {
			return fmt.Errorf("%w: leader epoch %d starts at %d, past the end %d", ErrInvalidMetadata, e.Epoch, e.StartOffset, m.EndOffset)
		}
	}
	return nil
}

// IndexType is Kafka's RemoteStorageManager.IndexType.
type IndexType int8

const (
	IndexOffset           IndexType = iota // OFFSET: the .index file
	IndexTimestamp                         // TIMESTAMP: the .timeindex file
	IndexProducerSnapshot                  // PRODUCER_SNAPSHOT: the .snapshot at the segment's end
	IndexTransaction                       // TRANSACTION: the .txnindex file, when the segment has one
	IndexLeaderEpoch                       // LEADER_EPOCH: the leader-epoch checkpoint up to the segment's end
)

// IndexTypes lists every index type, in Kafka's order.
var IndexTypes = []IndexType{IndexOffset, IndexTimestamp, IndexProducerSnapshot, IndexTransaction, IndexLeaderEpoch}

func (t IndexType) String() string {
	switch t {
	case IndexOffset:
		return "OFFSET"
	case IndexTimestamp:
		return "TIMESTAMP"
	case IndexProducerSnapshot:
		return "PRODUCER_SNAPSHOT"
	case IndexTransaction:
		return "TRANSACTION"
	case IndexLeaderEpoch:
		return "LEADER_EPOCH"
	}
	return "IndexType(" + strconv.Itoa(int(t)) + ")"
}

// LogSegmentData is Kafka's LogSegmentData: the files of a sealed segment to
// copy. Paths are read while CopyLogSegmentData runs and never kept; the
// caller keeps the segment from being deleted or cleaned meanwhile.
type LogSegmentData struct {
	LogSegment       string // <base>.log
	OffsetIndex      string // <base>.index
	TimeIndex        string // <base>.timeindex
	TransactionIndex string // <base>.txnindex; "" when the segment has none
	ProducerSnapshot string // <next base>.snapshot: producer state at the segment's end
	// LeaderEpochIndex is the leader-epoch checkpoint's contents up to the
	// segment's end, as Kafka passes it (a buffer, not a file).
	LeaderEpochIndex []byte
}
