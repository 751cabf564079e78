package chaos

import (
	"strings"
	"testing"
)

// Synthetic observation sequences for the replica check: three nodes, one partition
// t-0 with replicas 1, 2, 3 led by node 1. Times are in ms (scaled to ns); each round
// is 100 ms long and starts at its number times 1000 ms, so the order of rounds is
// plain.

const ms = int64(1e6)

type rb struct {
	n int // round number
	r ReplicaRound
}

func round(n int) *rb {
	return &rb{n: n, r: ReplicaRound{Start: int64(n) * 1000 * ms, End: (int64(n)*1000 + 100) * ms}}
}

func (b *rb) at(off int64) int64 { return b.r.Start + off*ms }

// isr adds node's answer listing isr, its metadata offsets read before and after.
func (b *rb) isr(node int, lo, hi int64, isr ...int32) *rb {
	b.r.ISR = append(b.r.ISR, ISRAnswer{Node: node, Start: b.at(10), End: b.at(20), OffLo: lo, OffHi: hi,
		Parts: []PartitionISR{{Topic: "t", TopicID: "id1", Partition: 0, Leader: 1, Replicas: []int32{1, 2, 3}, ISR: isr}}})
	return b
}

// hw adds the leader's HW, read between offsets from and to of the round (ms).
func (b *rb) hw(node int, hw int64, from, to int64) *rb {
	b.r.HW = append(b.r.HW, HWReading{Node: node, Start: b.at(from), End: b.at(to), Topic: "t", Partition: 0, HW: hw})
	return b
}

// leo adds node's log end, read at the start of the round.
func (b *rb) leo(node int, leo int64) *rb {
	b.r.LEO = append(b.r.LEO, LEOReading{Node: node, Start: b.at(1), End: b.at(5), Topic: "t", Partition: 0, LEO: leo})
	return b
}

func run(c *ReplicaChecker, rounds ...*rb) []ReplicaFinding {
	var out []ReplicaFinding
	for _, b := range rounds {
		out = append(out, c.Round(b.r)...)
	}
	return out
}

// The sequence of the bug the check is for: replica 3 is in, leaves (a HW of 150
// had been read before the answer without it), is listed again by every node, and
// then shows a log end of 120.
func behindSequence() []*rb {
	return []*rb{
		round(1).hw(1, 100, 1, 5).isr(1, 10, 10, 1, 2, 3).isr(2, 10, 10, 1, 2, 3).isr(3, 10, 10, 1, 2, 3).leo(3, 100),
		round(2).hw(1, 150, 1, 5).isr(1, 12, 12, 1, 2).isr(2, 12, 12, 1, 2).isr(3, 12, 12, 1, 2).leo(3, 100),
		round(3).hw(1, 160, 1, 5).isr(1, 14, 14, 1, 2, 3).isr(2, 14, 14, 1, 2, 3).isr(3, 14, 14, 1, 2, 3),
		round(4).hw(1, 170, 1, 5).leo(3, 120),
	}
}

func TestReplicaCheckFindsAnAdmissionBehindTheHW(t *testing.T) {
	c := NewReplicaChecker(3)
	fs := run(c, behindSequence()...)
	if len(fs) != 1 {
		t.Fatalf("findings %+v", fs)
	}
	f := fs[0]
	if f.Replica != 3 || f.LEO != 120 || f.Bound != 150 || f.BoundNode != 1 || f.InOff != 14 || len(f.InNodes) != 3 {
		t.Fatalf("finding %+v", f)
	}
	if !strings.Contains(f.Detail(), "replica 3's log end 120") {
		t.Errorf("detail %q", f.Detail())
	}
	st := c.Stats()
	if st.Admissions != 1 || st.Anomalies != 1 || st.Checked != 1 || st.Rounds != 4 {
		t.Errorf("stats %+v", st)
	}
	// The same admission is reported once.
	if more := run(c, round(5).leo(3, 121)); len(more) != 0 {
		t.Errorf("reported again: %+v", more)
	}
}

func TestReplicaCheckQuietWhenCaughtUp(t *testing.T) {
	seq := behindSequence()
	seq[3] = round(4).hw(1, 170, 1, 5).leo(3, 150) // at the bound: fine
	c := NewReplicaChecker(3)
	if fs := run(c, seq...); len(fs) != 0 {
		t.Fatalf("findings %+v", fs)
	}
	if st := c.Stats(); st.Admissions != 1 || st.Checked != 1 {
		t.Errorf("stats %+v", st)
	}
}

// A replica's log end below a HW read after the answer without it began is no fault:
// the HW may move on once the replica has left. Here round 2's HW read (150) ends
// after the answers begin, so the bound is round 1's 100, and 120 is past it.
func TestReplicaCheckBoundIsBeforeTheAnswerWithoutIt(t *testing.T) {
	seq := behindSequence()
	seq[1] = round(2).hw(1, 150, 12, 30).isr(1, 12, 12, 1, 2).isr(2, 12, 12, 1, 2).isr(3, 12, 12, 1, 2)
	c := NewReplicaChecker(3)
	if fs := run(c, seq...); len(fs) != 0 {
		t.Fatalf("findings %+v", fs)
	}
	if st := c.Stats(); st.Admissions != 1 || st.Checked != 1 {
		t.Errorf("stats %+v", st)
	}
}

// A log end read before the round that saw the replica in again ended is not judged.
func TestReplicaCheckLogEndBeforeTheAdmission(t *testing.T) {
	seq := behindSequence()
	seq[2].leo(3, 110) // read at +1 ms of the round that admits it
	seq = seq[:3]
	c := NewReplicaChecker(3)
	if fs := run(c, seq...); len(fs) != 0 {
		t.Fatalf("findings %+v", fs)
	}
}

// A stale answer (node 3 cut off, its image still listing replica 3) while the others
// leave it out: no admission.
func TestReplicaCheckStaleAnswerIsNotAnAdmission(t *testing.T) {
	c := NewReplicaChecker(3)
	fs := run(c,
		round(1).hw(1, 100, 1, 5).isr(1, 10, 10, 1, 2, 3).isr(2, 10, 10, 1, 2, 3).isr(3, 10, 10, 1, 2, 3),
		round(2).hw(1, 150, 1, 5).isr(1, 12, 12, 1, 2).isr(2, 12, 12, 1, 2).isr(3, 10, 10, 1, 2, 3),
		round(3).hw(1, 160, 1, 5).isr(1, 13, 13, 1, 2).isr(3, 10, 10, 1, 2, 3),
		round(4).hw(1, 170, 1, 5).leo(3, 100).isr(3, 10, 10, 1, 2, 3),
		round(5).leo(3, 100),
	)
	if len(fs) != 0 || c.Stats().Admissions != 0 {
		t.Fatalf("findings %+v, stats %+v", fs, c.Stats())
	}
}

// A minority listing it (one node of three answered) is not an admission.
func TestReplicaCheckMinorityIsNotAnAdmission(t *testing.T) {
	seq := behindSequence()
	seq[2] = round(3).hw(1, 160, 1, 5).isr(2, 14, 14, 1, 2, 3)
	c := NewReplicaChecker(3)
	if fs := run(c, seq...); len(fs) != 0 {
		t.Fatalf("findings %+v", fs)
	}
}

// The node that answered without the replica is killed; the other two had not
// applied that change yet (images at offset 11, older than 12) and still list it:
// not an admission.
func TestReplicaCheckOlderImagesAreNotAnAdmission(t *testing.T) {
	c := NewReplicaChecker(3)
	fs := run(c,
		round(1).hw(1, 100, 1, 5).isr(1, 10, 10, 1, 2, 3).isr(2, 10, 10, 1, 2, 3).isr(3, 10, 10, 1, 2, 3),
		round(2).hw(1, 150, 1, 5).isr(1, 12, 12, 1, 2),
		round(3).isr(2, 11, 11, 1, 2, 3).isr(3, 11, 11, 1, 2, 3),
		round(4).leo(3, 100),
	)
	if len(fs) != 0 || c.Stats().Admissions != 0 {
		t.Fatalf("findings %+v, stats %+v", fs, c.Stats())
	}
}

// Nodes replaying their metadata log after a restart pass through images older than
// what the harness had seen applied: a stale answer without the replica (offset 5)
// does not let those images (offset 8, below the 12 seen before) admit it.
func TestReplicaCheckReplayingImagesAreNotAnAdmission(t *testing.T) {
	c := NewReplicaChecker(3)
	fs := run(c,
		round(1).hw(1, 100, 1, 5).isr(1, 12, 12, 1, 2, 3).isr(2, 12, 12, 1, 2, 3),
		round(2).hw(1, 150, 1, 5).isr(3, 5, 5, 1, 2),
		round(3).isr(1, 8, 8, 1, 2, 3).isr(2, 8, 8, 1, 2, 3).isr(3, 8, 8, 1, 2, 3),
		round(4).leo(3, 100),
	)
	if len(fs) != 0 {
		t.Fatalf("findings %+v", fs)
	}
	// Once they are past it, they count.
	fs = run(c, round(5).isr(1, 13, 13, 1, 2, 3).isr(2, 13, 13, 1, 2, 3), round(6).leo(3, 100))
	if len(fs) != 1 || fs[0].Bound != 150 || fs[0].InOff != 13 {
		t.Fatalf("findings %+v", fs)
	}
}

// An answer without the replica whose metadata offset after it is unknown (the node's
// metrics did not answer) cannot be ordered: it is not used.
func TestReplicaCheckOutWithoutOffsetIsIgnored(t *testing.T) {
	seq := behindSequence()
	seq[1] = round(2).hw(1, 150, 1, 5).isr(1, 12, -1, 1, 2)
	c := NewReplicaChecker(3)
	if fs := run(c, seq...); len(fs) != 0 || c.Stats().Outs != 0 {
		t.Fatalf("findings %+v, stats %+v", fs, c.Stats())
	}
}

// A topic whose id changes (deleted and created again) is not judged any more.
func TestReplicaCheckRecreatedTopicIsSkipped(t *testing.T) {
	seq := behindSequence()
	seq[2].r.ISR[0].Parts[0].TopicID = "id2"
	c := NewReplicaChecker(3)
	if fs := run(c, seq...); len(fs) != 0 || c.Stats().Skipped != 1 {
		t.Fatalf("findings %+v, stats %+v", fs, c.Stats())
	}
}

// A killed node answers nothing; its log end is not read; nothing is judged until it
// is seen again.
func TestReplicaCheckKilledNodeRestarts(t *testing.T) {
	c := NewReplicaChecker(3)
	fs := run(c,
		round(1).hw(1, 100, 1, 5).isr(1, 10, 10, 1, 2, 3).isr(2, 10, 10, 1, 2, 3).isr(3, 10, 10, 1, 2, 3).leo(3, 100),
		round(2).hw(1, 150, 1, 5).isr(1, 12, 12, 1, 2).isr(2, 12, 12, 1, 2),
		round(3).hw(1, 200, 1, 5).isr(1, 12, 12, 1, 2).isr(2, 12, 12, 1, 2).isr(3, 12, 12, 1, 2).leo(3, 100),
		round(4).hw(1, 210, 1, 5).isr(1, 14, 14, 1, 2, 3).isr(2, 14, 14, 1, 2, 3).isr(3, 14, 14, 1, 2, 3).leo(3, 190),
		round(5).leo(3, 205),
	)
	// The bound is the HW before the latest answer without it (round 3: 200); 205 is
	// past it.
	if len(fs) != 0 || c.Stats().Admissions != 1 {
		t.Fatalf("findings %+v, stats %+v", fs, c.Stats())
	}
}

// Leaving again and coming back behind is a second finding.
func TestReplicaCheckSecondAdmission(t *testing.T) {
	c := NewReplicaChecker(3)
	if fs := run(c, behindSequence()...); len(fs) != 1 {
		t.Fatalf("findings %+v", fs)
	}
	fs := run(c,
		round(5).hw(1, 300, 1, 5).isr(1, 20, 20, 1, 2).isr(2, 20, 20, 1, 2),
		round(6).isr(1, 22, 22, 1, 2, 3).isr(2, 22, 22, 1, 2, 3),
		round(7).leo(3, 250),
	)
	if len(fs) != 1 || fs[0].Bound != 300 {
		t.Fatalf("findings %+v", fs)
	}
}

// The staircase keeps the largest value read by each time, whatever order the
// readings come in, and folds what is older than the horizon.
func TestStaircase(t *testing.T) {
	s := newStaircase()
	s.add(step{end: 10, v: 5})
	s.add(step{end: 30, v: 9})
	s.add(step{end: 20, v: 7})
	s.add(step{end: 25, v: 4}) // dominated by 7 at 20
	s.add(step{end: 40, v: 9}) // not larger
	for _, c := range []struct {
		t    int64
		want int64
	}{{5, -1}, {10, -1}, {11, 5}, {21, 7}, {26, 7}, {31, 9}, {100, 9}} {
		if got, _ := s.before(c.t); got.v != c.want {
			t.Errorf("before(%d) = %d, want %d", c.t, got.v, c.want)
		}
	}
	s.add(step{end: 30 + replicaHorizon + 10, v: 12})
	if len(s.steps) != 1 || s.base.v != 9 {
		t.Errorf("not folded: %+v base %+v", s.steps, s.base)
	}
	if got, _ := s.before(31); got.v != 9 {
		t.Errorf("before(31) after the fold = %d", got.v)
	}
}

// Check turns the monitor's ops into anomalies and counts.
func TestCheckReplicaOps(t *testing.T) {
	c := NewReplicaChecker(3)
	fs := run(c, behindSequence()...)
	st := c.Stats()
	var b hb
	b.h.Header = Header{Topic: "t", Partitions: 1, Nodes: 3}
	b.h.Ops = append(b.h.Ops,
		Op{ID: 1, Proc: ProcReplicas, F: FReplica, Status: Fail, Start: fs[0].LEOAt, End: fs[0].LEOAt, Replica: &ReplicaOp{Finding: &fs[0]}},
		Op{ID: 2, Proc: ProcReplicas, F: FReplica, Status: OK, Replica: &ReplicaOp{Stats: &st}})
	res := Check(&b.h, Options{})
	if res.Valid || res.Counts[KISRBehindHW] != 1 || res.Replicas.Admissions != 1 {
		t.Fatalf("result %s %+v", res.Summary(), res.Replicas)
	}
	a := res.Anomalies[0]
	if a.Kind != KISRBehindHW || a.P != 0 || a.O != 120 || a.Value != "t-0 replica 3" {
		t.Fatalf("anomaly %+v", a)
	}
	if !strings.Contains(st.Summary(), "1 isr-behind-hw") {
		t.Errorf("summary %q", st.Summary())
	}
}
