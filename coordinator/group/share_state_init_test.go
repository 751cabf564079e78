package group

import (
	"slices"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fakeShareInit is a ShareStateInitializer that records its calls and fails the
// partitions in fail.
type fakeShareInit struct {
	mu    sync.Mutex
	calls []shareInitCall
	fail  map[int32]bool
}

type shareInitCall struct {
	group  string
	epoch  int32
	topics []ShareStateTopic
}

func (f *fakeShareInit) InitializeShareState(group string, epoch int32, topics []ShareStateTopic, done func(map[[16]byte][]int32)) {
	f.mu.Lock()
	f.calls = append(f.calls, shareInitCall{group, epoch, topics})
	var failed map[[16]byte][]int32
	for _, t := range topics {
		for _, p := range t.Partitions {
			if f.fail[p] {
				if failed == nil {
					failed = map[[16]byte][]int32{}
				}
				failed[t.TopicID] = append(failed[t.TopicID], p)
			}
		}
	}
	f.mu.Unlock()
	go done(failed) // another goroutine, as the share coordinator's answer comes
}

func (f *fakeShareInit) take() []shareInitCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.calls
	f.calls = nil
	return out
}

func (h *harness) shareHeartbeat(group, member string, epoch int32, topics ...string) *kmsg.ShareGroupHeartbeatResponse {
	h.t.Helper()
	req := kmsg.NewPtrShareGroupHeartbeatRequest()
	req.Version, req.GroupID, req.MemberID, req.MemberEpoch = 1, group, member, epoch
	if len(topics) > 0 {
		req.SubscribedTopicNames = topics
	}
	ch := make(chan *kmsg.ShareGroupHeartbeatResponse, 1)
	h.c.ShareGroupHeartbeat(req, "client", "host", func(r *kmsg.ShareGroupHeartbeatResponse) { ch <- r })
	r := <-ch
	if r.ErrorCode != 0 {
		h.t.Fatalf("share heartbeat of %s: %v", member, kerr.ErrorForCode(r.ErrorCode))
	}
	return r
}

func (h *harness) shareState(group string) ShareStateMetadata {
	h.t.Helper()
	g, _ := h.c.lookup(group, false)
	if g == nil {
		h.t.Fatalf("no group %s", group)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.sg.state.clone()
}

// TestShareHeartbeatInitializesState: a share group's first heartbeat on a topic
// initializes the state of every partition of it at the group epoch (start -1) before
// it is answered, and records them initialized (record 15, replayed on a restart); a
// later heartbeat initializes nothing again, a new partition is initialized at the
// next heartbeat, a partition whose initialization failed leaves "initializing" and is
// initialized again at the next heartbeat; DeleteGroups may then find them
// (ShareStatePartitions) once the group is empty.
func TestShareHeartbeatInitializesState(t *testing.T) {
	fi := &fakeShareInit{fail: map[int32]bool{}}
	tweak := func(c *Config) { c.ShareState = fi }
	h := newHarness(t, tweak)
	h.setTopics(1, map[string]int32{"a": 3, "b": 1})
	tidA := topicID("a")

	r := h.shareHeartbeat("g", "m1", 0, "a")
	calls := fi.take()
	if len(calls) != 1 || calls[0].group != "g" || calls[0].epoch != r.MemberEpoch || len(calls[0].topics) != 1 ||
		calls[0].topics[0].TopicID != tidA || !slices.Equal(calls[0].topics[0].Partitions, []int32{0, 1, 2}) {
		t.Fatalf("initializations after the first heartbeat: %+v (member epoch %d)", calls, r.MemberEpoch)
	}
	if r.Assignment == nil || len(r.Assignment.TopicPartitions) != 1 {
		t.Fatalf("first heartbeat's assignment %+v", r.Assignment)
	}
	st := h.shareState("g")
	if len(st.Initializing) != 0 || len(st.Initialized) != 1 || !slices.Equal(st.Initialized[0].Partitions, []int32{0, 1, 2}) {
		t.Fatalf("record 15 after the first heartbeat: %+v", st)
	}
	h.shareHeartbeat("g", "m1", r.MemberEpoch)
	if calls := fi.take(); len(calls) != 0 {
		t.Fatalf("a second heartbeat initialized again: %+v", calls)
	}

	// A partition more: initialized at the next heartbeat; its failure leaves it out.
	fi.fail[3] = true
	h.setTopics(2, map[string]int32{"a": 4, "b": 1})
	r = h.shareHeartbeat("g", "m1", r.MemberEpoch)
	if calls := fi.take(); len(calls) != 1 || !slices.Equal(calls[0].topics[0].Partitions, []int32{3}) {
		t.Fatalf("initializations after a partition was added: %+v", calls)
	}
	st = h.shareState("g")
	if len(st.Initializing) != 0 || !slices.Equal(st.Initialized[0].Partitions, []int32{0, 1, 2}) {
		t.Fatalf("record 15 after a failed initialization: %+v", st)
	}
	delete(fi.fail, 3)
	r = h.shareHeartbeat("g", "m1", r.MemberEpoch)
	if calls := fi.take(); len(calls) != 1 || !slices.Equal(calls[0].topics[0].Partitions, []int32{3}) {
		t.Fatalf("the failed partition was not initialized again: %+v", calls)
	}
	// A second topic by a second member.
	h.shareHeartbeat("g", "m2", 0, "b")
	if calls := fi.take(); len(calls) != 1 || calls[0].topics[0].TopicName != "b" {
		t.Fatalf("initializations for m2's topic: %+v", calls)
	}
	if _, code, ok := h.c.ShareStatePartitions("g"); ok || code != kerr.NonEmptyGroup.Code {
		t.Fatalf("ShareStatePartitions of a group with members: %v %d", ok, code)
	}

	// The record outlives a restart: nothing is initialized again.
	h.start(tweak)
	h.setTopics(3, map[string]int32{"a": 4, "b": 1})
	st = h.shareState("g")
	if len(st.Initialized) != 2 || !slices.Equal(st.Initialized[0].Partitions, []int32{0, 1, 2, 3}) {
		t.Fatalf("record 15 after a restart: %+v", st)
	}
	r = h.shareHeartbeat("g", "m1", 0, "a")
	if calls := fi.take(); len(calls) != 0 {
		t.Fatalf("a rejoin after the restart initialized again: %+v", calls)
	}
	h.shareHeartbeat("g", "m1", -1)
	h.shareHeartbeat("g", "m2", -1)
	topics, code, ok := h.c.ShareStatePartitions("g")
	if !ok || code != 0 || len(topics) != 2 {
		t.Fatalf("ShareStatePartitions of the empty group: %+v %d %v", topics, code, ok)
	}
	if _, code, ok := h.c.ShareStatePartitions("nope"); ok || code != kerr.GroupIDNotFound.Code {
		t.Fatalf("ShareStatePartitions of no group: %d", code)
	}
}
