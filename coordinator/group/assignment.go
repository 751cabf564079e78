package group

import (
	"bytes"
	"slices"
	"sort"
	"sync/atomic"
)

// assignment maps a topic id to its partitions, sorted and without duplicates. A topic
// with no partitions is absent. Values are owned by the map: copy before sharing.
type assignment map[[16]byte][]int32

func compareUUID(a, b [16]byte) int { return bytes.Compare(a[:], b[:]) }

func (a assignment) add(id [16]byte, p int32) {
	ps := a[id]
	i, found := slices.BinarySearch(ps, p)
	if found {
		return
	}
	a[id] = slices.Insert(ps, i, p)
}

func (a assignment) has(id [16]byte, p int32) bool {
	_, found := slices.BinarySearch(a[id], p)
	return found
}

func (a assignment) remove(id [16]byte, p int32) {
	ps := a[id]
	i, found := slices.BinarySearch(ps, p)
	if !found {
		return
	}
	ps = slices.Delete(ps, i, i+1)
	if len(ps) == 0 {
		delete(a, id)
		return
	}
	a[id] = ps
}

func (a assignment) clone() assignment {
	out := make(assignment, len(a))
	for id, ps := range a {
		out[id] = slices.Clone(ps)
	}
	return out
}

func (a assignment) count() int {
	n := 0
	for _, ps := range a {
		n += len(ps)
	}
	return n
}

func (a assignment) equal(b assignment) bool {
	if len(a) != len(b) {
		return false
	}
	for id, ps := range a {
		if !slices.Equal(ps, b[id]) {
			return false
		}
	}
	return true
}

// each calls fn for every partition in topic id then partition order.
func (a assignment) each(fn func(id [16]byte, p int32)) {
	ids := make([][16]byte, 0, len(a))
	for id := range a {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, compareUUID)
	for _, id := range ids {
		for _, p := range a[id] {
			fn(id, p)
		}
	}
}

// TopicInfo is one topic of the cluster as the coordinator sees it: the broker hands
// the coordinator its metadata image's topics with SetTopics.
type TopicInfo struct {
	Name       string
	ID         [16]byte
	Partitions int32
}

// topicImage is an immutable snapshot of the cluster's topics.
type topicImage struct {
	version uint64
	byName  map[string]TopicInfo
	byID    map[[16]byte]TopicInfo
	names   []string // sorted
}

var emptyTopics = &topicImage{byName: map[string]TopicInfo{}, byID: map[[16]byte]TopicInfo{}}

// topicsHolder is the coordinator's current topic image.
type topicsHolder struct{ p atomic.Pointer[topicImage] }

func (h *topicsHolder) load() *topicImage {
	if im := h.p.Load(); im != nil {
		return im
	}
	return emptyTopics
}

// SetTopics replaces the coordinator's view of the cluster's topics with topics, at
// metadata version (the image's offset; it must grow). Consumer groups subscribed to
// topics that changed (created, deleted, partitions added) or whose regular
// expressions now match other topics see the change on their members' next
// heartbeats: the group epoch is bumped and a new target assignment computed then, as
// Kafka does. The offsets of a deleted topic are deleted from every group
// (topics_deleted.go). Safe to call from any goroutine; topics is not kept.
func (c *Coordinator) SetTopics(version uint64, topics []TopicInfo) {
	im := &topicImage{
		version: version,
		byName:  make(map[string]TopicInfo, len(topics)),
		byID:    make(map[[16]byte]TopicInfo, len(topics)),
		names:   make([]string, 0, len(topics)),
	}
	for _, t := range topics {
		if t.Partitions < 0 {
			t.Partitions = 0
		}
		im.byName[t.Name] = t
		im.byID[t.ID] = t
		im.names = append(im.names, t.Name)
	}
	sort.Strings(im.names)
	old := c.topics.load()
	c.topics.p.Store(im)
	c.dropTopicOffsets(deletedTopics(old, im)) // topics_deleted.go
}

// tpKey names one partition by topic id.
type tpKey struct {
	id [16]byte
	p  int32
}
