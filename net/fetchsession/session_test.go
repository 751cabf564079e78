package fetchsession

import (
	"math"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/metadata"
	"github.com/samsa-broker/samsa/engine"
)

type tp struct {
	topic     string
	partition int32
	offset    int64
}

// request is a consumer's Fetch of version v in session id at epoch, naming parts
// and forgetting forget.
func request(v int16, id, epoch int32, parts, forget []tp) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(v)
	req.ReplicaID, req.ReplicaState.ID = -1, -1
	req.SessionID, req.SessionEpoch = id, epoch
	for _, p := range parts {
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = p.topic, idOf(p.topic)
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p.partition, p.offset, 1<<20
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
	}
	for _, p := range forget {
		f := kmsg.NewFetchRequestForgottenTopic()
		f.Topic, f.TopicID, f.Partitions = p.topic, idOf(p.topic), []int32{p.partition}
		req.ForgottenTopics = append(req.ForgottenTopics, f)
	}
	return req
}

func idOf(topic string) [16]byte {
	var id [16]byte
	copy(id[:], topic)
	return id
}

// served is what a request of s serves: its parts' fetches, in order.
func served(s *Session, quiet bool, im *metadata.Image, now time.Time) []Fetch {
	var out []Fetch
	s.Collect(quiet, im, now, func(_ *Part, f Fetch) { out = append(out, f) })
	return out
}

func partsOf(s *Session) []*Part {
	var out []*Part
	s.Collect(false, nil, time.Time{}, func(p *Part, _ Fetch) { out = append(out, p) })
	return out
}

// TestSessionOpen: the SessionID/SessionEpoch table of the package doc, and the errors.
func TestSessionOpen(t *testing.T) {
	c := NewCache(10, time.Hour)
	now := time.Unix(1000, 0)
	a0, a1, b0 := tp{"a", 0, 5}, tp{"a", 1, 7}, tp{"b", 0, 9}
	for _, v := range []int16{4, 6} {
		if s, full, err := c.Open(request(v, 0, 0, []tp{a0}, nil), v, now); s != nil || !full || err != nil {
			t.Fatalf("v%d: a session: %v %v %v", v, s, full, err)
		}
	}
	if s, full, err := c.Open(request(12, 0, -1, []tp{a0}, nil), 12, now); s != nil || !full || err != nil {
		t.Fatalf("sessionless: %v %v %v", s, full, err)
	}
	s, full, err := c.Open(request(12, 0, 0, []tp{a0, a1}, nil), 12, now)
	if s == nil || !full || err != nil || s.ID() == 0 || s.ReplicaID() != -1 || c.Len() != 1 {
		t.Fatalf("open: %v %v %v", s, full, err)
	}
	id := s.ID()
	// Incremental: a1's offset moves, b0 joins, a0 is forgotten.
	a1.offset = 8
	if s2, full, err := c.Open(request(12, id, 1, []tp{a1, b0}, []tp{a0}), 12, now); s2 != s || full || err != nil {
		t.Fatalf("incremental: %v %v %v", s2, full, err)
	}
	if got := served(s, false, nil, now); len(got) != 2 || got[0].Topic != "a" || got[0].Partition != 1 || got[0].Offset != 8 ||
		got[1].Topic != "b" || got[1].Offset != 9 || got[1].MaxBytes != 1<<20 {
		t.Fatalf("after the incremental request: %+v", got)
	}
	for _, c2 := range []struct {
		name      string
		v         int16
		id, epoch int32
		want      *kerr.Error
	}{
		{"the epoch again", 12, id, 1, kerr.InvalidFetchSessionEpoch},
		{"an epoch ahead", 12, id, 3, kerr.InvalidFetchSessionEpoch},
		{"another id", 12, id + 1, 2, kerr.FetchSessionIDNotFound},
		{"topic ids in a session of names", 13, id, 2, kerr.FetchSessionTopicIDError},
	} {
		if s2, _, err := c.Open(request(c2.v, c2.id, c2.epoch, nil, nil), c2.v, now); s2 != nil || err != c2.want {
			t.Errorf("%s: %v %v, want %v", c2.name, s2, err, c2.want)
		}
	}
	// The epoch wraps from MaxInt32 to 1.
	s.epoch = math.MaxInt32
	if _, _, err := c.Open(request(12, id, math.MaxInt32, nil, nil), 12, now); err != nil || s.epoch != 1 {
		t.Fatalf("wrap: %v, epoch %d", err, s.epoch)
	}
	// Epoch -1 closes it.
	if s2, full, err := c.Open(request(12, id, -1, []tp{a0}, nil), 12, now); s2 != nil || !full || err != nil || c.Len() != 0 {
		t.Fatalf("close: %v %v %v, %d sessions", s2, full, err, c.Len())
	}
	if _, _, err := c.Open(request(12, id, 2, nil, nil), 12, now); err != kerr.FetchSessionIDNotFound {
		t.Fatalf("a closed session: %v", err)
	}
	// v13+ keys by topic id: the session's fetches carry the id, not the name.
	s, _, _ = c.Open(request(13, 0, 0, []tp{a0}, nil), 13, now)
	if got := served(s, false, nil, now); len(got) != 1 || got[0].Topic != "" || got[0].ID != idOf("a") {
		t.Fatalf("v13: %+v", got)
	}
	if err := c.Check(); err != nil {
		t.Fatal(err)
	}
	// A cache of size 0 keeps none.
	if s, full, err := NewCache(0, time.Hour).Open(request(12, 0, 0, []tp{a0}, nil), 12, now); s != nil || !full || err != nil {
		t.Fatalf("no cache: %v %v %v", s, full, err)
	}
}

// TestSessionEviction: a full cache evicts the least recently used session.
func TestSessionEviction(t *testing.T) {
	c := NewCache(2, time.Hour)
	t0 := time.Unix(1000, 0)
	s1, _, _ := c.Open(request(12, 0, 0, nil, nil), 12, t0)
	s2, _, _ := c.Open(request(12, 0, 0, nil, nil), 12, t0.Add(time.Second))
	if _, _, err := c.Open(request(12, s1.ID(), 1, nil, nil), 12, t0.Add(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	s3, _, _ := c.Open(request(12, 0, 0, nil, nil), 12, t0.Add(3*time.Second))
	if c.Len() != 2 || c.get(s2.ID()) != nil || c.get(s1.ID()) != s1 || c.get(s3.ID()) != s3 {
		t.Fatalf("%d sessions; s2 (least recently used) kept: %v", c.Len(), c.get(s2.ID()) != nil)
	}
}

// TestSessionCarry: what an incremental answer carries, and what the session
// remembers.
func TestSessionCarry(t *testing.T) {
	c := NewCache(1, time.Hour)
	s, _, _ := c.Open(request(12, 0, 0, []tp{{"a", 0, 0}, {"a", 1, 0}}, nil), 12, time.Now())
	p := partsOf(s)
	st := Sent{10, 10, 0}
	s.Lock()
	defer s.Unlock()
	if carry, live := p[0].CarryLocked(false, st); !carry || !live {
		t.Fatalf("first answer: carry %v live %v", carry, live)
	}
	if carry, _ := p[0].CarryLocked(false, st); carry {
		t.Fatal("nothing changed, yet carried")
	}
	if carry, _ := p[0].CarryLocked(true, st); !carry {
		t.Fatal("must, yet not carried")
	}
	if carry, _ := p[0].CarryLocked(false, Sent{11, 10, 0}); !carry {
		t.Fatal("a moved HW not carried")
	}
	s.forgetLocked(Key{Topic: "a", Partition: 1})
	if carry, live := p[1].CarryLocked(false, st); !carry || live {
		t.Fatalf("forgotten: carry %v live %v", carry, live)
	}
	if p[1].sent != (Sent{-1, -1, -1}) {
		t.Fatalf("a forgotten part remembered %+v", p[1].sent)
	}
}

// parked counts the completions of a parked long poll.
type parked struct{ n int }

func (p *parked) ForceComplete() bool { p.n++; return true }

// TestSessionConsumerQuiet: a consumer's idle partition goes quiet and leaves the
// requests; only a moved HW wakes it (completing the parked long poll); a new image,
// the rescan and the session's end wake it too.
func TestSessionConsumerQuiet(t *testing.T) {
	eng, err := engine.Open(engine.Options{Dirs: []string{t.TempDir()}, Sync: engine.SyncNone})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	var logs []*engine.Log
	for p := range int32(2) {
		l, err := eng.CreateLog(engine.TopicPartition{Topic: "a", Partition: p}, engine.DefaultLogConfig())
		if err != nil {
			t.Fatal(err)
		}
		logs = append(logs, l)
	}
	c := NewCache(10, time.Minute)
	now := time.Unix(1000, 0)
	im := &metadata.Image{}
	s, _, _ := c.Open(request(12, 0, 0, []tp{{"a", 0, 0}, {"a", 1, 0}}, nil), 12, now)
	// quiet has the parts which answered with nothing at offset, or (-1) at their
	// fetch offsets.
	quietAt := func(offset int64, which ...int) {
		t.Helper()
		var parts []*Part
		var fetches []Fetch
		s.Collect(false, nil, now, func(p *Part, f Fetch) { parts, fetches = append(parts, p), append(fetches, f) })
		var idle []Idle
		for _, i := range which {
			o := offset
			if o < 0 {
				o = fetches[i].Offset
			}
			idle = append(idle, Idle{Part: parts[i], Log: logs[i], Offset: o})
		}
		s.Quiet(idle)
		if err := c.Check(); err != nil {
			t.Fatal(err)
		}
	}
	quiet := func(which ...int) { t.Helper(); quietAt(-1, which...) }
	expect := func(what string, want int) {
		t.Helper()
		if got := served(s, true, im, now); len(got) != want {
			t.Fatalf("%s: %d served, want %d", what, len(got), want)
		}
		if err := c.Check(); err != nil {
			t.Fatal(err)
		}
	}
	expect("before any answer", 2)
	quiet(0, 1)
	if f, cons := c.QuietParts(); f != 0 || cons != 2 || !s.HasQuiet() {
		t.Fatalf("quiet: %d followers', %d consumers' listed", f, cons)
	}
	expect("both quiet", 0)

	op := &parked{}
	s.Park(op)
	c.Wake(logs[1], false) // an append the HW has not passed
	if op.n != 0 || s.Woken() {
		t.Fatal("an append woke a consumer's partition")
	}
	c.Wake(logs[1], true)
	if op.n != 1 || !s.Woken() {
		t.Fatalf("a moved HW: parked fetch completed %d times, woken %v", op.n, s.Woken())
	}
	s.Unpark(op)
	if got := served(s, true, im, now); len(got) != 1 || got[0].Partition != 1 || s.Woken() {
		t.Fatalf("after the wake: %+v, woken %v", got, s.Woken())
	}
	// A request naming a quiet partition serves it.
	if _, _, err := c.Open(request(12, s.ID(), 1, []tp{{"a", 0, 3}}, nil), 12, now); err != nil {
		t.Fatal(err)
	}
	expect("named", 2)

	quiet(0, 1)
	expect("quiet again", 0)
	im = &metadata.Image{}
	expect("another image", 2)
	if s.HasQuiet() {
		t.Fatal("quiet partitions left after the image changed")
	}
	// A part whose fetch offset is not the one answered stays awake.
	quiet(1)
	quietAt(99, 0)
	expect("one stays awake", 1)
	now = now.Add(time.Minute)
	expect("the rescan", 2)

	quiet(1)
	c.Remove(s.ID())
	if f, cons := c.QuietParts(); f != 0 || cons != 0 {
		t.Fatalf("after the session went: %d, %d listed", f, cons)
	}
	s, _, _ = c.Open(request(12, 0, 0, []tp{{"a", 0, 0}}, nil), 12, now)
	quiet(0)
	c.Clear()
	if f, cons := c.QuietParts(); f != 0 || cons != 0 || c.Len() != 0 {
		t.Fatalf("after Clear: %d, %d listed, %d sessions", f, cons, c.Len())
	}
}
