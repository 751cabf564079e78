package chaos

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// The replica check (isr-behind-hw): the harness's monitor (runner/replicas.go) reads,
// in rounds of a few hundred milliseconds, every live node's Metadata (the ISR of each
// partition as that node's image has it), every node's log end offset per partition
// (its admin listener's Prometheus text, samsa_log_end_offset) with its metadata
// offset (samsa_metadata_applied_offset, read before and after the Metadata request,
// so the image the answer came from lies between the two) and each leader's high
// watermark (ListOffsets latest, read_uncommitted). ReplicaChecker judges that stream:
//
//	isr-behind-hw   a replica that left the ISR (an answer without it) and was seen
//	                in it again (a later round in which a majority of the nodes, and
//	                every node that answered, list it, from images at least as new as
//	                the one it was missing from and as every image the harness had
//	                seen before) later shows a log end below a high watermark
//	                observed before that answer without it
//
// Why that is a broker fault: a replica joins the ISR only once its fetch offset
// (its log end) has reached the leader's HW and the start of the leader epoch; the
// HW at its admission is at least any HW observed before it was seen out (the HW of
// the committed log only grows, and a leader elected since has every committed
// record: its epoch starts at or past them); and under sync=fsync a replica's log
// end never drops below what it reported to the leader (a follower fetches its next
// offset only once the records before it are fdatasynced; a follower following a
// new leader truncates only above the committed records, which every ISR member
// holds). So a log end below that HW means the replica was counted in the ISR
// without records the HW said it held: the next leader failure loses them.
//
// The races, and why none makes a false report:
//
//   - A stale Metadata answer (a node cut from the controllers, just resumed, just
//     restarted and replaying its metadata log) showing the replica in the ISR after
//     it left: "in" needs a majority of the nodes to list it, no node to leave it
//     out, and every counted answer to come from an image at or past (a) the image
//     it was seen missing from and (b) the highest metadata offset any node had
//     applied before that answer (a replaying node's image is older than what the
//     harness already saw applied). A stale answer without it only raises the bound
//     later checks use, which is safe: the replica is then seen in again only from
//     images newer than that answer.
//   - A node restarting: its log end gauge comes back with the log it had (under
//     fsync, at least what it reported); a killed or paused node answers nothing and
//     is left out of the round.
//   - A partition deleted or recreated: a topic whose id changes is not judged from
//     then on (the harness's topics are never deleted).
//   - Metrics missing (a node's admin listener down): its answers carry no offsets
//     and cannot show the replica in; its log ends are simply not observed.
//
// The bound is the largest HW whose observation ended before the answer without the
// replica began; the log end must have been read after the round that saw it in
// ended. Each admission is reported at most once (the first log end below).

// KISRBehindHW is the replica check's anomaly kind.
const KISRBehindHW = "isr-behind-hw"

// ReplicaRound is one round of the monitor: what each node answered. Times are ns
// since the run's start.
type ReplicaRound struct {
	Start, End int64
	ISR        []ISRAnswer
	HW         []HWReading
	LEO        []LEOReading
}

// ISRAnswer is one node's Metadata answer. OffLo and OffHi are the node's metadata
// offset read before and after it (-1: not read).
type ISRAnswer struct {
	Node         int
	Start, End   int64
	OffLo, OffHi int64
	Parts        []PartitionISR
}

// PartitionISR is one partition of a Metadata answer.
type PartitionISR struct {
	Topic     string
	TopicID   string
	Partition int32
	Leader    int32
	Replicas  []int32
	ISR       []int32
}

// HWReading is a partition's high watermark as a node leading it answered it.
type HWReading struct {
	Node       int
	Start, End int64
	Topic      string
	Partition  int32
	HW         int64
}

// LEOReading is a node's log end offset of a partition.
type LEOReading struct {
	Node       int
	Start, End int64
	Topic      string
	Partition  int32
	LEO        int64
}

// ReplicaStats counts what the replica check saw.
type ReplicaStats struct {
	Rounds     int    `json:"rounds"`
	Answers    int    `json:"answers"`        // Metadata answers
	HWs        int    `json:"hws"`            // high watermarks read
	LEOs       int    `json:"leos"`           // log ends read
	Outs       int    `json:"outs"`           // answers leaving a replica out of the ISR
	Admissions int    `json:"admissions"`     // replicas seen back in the ISR, with a bound to check
	Checked    int    `json:"checked"`        // log ends compared with an admission's bound
	Anomalies  int    `json:"anomalies"`      // isr-behind-hw found
	Skipped    int    `json:"skipped"`        // topics not judged (their id changed)
	Failures   int    `json:"failures"`       // node requests that failed (down, paused, timed out)
	Topics     int    `json:"topics"`         // topics watched
	Partitions int    `json:"partitions"`     // partitions watched
	Nodes      int    `json:"nodes"`          // nodes of the cluster
	Note       string `json:"note,omitempty"` // why the check was off, when it was
}

// ReplicaFinding is one isr-behind-hw, with its evidence.
type ReplicaFinding struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Replica   int32  `json:"replica"`
	LEO       int64  `json:"leo"`        // the log end read
	LEOAt     int64  `json:"leo_at"`     // when (start of the read)
	Bound     int64  `json:"bound"`      // the HW it is below
	BoundNode int    `json:"bound_node"` // the node that answered that HW
	BoundAt   int64  `json:"bound_at"`   // when that HW's read ended
	OutNode   int    `json:"out_node"`   // the node whose answer left the replica out
	OutAt     int64  `json:"out_at"`     // when that answer's request began
	OutOff    int64  `json:"out_off"`    // that node's metadata offset read after it
	InAt      int64  `json:"in_at"`      // end of the round that saw it in again
	InNodes   []int  `json:"in_nodes"`   // the nodes whose answers listed it
	InOff     int64  `json:"in_off"`     // the lowest metadata offset of those answers
}

// Detail says the finding in words.
func (f ReplicaFinding) Detail() string {
	return fmt.Sprintf("%s-%d: replica %d's log end %d (read at %.3fs) is below the high watermark %d that node %d answered by %.3fs, "+
		"before node %d's Metadata (at %.3fs, metadata offset <= %d) left replica %d out of the ISR; nodes %v listed it in the ISR again by %.3fs "+
		"(metadata offsets >= %d): it was counted in the ISR without records the HW had passed",
		f.Topic, f.Partition, f.Replica, f.LEO, seconds(f.LEOAt), f.Bound, f.BoundNode, seconds(f.BoundAt),
		f.OutNode, seconds(f.OutAt), f.OutOff, f.Replica, f.InNodes, seconds(f.InAt), f.InOff)
}

func seconds(ns int64) float64 { return float64(ns) / 1e9 }

type tpKey struct {
	topic string
	p     int32
}

// step is one point of a staircase: the largest value whose read had ended by end.
type step struct {
	end  int64
	v    int64
	node int
}

// staircase keeps, for readings that end out of order, the largest value read by
// each time: increasing values at increasing ends. Steps older than the horizon
// before the newest are folded into base (queries are for times within a round of
// the newest).
type staircase struct {
	steps []step
	base  step
}

func newStaircase() staircase { return staircase{base: step{v: -1}} }

func (s *staircase) add(x step) {
	last := s.base
	if n := len(s.steps); n > 0 {
		last = s.steps[n-1]
	}
	if x.v <= last.v && (len(s.steps) == 0 || x.end >= last.end) {
		return
	}
	i := sort.Search(len(s.steps), func(i int) bool { return s.steps[i].end > x.end })
	s.steps = slices.Insert(s.steps, i, x)
	out := s.steps[:0]
	best := s.base
	for _, y := range s.steps {
		if y.v > best.v {
			out = append(out, y)
			best = y
		}
	}
	s.steps = out
	if len(s.steps) == 0 {
		return
	}
	newest := s.steps[len(s.steps)-1].end
	k := 0
	for k < len(s.steps)-1 && s.steps[k].end < newest-replicaHorizon {
		k++
	}
	if k > 0 {
		s.base = s.steps[k-1]
		s.steps = slices.Delete(s.steps, 0, k)
	}
}

// before is the largest value whose read ended before t.
func (s *staircase) before(t int64) (step, bool) {
	best := step{v: -1}
	if s.base.v >= 0 && s.base.end < t {
		best = s.base
	}
	for _, y := range s.steps {
		if y.end >= t {
			break
		}
		best = y
	}
	return best, best.v >= 0
}

type replicaState struct {
	// The latest answer without the replica, and the bound it set.
	out      bool // seen out since its last admission
	outNode  int
	outAt    int64
	outEnd   int64
	outOff   int64 // highest OffHi of the answers without it
	floor    int64 // the answers that may show it in again must be from images at or past this
	bound    step
	hasBound bool
	// Admitted: seen in again after out, as of round end inAt.
	admitted bool
	inAt     int64
	inNodes  []int
	inOff    int64
	reported bool
}

type tpState struct {
	topicID  string
	skipped  bool
	hw       staircase
	replicas map[int32]*replicaState
}

// ReplicaChecker judges the monitor's rounds, one at a time, in order. Its state is
// bounded: per partition a staircase of HW readings (folded after a minute) and a
// few fields per replica. Not safe for concurrent use.
type ReplicaChecker struct {
	nodes   int
	parts   map[tpKey]*tpState
	applied staircase // metadata offsets the nodes reported
	stats   ReplicaStats
	found   []ReplicaFinding
	topics  map[string]bool
}

// NewReplicaChecker makes a checker for a cluster of nodes nodes.
func NewReplicaChecker(nodes int) *ReplicaChecker {
	return &ReplicaChecker{nodes: max(nodes, 1), parts: map[tpKey]*tpState{}, applied: newStaircase(), topics: map[string]bool{},
		stats: ReplicaStats{Nodes: nodes}}
}

// Stats is what the checker saw so far.
func (c *ReplicaChecker) Stats() ReplicaStats {
	s := c.stats
	s.Topics = len(c.topics)
	s.Partitions = len(c.parts)
	return s
}

// Findings are the isr-behind-hw found so far, in the order found.
func (c *ReplicaChecker) Findings() []ReplicaFinding { return c.found }

// replicaHorizon: staircase steps older than this (ns) before the newest are folded.
const replicaHorizon = int64(60e9)

func (c *ReplicaChecker) tp(topic string, p int32) *tpState {
	k := tpKey{topic, p}
	s := c.parts[k]
	if s == nil {
		s = &tpState{replicas: map[int32]*replicaState{}, hw: newStaircase()}
		c.parts[k] = s
		c.topics[topic] = true
	}
	return s
}

func (s *tpState) replica(r int32) *replicaState {
	st := s.replicas[r]
	if st == nil {
		st = &replicaState{outOff: -1, floor: -1}
		s.replicas[r] = st
	}
	return st
}

func (c *ReplicaChecker) noteApplied(off, end int64) {
	if off >= 0 {
		c.applied.add(step{end: end, v: off})
	}
}

func majority(n int) int { return n/2 + 1 }

// Round judges one round and returns the findings it made.
func (c *ReplicaChecker) Round(r ReplicaRound) []ReplicaFinding {
	c.stats.Rounds++
	before := len(c.found)
	c.noteAnswers(r.ISR)
	for _, h := range r.HW {
		c.stats.HWs++
		if h.HW >= 0 {
			c.tp(h.Topic, h.Partition).hw.add(step{end: h.End, v: h.HW, node: h.Node})
		}
	}
	c.checkLEOs(r.LEO)
	byTP := c.isrMembership(r.ISR)
	keys := make([]tpKey, 0, len(byTP))
	for k := range byTP {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].topic != keys[j].topic {
			return keys[i].topic < keys[j].topic
		}
		return keys[i].p < keys[j].p
	})
	for _, k := range keys {
		s := c.parts[k]
		reps := make([]int32, 0, len(byTP[k]))
		for rep := range byTP[k] {
			reps = append(reps, rep)
		}
		slices.Sort(reps)
		for _, rep := range reps {
			x := byTP[k][rep]
			st := s.replica(rep)
			if len(x.out) > 0 {
				c.out(s, st, x.out)
				continue
			}
			if st.out {
				c.in(st, x.in, r.End)
			}
		}
	}
	return c.found[before:]
}

// noteAnswers notes the metadata offsets the round's Metadata answers read (an
// answer's OffHi is a read after it) and their topic ids: a topic whose id changes
// is not judged any more.
func (c *ReplicaChecker) noteAnswers(isr []ISRAnswer) {
	for _, a := range isr {
		c.stats.Answers++
		// OffLo was read before the request began, OffHi after it ended.
		c.noteApplied(a.OffLo, a.Start)
		c.noteApplied(a.OffHi, a.End)
	}
	for _, a := range isr {
		for _, p := range a.Parts {
			s := c.tp(p.Topic, p.Partition)
			if p.TopicID == "" {
				continue
			}
			if s.topicID == "" {
				s.topicID = p.TopicID
			} else if s.topicID != p.TopicID && !s.skipped {
				for k, o := range c.parts {
					if k.topic == p.Topic && !o.skipped {
						o.skipped = true
						c.stats.Skipped++
					}
				}
			}
		}
	}
}

// checkLEOs checks the round's log ends against the admissions of earlier rounds:
// a replica admitted to the ISR whose log end is below the bound it was admitted
// against is a finding (once per admission).
func (c *ReplicaChecker) checkLEOs(leos []LEOReading) {
	for _, l := range leos {
		c.stats.LEOs++
		s := c.parts[tpKey{l.Topic, l.Partition}]
		if s == nil || s.skipped {
			continue
		}
		st := s.replicas[int32(l.Node)]
		if st == nil || !st.admitted || !st.hasBound || l.Start <= st.inAt {
			continue
		}
		c.stats.Checked++
		if l.LEO < st.bound.v && !st.reported {
			st.reported = true
			f := ReplicaFinding{Topic: l.Topic, Partition: l.Partition, Replica: int32(l.Node), LEO: l.LEO, LEOAt: l.Start,
				Bound: st.bound.v, BoundNode: st.bound.node, BoundAt: st.bound.end, OutNode: st.outNode, OutAt: st.outAt, OutOff: st.outOff,
				InAt: st.inAt, InNodes: st.inNodes, InOff: st.inOff}
			c.found = append(c.found, f)
			c.stats.Anomalies++
		}
	}
}

// isrSeen is the answers of a round that named a replica in its partition's ISR
// and those that left it out.
type isrSeen struct {
	in, out []*ISRAnswer
}

// isrMembership sorts the round's answers per partition and replica: those naming
// the replica in the ISR and those leaving it out (the replicas of the partition,
// as any answer named them, absent from the answer's ISR).
func (c *ReplicaChecker) isrMembership(isr []ISRAnswer) map[tpKey]map[int32]*isrSeen {
	byTP := map[tpKey]map[int32]*isrSeen{}
	for i := range isr {
		a := &isr[i]
		for _, p := range a.Parts {
			k := tpKey{p.Topic, p.Partition}
			s := c.parts[k]
			if s.skipped {
				continue
			}
			m := byTP[k]
			if m == nil {
				m = map[int32]*isrSeen{}
				byTP[k] = m
			}
			for _, rep := range p.Replicas {
				s.replica(rep)
			}
			for rep := range s.replicas {
				x := m[rep]
				if x == nil {
					x = &isrSeen{}
					m[rep] = x
				}
				if slices.Contains(p.ISR, rep) {
					x.in = append(x.in, a)
				} else {
					x.out = append(x.out, a)
				}
			}
		}
	}
	return byTP
}

// out records answers without the replica. An answer whose metadata offset after it
// is unknown cannot be ordered against later ones: it is not used.
func (c *ReplicaChecker) out(s *tpState, st *replicaState, as []*ISRAnswer) {
	for _, a := range as {
		if a.OffHi < 0 {
			continue
		}
		c.stats.Outs++
		if !st.out || a.Start >= st.outAt {
			st.outNode, st.outAt, st.outEnd = a.Node, a.Start, a.End
		}
		st.out = true
		st.admitted, st.reported = false, false
		st.outOff = max(st.outOff, a.OffHi)
		applied, _ := c.applied.before(a.Start)
		st.floor = max(st.floor, st.outOff, applied.v)
		if b, ok := s.hw.before(a.Start); ok && (!st.hasBound || b.v > st.bound.v) {
			st.bound, st.hasBound = b, true
		}
	}
}

// in admits a replica seen out when this round's answers (none of which left it out)
// list it from a majority of the nodes, each answer from an image at or past the
// floor and begun after the last answer without it ended.
func (c *ReplicaChecker) in(st *replicaState, as []*ISRAnswer, roundEnd int64) {
	var nodes []int
	lo := int64(-1)
	for _, a := range as {
		if a.OffLo < 0 || a.OffLo < st.floor || a.Start <= st.outEnd {
			continue
		}
		nodes = append(nodes, a.Node)
		if lo < 0 || a.OffLo < lo {
			lo = a.OffLo
		}
	}
	if len(nodes) < majority(c.nodes) {
		return
	}
	slices.Sort(nodes)
	st.out = false
	st.admitted, st.reported = true, false
	st.inAt, st.inNodes, st.inOff = roundEnd, nodes, lo
	if st.hasBound {
		c.stats.Admissions++
	}
}

// ReplicaSummary is the text the report shows for the replica check.
func (s ReplicaStats) Summary() string {
	if s.Note != "" {
		return "replica check off: " + s.Note
	}
	if s.Rounds == 0 {
		return "replica check: not run"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "replica check: %d rounds over %d nodes, %d partitions of %d topics; %d Metadata answers, %d HWs, %d log ends read (%d requests failed); "+
		"%d answers left a replica out, %d admissions with a bound, %d log ends checked against one; %d isr-behind-hw",
		s.Rounds, s.Nodes, s.Partitions, s.Topics, s.Answers, s.HWs, s.LEOs, s.Failures, s.Outs, s.Admissions, s.Checked, s.Anomalies)
	if s.Skipped > 0 {
		fmt.Fprintf(&b, "; %d partitions not judged (topic id changed)", s.Skipped)
	}
	return b.String()
}

// replicaOp takes the replica monitor's op into the result: a finding is an
// isr-behind-hw anomaly, the summary the counts.
func (c *checker) replicaOp(op *Op) {
	if op.Replica == nil {
		return
	}
	if f := op.Replica.Finding; f != nil {
		c.add(Anomaly{Kind: KISRBehindHW, P: f.Partition, O: f.LEO, Value: fmt.Sprintf("%s-%d replica %d", f.Topic, f.Partition, f.Replica),
			Proc: op.Proc, Time: f.LEOAt, Detail: f.Detail(), Ops: []int64{op.ID}})
	}
	if s := op.Replica.Stats; s != nil {
		c.res.Replicas = *s
	}
}
