package replication

import (
	"slices"
	"testing"
	"time"
)

// TestSimReassignStaleParkedFetch: a follower at the leader's log end has a long poll
// parked on the leader when a reassignment removes it (its log deleted) and another
// adds it back, within the same leader epoch. The parked fetch completes after the
// re-addition, carrying the old log end as its fetch offset. Counted as a fetch, it
// would put the replica (whose log is now empty) in the ISR: acks=all would count on a
// replica without the records. The replica must join only once its new log has
// caught up.
func TestSimReassignStaleParkedFetch(t *testing.T) {
	for _, sessions := range []bool{true, false} {
		t.Run(map[bool]string{true: "sessions", false: "sessionless"}[sessions], func(t *testing.T) {
			cfg := scriptConfig(3, 3, 2, false)
			cfg.sessions = sessions
			s := newScript(t, cfg)
			for _, v := range []string{"m1", "m2", "m3"} {
				s.mustProduce(v)
			}
			s.until("converged, n3 long-polling on n1", time.Second, func() bool {
				return s.converged() && slices.ContainsFunc(s.node(1).srv.parked, func(pf *parkedFetch) bool { return pf.replica == 3 })
			})
			leaderEpoch := s.ctrl.part(s.tp0()).leaderEpoch
			// n3's new fetches cannot reach n1; its parked one is on n1 already.
			s.cutLink(1, 3)
			s.ctrl.reassign(s.tp0(), []int32{1, 2})
			s.until("n3 removed, its log deleted", time.Second, func() bool {
				p := s.node(1).m.Partition(s.tp0())
				return p != nil && slices.Equal(p.State().Replicas, []int32{1, 2}) &&
					s.node(3).m.Partition(s.tp0()) == nil && s.node(3).store.log(s.tp0()) == nil
			})
			if !slices.ContainsFunc(s.node(1).srv.parked, func(pf *parkedFetch) bool { return pf.replica == 3 }) {
				t.Fatalf("n3's long poll is no longer parked on n1: the scenario needs it answered after the re-addition")
			}
			s.ctrl.reassign(s.tp0(), []int32{1, 2, 3})
			s.until("n3 added back", time.Second, func() bool {
				p := s.node(1).m.Partition(s.tp0())
				return p != nil && slices.Equal(p.State().Replicas, []int32{1, 2, 3}) && s.node(3).m.Partition(s.tp0()) != nil
			})
			// The parked fetch expires (simMaxWait); n3 cannot fetch. It must stay out.
			outOfISR := func() {
				t.Helper()
				cp := s.ctrl.part(s.tp0())
				leo := int64(0)
				if l := s.node(3).store.log(s.tp0()); l != nil {
					leo = l.LogEndOffset()
				}
				hw := s.node(1).store.log(s.tp0()).HighWatermark()
				if slices.Contains(cp.isr, 3) && leo < hw {
					t.Fatalf("n3 in the ISR %v (partition epoch %d) with log end %d, the leader's HW %d\nstate: %s\nlast events:\n%s",
						cp.isr, cp.partitionEpoch, leo, hw, s.describe(), s.traceText())
				}
				if p := s.node(1).m.Partition(s.tp0()); p != nil && slices.Contains(p.State().MaximalISR, 3) && leo < hw {
					t.Fatalf("n1 counts n3 (log end %d) toward the HW %d: maximal ISR %v\nstate: %s\nlast events:\n%s",
						leo, hw, p.State().MaximalISR, s.describe(), s.traceText())
				}
			}
			s.runUntil(s.now.Add(10*simMaxWait), func() bool { outOfISR(); return false })
			s.ok()
			if s.ctrl.part(s.tp0()).leaderEpoch != leaderEpoch {
				t.Fatalf("the leader epoch moved (%d, was %d): the scenario is one leader epoch", s.ctrl.part(s.tp0()).leaderEpoch, leaderEpoch)
			}
			// Healed, n3 copies the log again and joins with it.
			s.healLink(1, 3)
			s.runUntil(s.now.Add(2*time.Second), func() bool { outOfISR(); return s.converged() })
			s.ok()
			if !s.converged() {
				t.Fatalf("not converged after the heal: %s", s.describe())
			}
			s.mustProduce("m4")
			s.finish()
		})
	}
}
