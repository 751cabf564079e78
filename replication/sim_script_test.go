package replication

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/samsa-broker/samsa/engine"
)

// Scripted simulations: named scenarios, driven step by step, with the invariants
// checked after every event as in the random runs.

// scriptConfig is a fixed configuration for a scenario.
func scriptConfig(brokers, rf, minISR int, fsync bool) simConfig {
	return simConfig{seed: 1, brokers: brokers, partitions: 1, rf: rf, minISR: minISR, fsync: fsync, fetchers: 1,
		sessions: true, maxBytes: 1 << 20, settle: 5 * time.Second, clients: 2}
}

// script wraps a sim with scenario steps that fail the test on a violation (or, with
// onFail set, report it there and stop the scenario: the planted-bug tests).
type script struct {
	*sim
	t      *testing.T
	onFail func(msg string)
}

func newScript(t *testing.T, cfg simConfig) *script {
	s := &script{sim: newSim(t, cfg), t: t}
	s.until("the cluster converges", 2*time.Second, s.converged)
	return s
}

// errScriptStopped stops a scenario whose onFail recorded a failure.
type errScriptStopped struct{}

func (s *script) fatalf(format string, args ...any) {
	s.t.Helper()
	if s.onFail != nil {
		s.onFail(fmt.Sprintf(format, args...))
		panic(errScriptStopped{})
	}
	s.t.Fatalf(format, args...)
}

func (s *script) ok() {
	s.t.Helper()
	if len(s.faults) == 0 {
		return
	}
	if s.onFail != nil {
		s.fatalf("%s", strings.Join(s.faults, "; "))
	}
	reportSim(s.t, s.sim, s.t.Name())
	s.t.FailNow()
}

// until runs events until cond holds, failing after max.
func (s *script) until(what string, max time.Duration, cond func() bool) {
	s.t.Helper()
	s.runUntil(s.now.Add(max), cond)
	s.ok()
	if !cond() {
		s.fatalf("%s: not within %v\nstate: %s\nlast events:\n%s", what, max, s.describe(), s.traceText())
	}
}

func (s *script) run(d time.Duration) {
	s.t.Helper()
	s.runFor(d)
	s.ok()
}

func (s *script) node(id int32) *simNode { return s.nodes[id] }

func (s *script) tp0() engine.TopicPartition { return s.tp(0) }

// produceTo sends one acks=all record to node id and returns a function reporting its
// outcome once known (done, err).
func (s *script) produceTo(id int32, v string) func() (bool, error) {
	n := s.nodes[id]
	var done bool
	var res error
	if !n.up {
		return func() (bool, error) { return true, ErrNotLeader }
	}
	inc := n.inc
	s.after(s.delay(), func() {
		if !n.up || n.inc != inc {
			done, res = true, ErrNotLeader
			return
		}
		s.produceAt(n, s.tp0(), v, func(err error) { done, res = true, err })
	})
	return func() (bool, error) { return done, res }
}

// produce sends v to the controller's leader and waits for the outcome.
func (s *script) produce(v string) error {
	s.t.Helper()
	leader := s.ctrl.part(s.tp0()).leader
	if leader < 0 {
		return ErrNotLeader
	}
	r := s.produceTo(leader, v)
	s.until("produce "+v+" settles", simProduceTimeout+time.Second, func() bool { d, _ := r(); return d })
	_, err := r()
	return err
}

func (s *script) mustProduce(v string) {
	s.t.Helper()
	if err := s.produce(v); err != nil {
		s.fatalf("produce %s: %v\nstate: %s", v, err, s.describe())
	}
}

// isolate cuts id from every other node and the controller.
func (s *script) isolate(id int32) {
	for o := int32(0); o < int32(len(s.nodes)); o++ {
		if o != id {
			s.cut[linkKey(id, o)] = true
		}
	}
	s.tracef("isolate %d", id)
}

func (s *script) cutLink(a, b int32) {
	s.cut[linkKey(a, b)] = true
	s.tracef("cut %d-%d", a, b)
}

func (s *script) healLink(a, b int32) {
	delete(s.cut, linkKey(a, b))
	s.tracef("heal %d-%d", a, b)
	s.afterHeal()
}

// leaderIs waits until the controller names id leader and id has applied it.
func (s *script) leaderIs(id int32, max time.Duration) {
	s.t.Helper()
	s.until(fmt.Sprintf("n%d leads", id), max, func() bool {
		cp := s.ctrl.part(s.tp0())
		n := s.nodes[id]
		if cp.leader != id || !n.up {
			return false
		}
		p := n.m.Partition(s.tp0())
		return p != nil && p.Role() == RoleLeader && p.LeaderEpoch() == cp.leaderEpoch
	})
}

func (s *script) valueAt(id int32, off int64) string {
	v, _, _ := s.nodes[id].store.log(s.tp0()).valueAt(off)
	return v
}

func (s *script) finish() {
	s.t.Helper()
	s.settle()
	s.ok()
}

// TestSimKIP101FollowerKeepsTailAboveItsHW: a follower holds records its HW does not
// cover yet (the HW reaches followers one fetch later) when the leader dies. Truncating
// to the HW on becoming leader (or follower), as Kafka did before KIP-101, would lose
// acknowledged records; the new leader keeps its whole log.
func TestSimKIP101FollowerKeepsTailAboveItsHW(t *testing.T) {
	for _, fsync := range []bool{true, false} {
		t.Run(fmt.Sprintf("fsync=%v", fsync), func(t *testing.T) {
			s := newScript(t, scriptConfig(2, 2, 1, fsync))
			s.mustProduce("m1")
			s.mustProduce("m2")
			// Right after the ack, n2 has m2 but learns the HW only with its next fetch.
			if l := s.node(2).store.log(s.tp0()); l.LogEndOffset() != 2 {
				t.Fatalf("n2 log end %d", l.LogEndOffset())
			}
			s.crash(s.node(1), fsync)
			s.leaderIs(2, time.Second)
			if s.valueAt(2, 1) != "m2" {
				t.Fatalf("new leader lost m2: %q", s.valueAt(2, 1))
			}
			s.mustProduce("m3")
			s.restart(s.node(1))
			s.finish()
		})
	}
}

// TestSimKIP101DivergentLogsAfterDoubleCrash: the leader wrote a record its follower
// never got, then both lost power; the follower comes back first, leads, and writes
// other records at the same offset. The old leader, back as follower, must cut its
// unreplicated record at the epoch boundary, not keep it (divergent logs).
func TestSimKIP101DivergentLogsAfterDoubleCrash(t *testing.T) {
	for _, ofle := range []bool{false, true} {
		t.Run(fmt.Sprintf("offsetForLeaderEpoch=%v", ofle), func(t *testing.T) {
			cfg := scriptConfig(2, 2, 1, true)
			cfg.useOFLE = ofle
			s := newScript(t, cfg)
			s.mustProduce("m1")
			s.cutLink(1, 2)
			r := s.produceTo(1, "m2") // appended and fsynced on n1 only: never acknowledged
			s.until("n1 holds m2 durably", time.Second, func() bool {
				l := s.node(1).store.log(s.tp0())
				return l.LogEndOffset() == 2 && l.durable == 2
			})
			s.crash(s.node(1), true)
			s.run(20 * time.Millisecond) // n1 is fenced first: n2 stays the last ISR member
			s.crash(s.node(2), true)
			s.until("both fenced", time.Second, func() bool {
				return s.ctrl.brokers[1].fenced && s.ctrl.brokers[2].fenced
			})
			if d, _ := r(); d {
				if _, err := r(); err == nil {
					t.Fatal("m2 acknowledged")
				}
			}
			s.healAll()
			s.restart(s.node(2))
			s.leaderIs(2, time.Second)
			s.mustProduce("m3") // at offset 1, in a new epoch
			s.restart(s.node(1))
			s.until("n1 follows n2's log", 2*time.Second, func() bool { return s.valueAt(1, 1) == "m3" })
			s.finish()
		})
	}
}

// TestSimKIP279RapidDoubleFailover: the leader fails with a record only one follower
// has; that follower leads for a moment and fails too, and the third replica, which
// never saw the record, leads and writes over its offset. Both zombies (which may
// still take writes) come back as followers and must truncate to the new leader's log,
// in as many rounds of epoch comparison as it takes.
func TestSimKIP279RapidDoubleFailover(t *testing.T) {
	for _, ofle := range []bool{false, true} {
		t.Run(fmt.Sprintf("offsetForLeaderEpoch=%v", ofle), func(t *testing.T) {
			cfg := scriptConfig(3, 3, 1, false)
			cfg.useOFLE = ofle
			s := newScript(t, cfg)
			s.mustProduce("m1")
			s.cutLink(1, 3) // n3 stops fetching from the leader
			s.produceTo(1, "m2")
			s.until("n2 has m2", time.Second, func() bool { return s.valueAt(2, 1) == "m2" })
			s.isolate(1) // n1: a zombie leader
			s.produceTo(1, "z1")
			s.leaderIs(2, time.Second)
			s.isolate(2) // n2 leads only for a moment
			s.produceTo(2, "z2")
			s.leaderIs(3, time.Second)
			s.mustProduce("m3")
			if s.valueAt(3, 1) != "m3" {
				t.Fatalf("n3 offset 1: %q", s.valueAt(3, 1))
			}
			s.healAll()
			s.until("every replica has n3's log", 3*time.Second, func() bool {
				return s.valueAt(1, 1) == "m3" && s.valueAt(2, 1) == "m3"
			})
			s.finish()
		})
	}
}

// TestSimFsyncAllReplicasPowerCut: under fsync, every replica loses power at once in
// the middle of acks=all traffic; after restart nothing acknowledged is missing.
func TestSimFsyncAllReplicasPowerCut(t *testing.T) {
	s := newScript(t, scriptConfig(3, 3, 2, true))
	s.chaosOn = true
	for _, c := range s.clients {
		c.run(s.now.Add(200 * time.Millisecond))
	}
	s.run(150 * time.Millisecond)
	if n := len(s.acks[s.tp0()].order); n < 10 {
		t.Fatalf("only %d records acknowledged before the cut", n)
	}
	for _, n := range s.nodes[1:] {
		s.crash(n, true)
	}
	s.run(300 * time.Millisecond)
	for _, n := range s.nodes[1:] {
		s.restart(n)
	}
	s.finish()
}

// TestSimLastReplicaStanding: Kafka's classic rule. With min.insync.replicas=2 and the
// follower gone, acks=all is refused (NOT_ENOUGH_REPLICAS) and nothing is appended;
// when the last ISR member dies too it stays in the ISR and the partition has no leader
// (the out-of-sync replica is not elected) until it returns.
func TestSimLastReplicaStanding(t *testing.T) {
	s := newScript(t, scriptConfig(2, 2, 2, true))
	s.mustProduce("m1")
	s.isolate(2)
	s.produceTo(1, "m1b") // gives n2 something to fall behind on
	s.until("the ISR is n1 alone", time.Second, func() bool {
		st := s.node(1).m.Partition(s.tp0()).State()
		return len(st.ISR) == 1 && st.PendingISR == nil
	})
	leo := s.node(1).store.log(s.tp0()).LogEndOffset()
	if err := s.produce("m2"); err != ErrNotEnoughReplicas {
		t.Fatalf("produce below min.insync.replicas: %v", err)
	}
	if l := s.node(1).store.log(s.tp0()).LogEndOffset(); l != leo {
		t.Fatalf("refused produce appended: log end %d -> %d", leo, l)
	}
	s.crash(s.node(1), true)
	s.healAll()
	s.until("n1 fenced", time.Second, func() bool { return s.ctrl.brokers[1].fenced })
	cp := s.ctrl.part(s.tp0())
	if cp.leader != -1 || len(cp.isr) != 1 || cp.isr[0] != 1 {
		t.Fatalf("leader %d isr %v: want no leader, isr [1]", cp.leader, cp.isr)
	}
	s.run(500 * time.Millisecond)
	if cp.leader != -1 {
		t.Fatalf("the out-of-sync replica n%d was elected", cp.leader)
	}
	s.restart(s.node(1))
	s.leaderIs(1, time.Second)
	s.until("n2 back in the ISR", 2*time.Second, func() bool {
		st := s.node(1).m.Partition(s.tp0()).State()
		return len(st.ISR) == 2 && st.PendingISR == nil
	})
	s.mustProduce("m3")
	s.finish()
}

// TestSimFencedLeaderNeverAcks: a leader cut off from the controller and its
// followers keeps taking writes it cannot replicate; once it learns of the newer leader
// epoch it must fail them (NOT_LEADER_OR_FOLLOWER), never acknowledge them.
func TestSimFencedLeaderNeverAcks(t *testing.T) {
	fencedLeaderNeverAcks(newScript(t, scriptConfig(3, 3, 2, false)))
}

func fencedLeaderNeverAcks(s *script) {
	s.mustProduce("m1")
	s.isolate(1)
	r := s.produceTo(1, "x")
	s.leaderIs(2, time.Second)
	s.healLink(0, 1) // n1 learns it follows n2 now
	s.until("x settles", time.Second, func() bool { d, _ := r(); return d })
	if _, err := r(); err == nil {
		s.fatalf("the fenced leader acknowledged x")
	}
	s.finish()
}

// TestSimAckWaitsForTheISR: a leader whose followers cannot fetch does not acknowledge
// acks=all; if it dies, the new leader need not have the record.
func TestSimAckWaitsForTheISR(t *testing.T) {
	ackWaitsForTheISR(newScript(t, scriptConfig(3, 3, 2, true)))
}

func ackWaitsForTheISR(s *script) {
	s.mustProduce("m1")
	s.cutLink(1, 2)
	s.cutLink(1, 3)
	r := s.produceTo(1, "x")
	s.until("n1 holds x durably", time.Second, func() bool {
		l := s.node(1).store.log(s.tp0())
		return l.LogEndOffset() == 2 && l.durable == 2
	})
	s.run(20 * time.Millisecond)
	s.crash(s.node(1), true)
	s.leaderIs(2, time.Second)
	if d, err := r(); d && err == nil {
		s.fatalf("x acknowledged without the ISR")
	}
	s.restart(s.node(1))
	s.healAll()
	s.finish()
}

// TestSimFullSyncFromLogStart: a follower whose log ends below the leader's log start
// (records deleted while it was away) starts over, empty, at the leader's log start.
func TestSimFullSyncFromLogStart(t *testing.T) {
	s := newScript(t, scriptConfig(2, 2, 1, true))
	for i := range 10 {
		s.mustProduce(fmt.Sprintf("a%d", i))
	}
	s.crash(s.node(2), true)
	s.until("the ISR is n1 alone", time.Second, func() bool { return len(s.ctrl.part(s.tp0()).isr) == 1 })
	for i := range 10 {
		s.mustProduce(fmt.Sprintf("b%d", i))
	}
	l1 := s.node(1).store.log(s.tp0())
	if _, err := l1.DeleteRecordsBefore(15); err != nil {
		t.Fatal(err)
	}
	s.restart(s.node(2))
	s.until("n2 copied from the leader's log start", 2*time.Second, func() bool {
		l2 := s.node(2).store.log(s.tp0())
		return l2.LogStartOffset() == 15 && l2.LogEndOffset() == 20
	})
	s.finish()
}

// TestSimISRShrinkAndExpand: a follower that cannot fetch leaves the ISR after
// replica.lag.time.max.ms, through AlterPartition; it rejoins once caught up. The
// stats count both.
func TestSimISRShrinkAndExpand(t *testing.T) {
	s := newScript(t, scriptConfig(3, 3, 1, false))
	s.mustProduce("m1")
	s.cutLink(1, 3)
	// A follower at the leader's end is in sync however long ago it fetched (Kafka's
	// isCaughtUp): it falls behind only once there is more to fetch.
	s.produceTo(1, "m2")
	s.until("n3 leaves the ISR", 3*simLag, func() bool {
		st := s.node(1).m.Partition(s.tp0()).State()
		return len(st.ISR) == 2 && st.PendingISR == nil && s.node(1).m.Stats().ISRShrinks == 1
	})
	s.mustProduce("m3")
	st := s.node(1).m.Stats()
	if st.ISRShrinks != 1 || st.UnderReplicated != 1 {
		t.Fatalf("stats after the shrink: %+v", st)
	}
	s.healLink(1, 3)
	s.until("n3 rejoins", time.Second, func() bool {
		st := s.node(1).m.Partition(s.tp0()).State()
		return len(st.ISR) == 3 && st.PendingISR == nil && s.node(1).m.Stats().ISRExpands == 1
	})
	if st := s.node(1).m.Stats(); st.ISRExpands != 1 || st.UnderReplicated != 0 {
		t.Fatalf("stats after the expansion: %+v", st)
	}
	s.finish()
}
