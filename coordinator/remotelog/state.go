package remotelog

import (
	"slices"

	"github.com/samsa-broker/samsa/engine/remote"
)

// partitionState is what __remote_log_metadata says of one user partition
// (Kafka's RemoteLogMetadataCache): every copy not yet deleted, by segment
// id, in its latest state, and whether the partition's remote data is being
// deleted.
//
// Records are applied as Kafka's cache applies them: a copy enters at
// COPY_SEGMENT_STARTED; an update moves it by remote.ValidTransition (an
// update of an unknown copy, or an invalid move, is dropped: a replay may
// meet what a deposed leader wrote after its successor); it leaves at
// DELETE_SEGMENT_FINISHED.
type partitionState struct {
	byID          map[remote.Uuid]*remote.SegmentMetadata
	deleteState   PartitionDeleteState
	deleteStarted bool // a RemotePartitionDeleteMetadataRecord was applied
}

func newPartitionState() *partitionState {
	return &partitionState{byID: map[remote.Uuid]*remote.SegmentMetadata{}}
}

// apply applies one decoded record (Decode's result); it reports whether
// the record changed anything.
func (s *partitionState) apply(rec any) bool {
	switch r := rec.(type) {
	case *remote.SegmentMetadata:
		if r.State != remote.CopySegmentStarted || s.byID[r.ID.ID] != nil {
			return false
		}
		md := *r
		s.byID[r.ID.ID] = &md
		return true
	case *Update:
		md := s.byID[r.ID.ID]
		if md == nil || !remote.ValidTransition(md.State, r.State) {
			return false
		}
		if r.State == remote.DeleteSegmentFinished {
			delete(s.byID, r.ID.ID)
			return true
		}
		md.State, md.BrokerID, md.EventTimestamp = r.State, r.BrokerID, r.EventTimestamp
		if r.CustomMetadata != nil {
			md.CustomMetadata = r.CustomMetadata
		}
		return true
	case *PartitionDelete:
		s.deleteStarted, s.deleteState = true, r.State
		if r.State == DeletePartitionFinished {
			clear(s.byID)
		}
		return true
	}
	return false
}

// segments returns copies of every segment's metadata, by start offset then
// event time.
func (s *partitionState) segments() []remote.SegmentMetadata {
	out := make([]remote.SegmentMetadata, 0, len(s.byID))
	for _, md := range s.byID {
		c := *md
		c.LeaderEpochs = slices.Clone(md.LeaderEpochs)
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b remote.SegmentMetadata) int {
		if a.StartOffset != b.StartOffset {
			return cmpInt64(a.StartOffset, b.StartOffset)
		}
		return cmpInt64(a.EventTimestamp, b.EventTimestamp)
	})
	return out
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// recordPartition is the user partition a decoded record is about.
func recordPartition(rec any) remote.TopicIDPartition {
	switch r := rec.(type) {
	case *remote.SegmentMetadata:
		return r.ID.TopicIDPartition
	case *Update:
		return r.ID.TopicIDPartition
	case *PartitionDelete:
		return r.Partition
	}
	return remote.TopicIDPartition{}
}

// Sizes replays __remote_log_metadata's record values, each metadata
// partition's in order, as the brokers do, to tell each user partition's
// finished copies and their bytes: what Kafka's RemoteLogSizeBytes counts,
// read by a tool that is no broker.
type Sizes struct {
	states map[remote.TopicIDPartition]*partitionState
}

// NewSizes returns an empty Sizes.
func NewSizes() *Sizes { return &Sizes{states: map[remote.TopicIDPartition]*partitionState{}} }

// Apply replays one record value; one this package cannot read is skipped,
// as the brokers skip it.
func (s *Sizes) Apply(value []byte) { applyValue(s.states, value) }

// applyValue replays one record value into the state of the partition it is
// about; a record of a later version is skipped, as Kafka's consumer logs and
// skips it.
func applyValue(states map[remote.TopicIDPartition]*partitionState, value []byte) {
	v, err := Decode(value)
	if err != nil {
		return
	}
	tp := recordPartition(v)
	st := states[tp]
	if st == nil {
		st = newPartitionState()
		states[tp] = st
	}
	st.apply(v)
}

// Of returns the number of tp's finished copies (COPY_SEGMENT_FINISHED) and
// their bytes.
func (s *Sizes) Of(tp remote.TopicIDPartition) (copies int, bytes int64) {
	if st := s.states[tp]; st != nil {
		for _, md := range st.byID {
			if md.State == remote.CopySegmentFinished {
				copies++
				bytes += md.SegmentSize
			}
		}
	}
	return copies, bytes
}
