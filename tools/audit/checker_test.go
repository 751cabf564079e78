package audit

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// ev is one event of a constructed stream. Sends give sequence numbers in order per
// (producer, partition), as the checker does; the other events name them.
type ev struct {
	at   time.Duration
	op   string // send, ack, fail, txn, read, tick, stop, finish
	prod Producer
	p    int32
	seq  int64
	off  int64
	r    Reader
	o    Outcome
	seqs []int64 // txn: the transactional sequences of partition p
}

const (
	I  = Idempotent
	T  = Transactional
	G  = GroupReader
	RC = CommittedReader
)

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

func send(at time.Duration, prod Producer, p int32) ev {
	return ev{at: at, op: "send", prod: prod, p: p}
}
func ack(at time.Duration, prod Producer, p int32, seq, off int64) ev {
	return ev{at: at, op: "ack", prod: prod, p: p, seq: seq, off: off}
}
func fail(at time.Duration, prod Producer, p int32, seq int64) ev {
	return ev{at: at, op: "fail", prod: prod, p: p, seq: seq}
}
func txn(at time.Duration, o Outcome, p int32, seqs ...int64) ev {
	return ev{at: at, op: "txn", o: o, p: p, seqs: seqs}
}
func read(at time.Duration, r Reader, prod Producer, p int32, seq, off int64) ev {
	return ev{at: at, op: "read", r: r, prod: prod, p: p, seq: seq, off: off}
}
func tick(at time.Duration) ev   { return ev{at: at, op: "tick"} }
func finish(at time.Duration) ev { return ev{at: at, op: "finish"} }

// sendAck sends n idempotent records to p at 1 ms intervals from at, acknowledged
// 1 ms later at offsets from off.
func sendAck(at time.Duration, p int32, first, n, off int64) []ev {
	var out []ev
	for i := range n {
		t := at + time.Duration(i)*time.Millisecond
		out = append(out, send(t, I, p), ack(t+time.Millisecond, I, p, first+i, off+i))
	}
	return out
}

// readAll reads idempotent records first..first+n-1 at offsets from off by r.
func readAll(at time.Duration, r Reader, p int32, first, n, off int64) []ev {
	var out []ev
	for i := range n {
		out = append(out, read(at, r, I, p, first+i, off+i))
	}
	return out
}

func cat(parts ...any) []ev {
	var out []ev
	for _, x := range parts {
		switch v := x.(type) {
		case ev:
			out = append(out, v)
		case []ev:
			out = append(out, v...)
		default:
			panic(fmt.Sprintf("cat: %T", x))
		}
	}
	return out
}

// replay feeds evs to c in time order (events at one time in the order given) and
// returns the report at the last one.
func replay(t *testing.T, c *Checker, evs []ev) Report {
	t.Helper()
	evs = slices.Clone(evs)
	slices.SortStableFunc(evs, func(a, b ev) int { return cmp.Compare(a.at, b.at) })
	var now time.Duration
	for i, e := range evs {
		if e.at < now {
			t.Fatalf("event %d (%s) at %v goes back from %v", i, e.op, e.at, now)
		}
		now = e.at
		switch e.op {
		case "send":
			c.Send(e.prod, e.p, now)
		case "ack":
			c.Acked(ID{e.prod, e.p, e.seq}, e.off, now)
		case "fail":
			c.Failed(ID{e.prod, e.p, e.seq}, now)
		case "txn":
			var ids []ID
			for _, s := range e.seqs {
				ids = append(ids, ID{T, e.p, s})
			}
			c.TxnEnded(ids, e.o, now)
		case "read":
			c.Read(e.r, ID{e.prod, e.p, e.seq}, e.off, now)
		case "tick":
			c.Tick(now)
		case "stop":
			c.StopProducing(now)
		case "finish":
			c.Finish(now)
		default:
			t.Fatalf("event %d: unknown op %q", i, e.op)
		}
	}
	return c.Report(now)
}

// TestCheckerAnomalies: each anomaly kind from a constructed stream, and the streams
// that must not raise one.
func TestCheckerAnomalies(t *testing.T) {
	const h = 10 * time.Second
	after := h + time.Second
	for _, tc := range []struct {
		name   string
		evs    []ev
		counts map[string]int64 // kinds not named: 0
		unseen int64
		final  bool
	}{
		{
			name: "clean",
			evs: cat(sendAck(0, 0, 1, 3, 0), sendAck(0, 1, 1, 3, 0),
				readAll(ms(10), G, 0, 1, 3, 0), readAll(ms(10), RC, 0, 1, 3, 0),
				readAll(ms(10), G, 1, 1, 3, 0), readAll(ms(10), RC, 1, 1, 3, 0),
				tick(after), finish(after)),
			final: true,
		},
		{
			name: "lost: the group skipped an offset and read past it",
			evs: cat(sendAck(0, 0, 1, 3, 0),
				read(ms(10), G, I, 0, 1, 0), read(ms(10), G, I, 0, 3, 2),
				readAll(ms(10), RC, 0, 1, 3, 0),
				tick(ms(20)), // within the horizon: nothing yet
				tick(after)),
			counts: map[string]int64{KLost: 1},
		},
		{
			name: "lost once though both readers passed it",
			evs: cat(sendAck(0, 0, 1, 3, 0),
				read(ms(10), G, I, 0, 1, 0), read(ms(10), G, I, 0, 3, 2),
				read(ms(10), RC, I, 0, 1, 0), read(ms(10), RC, I, 0, 3, 2),
				tick(after), tick(after+time.Second)),
			counts: map[string]int64{KLost: 1},
		},
		{
			name:   "unseen: nothing read past it within the horizon",
			evs:    cat(sendAck(0, 0, 1, 2, 0), readAll(ms(10), G, 0, 1, 2, 0), tick(after)),
			unseen: 2, // read_committed returned nothing
		},
		{
			name: "unseen, then read: no longer unseen, no anomaly",
			evs: cat(sendAck(0, 0, 1, 2, 0), readAll(ms(10), G, 0, 1, 2, 0), tick(after),
				readAll(after+time.Second, RC, 0, 1, 2, 0), tick(after+2*time.Second)),
		},
		{
			name: "at the end: owed and passed is lost, owed and not passed unseen",
			evs: cat(sendAck(0, 0, 1, 3, 0), sendAck(0, 1, 1, 1, 0),
				read(ms(10), G, I, 0, 1, 0), read(ms(10), G, I, 0, 3, 2), readAll(ms(10), RC, 0, 1, 3, 0),
				readAll(ms(10), G, 1, 1, 1, 0), // p1 never returned to read_committed
				finish(ms(20))),
			counts: map[string]int64{KLost: 1},
			unseen: 1,
			final:  true,
		},
		{
			name: "duplicated: one record at a second, later offset; both readers see it, counted once",
			evs: cat(sendAck(0, 0, 1, 3, 0),
				readAll(ms(10), G, 0, 1, 3, 0), read(ms(11), G, I, 0, 2, 3),
				readAll(ms(10), RC, 0, 1, 3, 0), read(ms(12), RC, I, 0, 2, 3),
				finish(ms(20))),
			counts: map[string]int64{KDuplicated: 1},
			final:  true,
		},
		{
			name: "duplicated, and the copy read again after the group rewinds: counted once",
			evs: cat(sendAck(0, 0, 1, 3, 0),
				readAll(ms(10), G, 0, 1, 3, 0), read(ms(11), G, I, 0, 1, 3),
				readAll(ms(12), G, 0, 1, 3, 0), read(ms(13), G, I, 0, 1, 3), // rewound to 0
				readAll(ms(10), RC, 0, 1, 3, 0), read(ms(14), RC, I, 0, 1, 3),
				finish(ms(20))),
			counts: map[string]int64{KDuplicated: 1},
			final:  true,
		},
		{
			name: "duplicated: read before its acknowledgement at another offset",
			evs: cat(send(0, I, 0), read(ms(1), G, I, 0, 1, 5), ack(ms(2), I, 0, 1, 4),
				read(ms(3), RC, I, 0, 1, 4)),
			counts: map[string]int64{KDuplicated: 1},
		},
		{
			name: "duplicated long after: the stream moved on more than a horizon",
			evs: cat(sendAck(0, 0, 1, 2, 0), readAll(ms(10), G, 0, 1, 2, 0), readAll(ms(10), RC, 0, 1, 2, 0),
				tick(after), // both resolved and older than the horizon: out of the window
				read(after+time.Second, G, I, 0, 1, 7)),
			counts: map[string]int64{KDuplicated: 1},
		},
		{
			name: "a re-read after the group rewinds is no anomaly",
			evs: cat(sendAck(0, 0, 1, 4, 0), readAll(ms(10), G, 0, 1, 4, 0),
				readAll(ms(20), G, 0, 2, 3, 1), // rebalance: back to the committed offset 1
				readAll(ms(10)+ms(20), RC, 0, 1, 4, 0), finish(ms(40))),
			final: true,
		},
		{
			name: "reordered: a producer's sequence goes backwards in the log",
			evs: cat(send(0, I, 0), send(ms(1), I, 0),
				ack(ms(2), I, 0, 2, 0), ack(ms(2), I, 0, 1, 1), // i/2 appended before i/1
				read(ms(3), G, I, 0, 2, 0), read(ms(3), G, I, 0, 1, 1),
				read(ms(3), RC, I, 0, 2, 0), read(ms(3), RC, I, 0, 1, 1),
				finish(ms(4))),
			counts: map[string]int64{KReordered: 1},
			final:  true,
		},
		{
			name: "two producers interleaved in a partition are in order",
			evs: cat(send(0, I, 0), send(0, T, 0), send(ms(1), I, 0), send(ms(1), T, 0),
				ack(ms(2), T, 0, 1, 0), ack(ms(2), I, 0, 1, 1), ack(ms(2), I, 0, 2, 2), ack(ms(2), T, 0, 2, 3),
				txn(ms(3), Committed, 0, 1, 2),
				read(ms(4), G, T, 0, 1, 0), read(ms(4), G, I, 0, 1, 1), read(ms(4), G, I, 0, 2, 2), read(ms(4), G, T, 0, 2, 3),
				read(ms(4), RC, T, 0, 1, 0), read(ms(4), RC, I, 0, 1, 1), read(ms(4), RC, I, 0, 2, 2), read(ms(4), RC, T, 0, 2, 3),
				finish(ms(5))),
			final: true,
		},
		{
			name: "aborted-read: read_committed returns an aborted record; the group may",
			evs: cat(send(0, T, 0), ack(ms(1), T, 0, 1, 0), txn(ms(2), Aborted, 0, 1),
				sendAck(ms(3), 0, 1, 1, 2),
				read(ms(5), G, T, 0, 1, 0), read(ms(5), G, I, 0, 1, 2),
				read(ms(5), RC, T, 0, 1, 0), read(ms(5), RC, I, 0, 1, 2),
				finish(ms(6))),
			counts: map[string]int64{KAbortedRead: 1},
			final:  true,
		},
		{
			name: "aborted-read: returned before the abort was answered",
			evs: cat(send(0, T, 0), ack(ms(1), T, 0, 1, 0), read(ms(2), RC, T, 0, 1, 0), read(ms(2), G, T, 0, 1, 0),
				txn(ms(3), Aborted, 0, 1)),
			counts: map[string]int64{KAbortedRead: 1},
		},
		{
			name: "an aborted record skipped by read_committed is no anomaly; a committed one is owed",
			evs: cat(send(0, T, 0), ack(ms(1), T, 0, 1, 0), txn(ms(2), Aborted, 0, 1),
				send(ms(3), T, 0), ack(ms(4), T, 0, 2, 2), txn(ms(5), Committed, 0, 2),
				read(ms(6), G, T, 0, 1, 0), read(ms(6), G, T, 0, 2, 2), read(ms(6), RC, T, 0, 2, 2),
				finish(ms(7))),
			final: true,
		},
		{
			name: "a committed record read_committed never returns, though it read past it",
			evs: cat(send(0, T, 0), ack(ms(1), T, 0, 1, 0), txn(ms(2), Committed, 0, 1), sendAck(ms(3), 0, 1, 1, 2),
				read(ms(6), G, T, 0, 1, 0), readAll(ms(6), G, 0, 1, 1, 2), readAll(ms(6), RC, 0, 1, 1, 2),
				tick(after), tick(2*after)),
			counts: map[string]int64{KLost: 1},
		},
		{
			name: "an unknown outcome is owed to no read_committed reader",
			evs: cat(send(0, T, 0), ack(ms(1), T, 0, 1, 0), txn(ms(2), Unknown, 0, 1),
				read(ms(3), G, T, 0, 1, 0), finish(ms(4))),
			final: true,
		},
		{
			name: "a failed produce is owed to nobody; reading it is no anomaly",
			evs: cat(send(0, I, 0), send(0, I, 0), fail(ms(1), I, 0, 1), ack(ms(1), I, 0, 2, 1),
				read(ms(2), G, I, 0, 1, 0), read(ms(2), G, I, 0, 2, 1), read(ms(2), RC, I, 0, 2, 1),
				finish(ms(3))),
			final: true,
		},
		{
			name:   "phantom: a sequence never sent",
			evs:    cat(sendAck(0, 0, 1, 2, 0), read(ms(5), G, I, 0, 9, 2), read(ms(5), RC, I, 0, 9, 2)),
			counts: map[string]int64{KPhantom: 1},
		},
		{
			name:   "phantom: a partition the run does not write",
			evs:    cat(read(ms(5), G, I, 7, 1, 0)),
			counts: map[string]int64{KPhantom: 1},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewChecker([]int32{0, 1}, Options{Horizon: h})
			r := replay(t, c, tc.evs)
			for _, k := range Kinds {
				if got := r.Counts[k]; got != tc.counts[k] {
					t.Errorf("%s: %d, want %d", k, got, tc.counts[k])
				}
			}
			if r.Unseen != tc.unseen {
				t.Errorf("unseen: %d, want %d", r.Unseen, tc.unseen)
			}
			if r.Final != tc.final {
				t.Errorf("final %v, want %v", r.Final, tc.final)
			}
			if want := tc.unseen == 0 && len(tc.counts) == 0; r.Valid() != want {
				t.Errorf("valid %v, want %v: %s", r.Valid(), want, r.Verdict())
			}
			for _, a := range r.Anomalies {
				if a.Detail == "" || a.Value == "" {
					t.Errorf("anomaly without its record or detail: %+v", a)
				}
			}
			if t.Failed() {
				for _, a := range r.Anomalies {
					t.Log(AnomalyLine(a))
				}
			}
		})
	}
}

// TestCheckerBoundedMemory: a million records read in order keep the window at what
// the horizon holds, and leave no anomaly.
func TestCheckerBoundedMemory(t *testing.T) {
	const (
		n       = 1_000_000
		parts   = 4
		rate    = 1000 // records per second, all partitions
		horizon = 5 * time.Second
	)
	c := NewChecker([]int32{0, 1, 2, 3}, Options{Horizon: horizon})
	var offs [parts]int64
	maxWindow := 0
	var now time.Duration
	for i := range n {
		now = time.Duration(i) * time.Second / rate
		p := int32(i % parts)
		id := c.Send(Idempotent, p, now)
		c.Acked(id, offs[p], now+time.Millisecond)
		c.Read(GroupReader, id, offs[p], now+2*time.Millisecond)
		c.Read(CommittedReader, id, offs[p], now+3*time.Millisecond)
		offs[p]++
		if i%rate == rate-1 {
			c.Tick(now + 3*time.Millisecond)
			maxWindow = max(maxWindow, c.Window())
		}
	}
	c.Finish(now + time.Second)
	r := c.Report(now + time.Second)
	// The horizon holds rate × horizon records, plus a second between ticks.
	if limit := rate * int(horizon/time.Second+2); maxWindow > limit {
		t.Fatalf("window grew to %d records, want at most %d", maxWindow, limit)
	}
	if !r.Valid() || r.Acked[Idempotent] != n || r.Read[GroupReader] != n || r.Read[CommittedReader] != n {
		t.Fatalf("%s", r.Verdict())
	}
	if l := r.Latency[GroupReader]; l.N != n || l.P99 < 2*time.Millisecond || l.P99 > 2*time.Millisecond+20*time.Microsecond {
		t.Fatalf("group latency %+v, want %d reads at 2ms", r.Latency[GroupReader], n)
	}
	t.Logf("window at most %d records; %s", maxWindow, r.Verdict())
}

// TestCheckerWindowCap: a reader that never reads cannot make the window grow past
// MaxWindow per stream; what is pushed out stays unseen.
func TestCheckerWindowCap(t *testing.T) {
	c := NewChecker([]int32{0}, Options{Horizon: time.Second, MaxWindow: 100})
	var now time.Duration
	for i := range 1000 {
		now = time.Duration(i) * time.Millisecond
		id := c.Send(Idempotent, 0, now)
		c.Acked(id, int64(i), now)
		c.Read(GroupReader, id, int64(i), now)
	}
	c.Tick(now)
	if w := c.Window(); w > 100 {
		t.Fatalf("window %d, want at most 100", w)
	}
	c.Finish(now)
	if r := c.Report(now); r.Unseen != 1000 || r.Valid() {
		t.Fatalf("unseen %d, want 1000 (900 pushed out, 100 left): %s", r.Unseen, r.Verdict())
	}
}

// TestNoAck: the longest time without an acknowledgement per partition, from the start
// to the end of production.
func TestNoAck(t *testing.T) {
	c := NewChecker([]int32{0, 1}, Options{})
	replay(t, c, cat(send(0, I, 0), send(0, I, 1), ack(ms(100), I, 0, 1, 0), ack(ms(300), I, 1, 1, 0),
		send(ms(400), I, 0), ack(ms(1600), I, 0, 2, 1)))
	r := c.Report(ms(1700))
	if r.NoAck[0].Longest != ms(1500) || r.NoAck[1].Longest != ms(1400) || r.NoAck[1].Current != ms(1400) {
		t.Fatalf("no-ack %+v", r.NoAck)
	}
	c.StopProducing(ms(2000))
	r = c.Report(ms(9000)) // stopped: the windows no longer grow
	if r.NoAck[1].Longest != ms(1700) || r.NoAck[1].Current != 0 {
		t.Fatalf("after the stop: no-ack %+v", r.NoAck)
	}
	if na, _ := r.LongestNoAck(); na.P != 1 {
		t.Fatalf("longest no-ack in p%d, want p1", na.P)
	}
	c = NewChecker([]int32{0}, Options{})
	c.StartProducing(ms(5000)) // the readers took 5 s to start: not counted
	replay(t, c, cat(send(ms(5000), I, 0), ack(ms(5200), I, 0, 1, 0)))
	if r := c.Report(ms(5300)); r.NoAck[0].Longest != ms(200) {
		t.Fatalf("after a late start: no-ack %+v", r.NoAck)
	}
}

func TestVerdict(t *testing.T) {
	c := NewChecker([]int32{0, 1, 2}, Options{Horizon: time.Second})
	r := replay(t, c, cat(sendAck(0, 2, 1, 2, 0), readAll(ms(10), G, 2, 1, 2, 0), readAll(ms(10), RC, 2, 1, 2, 0),
		read(ms(12), G, I, 2, 1, 5), finish(ms(1500))))
	got := r.Verdict()
	for _, want := range []string{
		"audit: ANOMALIES (duplicated 1) over 1.5s: ",
		"2 produced, 2 acknowledged, 0 failed, 3 read by the group, 2 read read_committed;",
		"lost 0, duplicated 1, reordered 0, aborted-read 0, phantom 0, unseen 0;",
		"e2e p50 9.0ms p99 10.0ms max 10.0ms (read_committed p99 10.0ms)",
		"longest no-ack 1.5s (p0)",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("verdict has no %q:\n%s", want, got)
		}
	}
	c2 := NewChecker([]int32{0}, Options{})
	r2 := c2.Report(time.Minute)
	if v := r2.Verdict(); !strings.HasPrefix(v, "audit: VALID (no anomalies) in the first 1m0s: 0 produced") {
		t.Errorf("empty verdict: %s", v)
	}
	if l := AnomalyLine(r.Anomalies[0]); !strings.HasPrefix(l, "audit: duplicated: p2@5 i/1 (idempotent producer) at 12ms: ") {
		t.Errorf("anomaly line: %s", l)
	}
}

func TestValueRoundTrip(t *testing.T) {
	v := Value{Run: "5f3a9c1e", Producer: Transactional, Seq: 17, Sent: 1765100000123456789}
	b := AppendValue(nil, v)
	if string(b) != "samsa-audit/1 5f3a9c1e t 17 1765100000123456789" {
		t.Fatalf("encoded %q", b)
	}
	got, err := DecodeValue(b)
	if err != nil || got != v {
		t.Fatalf("decoded %+v, %v", got, err)
	}
	for _, bad := range []string{"", "hello", "samsa-audit/1 ", "samsa-audit/1 r x 1 2", "samsa-audit/1 r i 0 2", "samsa-audit/1 r i 1", "samsa-audit/1 r i 1 2 3"} {
		if _, err := DecodeValue([]byte(bad)); err == nil {
			t.Errorf("%q decoded", bad)
		}
	}
}

func FuzzDecodeValue(f *testing.F) {
	f.Add([]byte("samsa-audit/1 5f3a9c1e i 17 1765100000123456789"))
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := DecodeValue(b)
		if err != nil {
			return
		}
		if back, err := DecodeValue(AppendValue(nil, v)); err != nil || back != v {
			t.Fatalf("%q: decoded %+v, re-encoded and decoded %+v, %v", b, v, back, err)
		}
	})
}
