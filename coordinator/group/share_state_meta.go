package group

import (
	"encoding/binary"
	"slices"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
)

// The share-partition state a share group has initialized (KIP-932's
// ShareGroupStatePartitionMetadata, record type 15 of __consumer_offsets): which
// partitions of which topics hold share state for the group in __share_group_state.
// The share-group offset admin APIs read it: DescribeShareGroupOffsets with Topics
// null describes these topics (and those the members subscribe to), and
// AlterShareGroupOffsets, which initializes state, records its partitions here, as
// DeleteShareGroupOffsets removes its topics.
//
//	ShareGroupStatePartitionMetadataValue (version 0, flexible):
//	  [initializing topics] | [initialized topics] | [deleting topics: topic_id uuid |
//	  topic_name | tags] | tags
//	  a topic of the first two: topic_id uuid | topic_name | [int32 partitions] |
//	  int64 create_timestamp | tags
//
// Kafka's layout (group-coordinator's ShareGroupStatePartitionMetadataValue.json), so
// its tools read what Samsa writes. Initializing topics are those a heartbeat is
// initializing at their share coordinators (share_state_init.go); Samsa writes no
// deleting topics: a deletion is written to the share coordinator before the record
// drops the topic.

// ShareStateTopic is one topic of a ShareGroupStatePartitionMetadataValue.
type ShareStateTopic struct {
	TopicID         [16]byte
	TopicName       string
	Partitions      []int32 // sorted (none in a deleting topic)
	CreateTimestamp int64
}

// ShareStateMetadata is a ShareGroupStatePartitionMetadataValue.
type ShareStateMetadata struct {
	Initializing, Initialized, Deleting []ShareStateTopic
}

func appendShareStateTopics(dst []byte, ts []ShareStateTopic, partitions bool) []byte {
	dst = appendCompactArrayLen(dst, len(ts))
	for _, t := range ts {
		dst = append(dst, t.TopicID[:]...)
		dst = appendCompactString(dst, t.TopicName)
		if partitions {
			dst = appendCompactArrayLen(dst, len(t.Partitions))
			for _, p := range t.Partitions {
				dst = binary.BigEndian.AppendUint32(dst, uint32(p))
			}
			dst = binary.BigEndian.AppendUint64(dst, uint64(t.CreateTimestamp))
		}
		dst = append(dst, 0) // tags
	}
	return dst
}

func appendShareStateValue(dst []byte, v *ShareStateMetadata) []byte {
	dst = appendValueHeader(dst)
	dst = appendShareStateTopics(dst, v.Initializing, true)
	dst = appendShareStateTopics(dst, v.Initialized, true)
	dst = appendShareStateTopics(dst, v.Deleting, false)
	return append(dst, 0)
}

func (r *reader) shareStateTopics(partitions bool) []ShareStateTopic {
	min := 16 + 1 + 1
	if partitions {
		min += 1 + 8
	}
	n := r.compactArrayLen(min)
	out := make([]ShareStateTopic, 0, n)
	for i := 0; i < n && r.err == nil; i++ {
		var t ShareStateTopic
		t.TopicID = r.uuid()
		t.TopicName = r.compactString()
		if partitions {
			m := r.compactArrayLen(4)
			t.Partitions = make([]int32, 0, m)
			for j := 0; j < m && r.err == nil; j++ {
				t.Partitions = append(t.Partitions, r.int32())
			}
			t.CreateTimestamp = r.int64()
		}
		r.skipTags()
		out = append(out, t)
	}
	return out
}

// DecodeShareStateValue decodes a ShareGroupStatePartitionMetadataValue.
func DecodeShareStateValue(b []byte) (ShareStateMetadata, error) {
	var v ShareStateMetadata
	r, err := valueReader(b, "share group state partition metadata")
	if err != nil {
		return v, err
	}
	v.Initializing = r.shareStateTopics(true)
	v.Initialized = r.shareStateTopics(true)
	v.Deleting = r.shareStateTopics(false)
	r.skipTags()
	return v, r.done()
}

// withInitialized returns v with the partitions of add among its initialized topics
// (merged by topic id; a topic new to it dated now).
func (v ShareStateMetadata) withInitialized(add []ShareStateTopic, now int64) ShareStateMetadata {
	out := ShareStateMetadata{Initializing: v.Initializing, Deleting: v.Deleting}
	byID := map[[16]byte]int{}
	for _, t := range v.Initialized {
		t.Partitions = slices.Clone(t.Partitions)
		byID[t.TopicID] = len(out.Initialized)
		out.Initialized = append(out.Initialized, t)
	}
	for _, a := range add {
		i, ok := byID[a.TopicID]
		if !ok {
			byID[a.TopicID] = len(out.Initialized)
			out.Initialized = append(out.Initialized, ShareStateTopic{TopicID: a.TopicID, TopicName: a.TopicName, CreateTimestamp: now})
			i = len(out.Initialized) - 1
		}
		t := &out.Initialized[i]
		for _, p := range a.Partitions {
			if !slices.Contains(t.Partitions, p) {
				t.Partitions = append(t.Partitions, p)
			}
		}
		slices.Sort(t.Partitions)
	}
	sort.Slice(out.Initialized, func(i, j int) bool { return out.Initialized[i].TopicName < out.Initialized[j].TopicName })
	return out
}

// without returns v without the topics of ids (initializing, initialized or deleting).
func (v ShareStateMetadata) without(ids map[[16]byte]bool) ShareStateMetadata {
	keep := func(ts []ShareStateTopic) []ShareStateTopic {
		var out []ShareStateTopic
		for _, t := range ts {
			if !ids[t.TopicID] {
				out = append(out, t)
			}
		}
		return out
	}
	return ShareStateMetadata{Initializing: keep(v.Initializing), Initialized: keep(v.Initialized), Deleting: keep(v.Deleting)}
}

// RecordShareState records that share group group holds share state for the
// partitions of topics (AlterShareGroupOffsets initialized it), in its
// ShareGroupStatePartitionMetadata record, written before cb(0). A group that is not a
// share group here is GROUP_ID_NOT_FOUND; not coordinator or loading, their codes. cb
// runs with no lock held.
func (c *Coordinator) RecordShareState(group string, topics []ShareStateTopic, cb func(code int16)) {
	c.updateShareState(group, cb, func(sg *shareState) (ShareStateMetadata, bool) {
		return sg.state.withInitialized(topics, c.clock.Now().UnixMilli()), len(topics) > 0
	})
}

// ForgetShareState drops the topics of ids from share group group's initialized share
// state (DeleteShareGroupOffsets deleted it); as RecordShareState otherwise.
func (c *Coordinator) ForgetShareState(group string, ids [][16]byte, cb func(code int16)) {
	set := map[[16]byte]bool{}
	for _, id := range ids {
		set[id] = true
	}
	c.updateShareState(group, cb, func(sg *shareState) (ShareStateMetadata, bool) {
		next := sg.state.without(set)
		changed := len(next.Initialized) != len(sg.state.Initialized) || len(next.Initializing) != len(sg.state.Initializing) ||
			len(next.Deleting) != len(sg.state.Deleting)
		return next, changed
	})
}

func (c *Coordinator) updateShareState(group string, cb func(int16), next func(*shareState) (ShareStateMetadata, bool)) {
	g, code := c.lookup(group, false)
	switch {
	case code != 0:
		cb(code)
		return
	case g == nil:
		cb(kerr.GroupIDNotFound.Code)
		return
	}
	g.with(func(fx *effects) {
		if g.kind != kindShare || g.state == stateDead {
			fx.add(func() { cb(kerr.GroupIDNotFound.Code) })
			return
		}
		v, changed := next(g.sg)
		if !changed {
			fx.add(func() { cb(0) })
			return
		}
		g.sg.state = v
		recs := []Record{g.rec(recShareStatePartitionMetadata, "", appendShareStateValue(nil, &v))}
		g.writeThenLocked(fx, recs, func(err error) {
			if err != nil {
				cb(appendErrorCode(err, false))
				return
			}
			cb(0)
		})
	})
}
