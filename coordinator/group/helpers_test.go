package group

import (
	"errors"
	"io"
	"log/slog"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/engine"
)

// fakeClock fires timers only from Advance, in deadline order, on the caller's
// goroutine: tests of the state machine are deterministic.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	seq    int
	timers []*fakeTimer
}

type fakeTimer struct {
	c       *fakeClock
	at      time.Time
	seq     int
	f       func()
	stopped bool
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Unix(1_700_000_000, 0)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) AfterFunc(d time.Duration, f func()) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	t := &fakeTimer{c: c, at: c.now.Add(d), seq: c.seq, f: f}
	c.timers = append(c.timers, t)
	return t
}

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := !t.stopped
	t.stopped = true
	return was
}

// Advance moves time forward by d, firing every timer that falls due on the way
// (timers armed by fired timers included).
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	end := c.now.Add(d)
	c.mu.Unlock()
	for {
		c.mu.Lock()
		live := c.timers[:0]
		for _, t := range c.timers {
			if !t.stopped {
				live = append(live, t)
			}
		}
		c.timers = live
		sort.Slice(c.timers, func(i, j int) bool {
			if !c.timers[i].at.Equal(c.timers[j].at) {
				return c.timers[i].at.Before(c.timers[j].at)
			}
			return c.timers[i].seq < c.timers[j].seq
		})
		if len(c.timers) == 0 || c.timers[0].at.After(end) {
			c.now = end
			c.mu.Unlock()
			return
		}
		t := c.timers[0]
		c.timers = c.timers[1:]
		t.stopped = true
		if t.at.After(c.now) {
			c.now = t.at
		}
		c.mu.Unlock()
		t.f()
	}
}

// memLog is an in-memory Log (a test fixture). Appends complete at once unless hold
// is set, in which case they wait for release. failNext makes appends fail.
type memLog struct {
	mu       sync.Mutex
	parts    map[int32][]byte // record batches, as the engine would store them
	next     map[int32]int64
	hold     bool
	held     []func()
	failWith error
	appends  int
}

func newMemLog() *memLog { return &memLog{parts: map[int32][]byte{}, next: map[int32]int64{}} }

func (l *memLog) Append(p int32, recs []Record, done func(error)) {
	l.mu.Lock()
	l.appends++
	if err := l.failWith; err != nil {
		l.mu.Unlock()
		done(err)
		return
	}
	start := len(l.parts[p])
	b, err := engine.AppendRecords(l.parts[p], recs)
	if err != nil {
		l.mu.Unlock()
		done(err)
		return
	}
	l.parts[p] = b
	// stamp the base offset as a log would
	b = l.parts[p][start:]
	base := l.next[p]
	for i := 0; i < 8; i++ {
		b[i] = byte(uint64(base) >> (56 - 8*i))
	}
	l.next[p] += int64(len(recs))
	if l.hold {
		l.held = append(l.held, func() { done(nil) })
		l.mu.Unlock()
		return
	}
	l.mu.Unlock()
	done(nil)
}

func (l *memLog) release() {
	l.mu.Lock()
	held := l.held
	l.held = nil
	l.mu.Unlock()
	for _, f := range held {
		f()
	}
}

func (l *memLog) Replay(p int32, fn func(Record) error) error {
	l.mu.Lock()
	buf := append([]byte(nil), l.parts[p]...)
	l.mu.Unlock()
	return decodeBatches(buf, fn)
}

var errInjected = errors.New("injected append failure")

type harness struct {
	t     testing.TB
	clock *fakeClock
	log   *memLog
	c     *Coordinator
	ids   int
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func newHarness(t testing.TB, tweak func(*Config)) *harness {
	h := &harness{t: t, clock: newFakeClock(), log: newMemLog()}
	h.start(tweak)
	return h
}

// start (re)creates the coordinator over h.log and loads every partition.
func (h *harness) start(tweak func(*Config)) {
	cfg := Config{
		Clock:                 h.clock,
		Logger:                quietLogger(),
		InitialRebalanceDelay: 3 * time.Second,
		NewMemberID: func(prefix string) string {
			h.ids++
			return prefix + "-" + string(rune('a'+h.ids%26)) + itoa(h.ids)
		},
	}
	if tweak != nil {
		tweak(&cfg)
	}
	if h.c != nil {
		h.c.Close() // the partitions move: the old coordinator's timers must not write on
	}
	h.c = New(cfg, h.log)
	for p := int32(0); p < h.c.NumPartitions(); p++ {
		if err := h.c.LoadPartition(p); err != nil {
			h.t.Fatal(err)
		}
	}
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{byte('0' + i%10)}, b...)
	}
	return string(b)
}

// joinResult holds a join answer that may arrive later.
type joinResult struct {
	mu   sync.Mutex
	resp *kmsg.JoinGroupResponse
	n    int
}

func (j *joinResult) get() *kmsg.JoinGroupResponse {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.resp
}

func consumerMeta(topics ...string) []byte {
	m := kmsg.NewConsumerMemberMetadata()
	m.Topics = topics
	return m.AppendTo(nil)
}

type joinOpts struct {
	version   int16
	memberID  string
	instance  *string
	ptype     string
	protocols []kmsg.JoinGroupRequestProtocol
	session   time.Duration
	rebalance time.Duration
}

func (h *harness) join(group string, o joinOpts) *joinResult {
	req := kmsg.NewPtrJoinGroupRequest()
	req.Version = o.version
	if req.Version == 0 {
		req.Version = 9
	}
	req.Group = group
	req.MemberID = o.memberID
	req.InstanceID = o.instance
	req.ProtocolType = o.ptype
	if req.ProtocolType == "" {
		req.ProtocolType = "consumer"
	}
	req.Protocols = o.protocols
	if req.Protocols == nil {
		req.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: consumerMeta("t")}}
	}
	req.SessionTimeoutMillis = int32(o.session / time.Millisecond)
	if o.session == 0 {
		req.SessionTimeoutMillis = 10_000
	}
	req.RebalanceTimeoutMillis = int32(o.rebalance / time.Millisecond)
	if o.rebalance == 0 {
		req.RebalanceTimeoutMillis = 30_000
	}
	res := &joinResult{}
	h.c.JoinGroup(req, "client", "/127.0.0.1", func(r *kmsg.JoinGroupResponse) {
		res.mu.Lock()
		res.resp = r
		res.n++
		n := res.n
		res.mu.Unlock()
		if n > 1 {
			h.t.Errorf("join answered %d times", n)
		}
	})
	return res
}

// joinNew does the two-step v4+ join of a dynamic member: the first call gets
// MEMBER_ID_REQUIRED, the second parks.
func (h *harness) joinNew(group string, o joinOpts) *joinResult {
	h.t.Helper()
	first := h.join(group, o).get()
	if first == nil || first.ErrorCode != kerr.MemberIDRequired.Code {
		h.t.Fatalf("first join: %+v", first)
	}
	o.memberID = first.MemberID
	return h.join(group, o)
}

type syncResult struct {
	mu   sync.Mutex
	resp *kmsg.SyncGroupResponse
	n    int
	ch   chan struct{}
}

// wait returns the answer, waiting up to 10 s for a Log that completes later.
func (s *syncResult) wait() *kmsg.SyncGroupResponse {
	select {
	case <-s.ch:
	case <-time.After(10 * time.Second):
	}
	return s.get()
}

func (s *syncResult) get() *kmsg.SyncGroupResponse {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.resp
}

func (h *harness) sync(group, member string, gen int32, instance *string, assign map[string][]byte) *syncResult {
	req := kmsg.NewPtrSyncGroupRequest()
	req.Version = 5
	req.Group, req.MemberID, req.Generation, req.InstanceID = group, member, gen, instance
	for id, a := range assign {
		req.GroupAssignment = append(req.GroupAssignment, kmsg.SyncGroupRequestGroupAssignment{MemberID: id, MemberAssignment: a})
	}
	res := &syncResult{ch: make(chan struct{})}
	h.c.SyncGroup(req, func(r *kmsg.SyncGroupResponse) {
		res.mu.Lock()
		res.resp = r
		res.n++
		n := res.n
		res.mu.Unlock()
		if n == 1 {
			close(res.ch)
		}
		if n > 1 {
			h.t.Errorf("sync answered %d times", n)
		}
	})
	return res
}

func (h *harness) heartbeat(group, member string, gen int32, instance *string) int16 {
	req := kmsg.NewPtrHeartbeatRequest()
	req.Version = 4
	req.Group, req.MemberID, req.Generation, req.InstanceID = group, member, gen, instance
	return h.c.Heartbeat(req).ErrorCode
}

func (h *harness) commit(group, member string, gen int32, topic string, part int32, offset int64, md string) int16 {
	h.t.Helper()
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version = 8
	req.Group, req.MemberID, req.Generation = group, member, gen
	req.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: topic, Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: part, Offset: offset, LeaderEpoch: 7, Metadata: &md}}}}
	ch := make(chan *kmsg.OffsetCommitResponse, 1)
	h.c.OffsetCommit(req, func(r *kmsg.OffsetCommitResponse) { ch <- r })
	select {
	case got := <-ch:
		return got.Topics[0].Partitions[0].ErrorCode
	case <-time.After(10 * time.Second):
		h.t.Fatal("commit not answered")
		return -1
	}
}

func (h *harness) fetch(group, topic string, part int32) kmsg.OffsetFetchResponseGroupTopicPartition {
	h.t.Helper()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version = 8
	req.Groups = []kmsg.OffsetFetchRequestGroup{{Group: group, Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: topic, Partitions: []int32{part}}}}}
	r := h.c.OffsetFetch(req)
	if r.Groups[0].ErrorCode != 0 {
		h.t.Fatalf("fetch error %d", r.Groups[0].ErrorCode)
	}
	return r.Groups[0].Topics[0].Partitions[0]
}

func (h *harness) describe(group string) kmsg.DescribeGroupsResponseGroup {
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Version = 5
	req.Groups = []string{group}
	return h.c.DescribeGroups(req).Groups[0]
}

// stableGroup brings n dynamic members to Stable, the leader assigning "a-<i>".
func (h *harness) stableGroup(group string, n int) (ids []string, gen int32) {
	h.t.Helper()
	var res []*joinResult
	for i := 0; i < n; i++ {
		res = append(res, h.joinNew(group, joinOpts{}))
	}
	h.settle(res...)
	var leader string
	for _, r := range res {
		j := r.get()
		if j == nil || j.ErrorCode != 0 {
			h.t.Fatalf("join: %+v", j)
		}
		ids = append(ids, j.MemberID)
		gen, leader = j.Generation, j.LeaderID
	}
	assign := map[string][]byte{}
	for i, id := range ids {
		assign[id] = []byte("a-" + itoa(i))
	}
	var syncs []*syncResult
	for _, id := range ids {
		a := map[string][]byte(nil)
		if id == leader {
			a = assign
		}
		syncs = append(syncs, h.sync(group, id, gen, nil, a))
	}
	for i, s := range syncs {
		r := s.wait()
		if r == nil || r.ErrorCode != 0 || string(r.MemberAssignment) != string(assign[ids[i]]) {
			h.t.Fatalf("sync %d: %+v", i, r)
		}
	}
	return ids, gen
}

// settle advances the clock a second at a time until every join is answered.
func (h *harness) settle(res ...*joinResult) {
	h.t.Helper()
	for i := 0; i < 120; i++ {
		done := true
		for _, r := range res {
			if r.get() == nil {
				done = false
			}
		}
		if done {
			return
		}
		h.clock.Advance(time.Second)
	}
	h.t.Fatal("joins not answered within 120 s of fake time")
}

func strp(s string) *string { return &s }
