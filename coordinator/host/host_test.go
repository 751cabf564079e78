package host

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/samsa-broker/samsa/coordinator/metadata"
)

// fakeCoord records what the host asks of it; its loads finish when the test says.
type fakeCoord struct {
	n      int32
	mu     sync.Mutex
	events []string
	done   map[int32]func(error)
	closed bool
}

func (c *fakeCoord) log(format string, a ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.events = append(c.events, fmt.Sprintf(format, a...))
}

func (c *fakeCoord) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.events
	c.events = nil
	return out
}

// harness is a Host over fakeCoords, on node 1, with retries the test runs by hand.
type harness struct {
	t       *testing.T
	h       *Host[*fakeCoord]
	built   []*fakeCoord
	retries []func()
}

func newHarness(t *testing.T, byEpoch, lazy bool) *harness {
	hs := &harness{t: t}
	hs.h = New(Config[*fakeCoord]{
		Topic: "__internal", Self: 1, DefaultPartitions: 3, Lazy: lazy, ByEpoch: byEpoch,
		New: func(_ *metadata.Image, n int32) *fakeCoord {
			c := &fakeCoord{n: n, done: map[int32]func(error){}}
			hs.built = append(hs.built, c)
			return c
		},
		NumPartitions: func(c *fakeCoord) int32 { return c.n },
		Load: func(c *fakeCoord, p, epoch int32, done func(error)) {
			c.log("load %d@%d", p, epoch)
			c.mu.Lock()
			c.done[p] = done
			c.mu.Unlock()
		},
		Unload: func(c *fakeCoord, p int32) { c.log("unload %d", p) },
		Close:  func(c *fakeCoord) { c.closed = true },
		Retry:  time.Second,
		After:  func(_ time.Duration, fn func()) { hs.retries = append(hs.retries, fn) },
	}, nil)
	return hs
}

// image is the internal topic (id) with the leaders and leader epochs given, as
// "leader@epoch" per partition.
func image(t *testing.T, id byte, parts ...string) *metadata.Image {
	t.Helper()
	recs := []metadata.Record{&metadata.TopicRecord{Name: "__internal", ID: metadata.UUID{id}}}
	for i, p := range parts {
		var leader, epoch int32
		fmt.Sscanf(p, "%d@%d", &leader, &epoch)
		recs = append(recs, &metadata.PartitionRecord{TopicID: metadata.UUID{id}, Partition: int32(i), Replicas: []int32{1, 2},
			ISR: []int32{1, 2}, Leader: leader, LeaderEpoch: epoch})
	}
	im, err := (&metadata.Image{}).Apply(recs...)
	if err != nil {
		t.Fatal(err)
	}
	return im
}

func want(t *testing.T, c *fakeCoord, events ...string) {
	t.Helper()
	got := c.take()
	slices.Sort(got)
	slices.Sort(events)
	if !slices.Equal(got, events) {
		t.Fatalf("events %v, want %v", got, events)
	}
}

// Loads follow leadership: a partition is loaded when this node comes to lead it,
// unloaded when it stops; with ByEpoch it is loaded again at a newer leader epoch.
func TestHostFollowsLeadership(t *testing.T) {
	for _, byEpoch := range []bool{false, true} {
		t.Run(fmt.Sprint("byEpoch=", byEpoch), func(t *testing.T) {
			hs := newHarness(t, byEpoch, false)
			c := hs.h.Coordinator()
			if c == nil || c.n != 3 {
				t.Fatalf("the coordinator before the topic exists: %+v", c)
			}
			hs.h.Follow(image(t, 1, "1@0", "2@0", "1@0"))
			want(t, c, "load 0@0", "load 2@0")
			hs.h.Follow(image(t, 1, "2@1", "1@1", "1@1"))
			if byEpoch {
				want(t, c, "unload 0", "load 1@1", "load 2@1")
			} else {
				want(t, c, "unload 0", "load 1@1")
			}
			if !hs.h.Loaded(1) || hs.h.Loaded(0) {
				t.Fatal("loaded set")
			}
		})
	}
}

// A failed load is forgotten and retried with the last image after Retry, while this
// node still leads the partition.
func TestHostRetriesFailedLoads(t *testing.T) {
	hs := newHarness(t, false, false)
	c := hs.h.Coordinator()
	hs.h.Follow(image(t, 1, "1@0", "2@0", "2@0"))
	want(t, c, "load 0@0")
	c.done[0](errors.New("not leader yet"))
	if hs.h.Loaded(0) || len(hs.retries) != 1 {
		t.Fatalf("after the failure: loaded %v, %d retries", hs.h.Loaded(0), len(hs.retries))
	}
	hs.retries[0]()
	want(t, c, "load 0@0")
	c.done[0](nil)
	// A retry of a partition this node no longer leads loads nothing.
	hs.h.Follow(image(t, 1, "1@0", "1@0", "2@0"))
	want(t, c, "load 1@0")
	c.done[1](errors.New("read error"))
	hs.h.Follow(image(t, 1, "1@0", "2@1", "2@0"))
	hs.retries[1]()
	want(t, c)
}

// Another partition count rebuilds the coordinator before anything is loaded; another
// topic id unloads everything (from the coordinator that loaded it); Close closes it.
func TestHostRebuilds(t *testing.T) {
	hs := newHarness(t, false, false)
	first := hs.h.Coordinator()
	hs.h.Follow(image(t, 1, "1@0", "1@0", "1@0", "1@0"))
	second := hs.h.Coordinator()
	if second == first || second.n != 4 || !first.closed {
		t.Fatalf("rebuilt for 4 partitions: %+v (first closed %v)", second, first.closed)
	}
	want(t, first)
	want(t, second, "load 0@0", "load 1@0", "load 2@0", "load 3@0")
	hs.h.Follow(image(t, 2, "1@0", "2@0"))
	third := hs.h.Coordinator()
	want(t, second, "unload 0", "unload 1", "unload 2", "unload 3")
	want(t, third, "load 0@0")
	if third.n != 2 || !second.closed {
		t.Fatalf("a new topic id with 2 partitions: %+v", third)
	}
	hs.h.Close()
	if !third.closed || hs.h.Coordinator() != nil {
		t.Fatal("Close")
	}
	hs.h.Follow(image(t, 2, "1@0", "1@0"))
	want(t, third)
}

// A Lazy host builds its coordinator when the topic appears and drops it when the
// topic goes.
func TestHostLazy(t *testing.T) {
	hs := newHarness(t, false, true)
	if hs.h.Coordinator() != nil {
		t.Fatal("a lazy host built a coordinator before the topic exists")
	}
	hs.h.Follow(&metadata.Image{})
	if hs.h.Coordinator() != nil {
		t.Fatal("built without the topic")
	}
	hs.h.Follow(image(t, 1, "1@0", "2@0"))
	c := hs.h.Coordinator()
	if c == nil || c.n != 2 {
		t.Fatalf("built for the topic: %+v", c)
	}
	want(t, c, "load 0@0")
	hs.h.Follow(&metadata.Image{})
	if hs.h.Coordinator() != nil || !c.closed {
		t.Fatal("the topic gone: the coordinator stays")
	}
	if got := strings.Join(c.take(), ","); got != "unload 0" {
		t.Fatalf("the topic gone: %s", got)
	}
}
