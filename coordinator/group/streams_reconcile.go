package group

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
)

// The target assignment of a streams group and each member's reconciliation towards it
// (Kafka's streams TargetAssignmentBuilder and CurrentAssignmentBuilder):
//
//	target       group epoch > assignment epoch -> the sticky assignor over the members
//	             (their process and previous target) and the configured subtopologies
//	             (no tasks while the topology is not ready); TargetMember records for
//	             the members whose target changed, then TargetMetadata.
//	reconcile    the member's tasks move towards its target, role by role (active,
//	             standby, warm-up): first it revokes what it must give up
//	             (UNREVOKED_TASKS, same epoch) until its heartbeat no longer lists those
//	             tasks; then it moves to the target's epoch with what it keeps plus the
//	             tasks that are free (UNRELEASED_TASKS while one is not, else STABLE).
//
// A task is not free for a member (unreleased) while:
//
//	active  another member holds it active, or the member's process still holds it as
//	        a standby or warm-up (the state must move first);
//	standby the member's process holds it active, standby or warm-up.

// computeStreamsTargetLocked computes the target assignment of the group epoch.
func (g *group) computeStreamsTargetLocked(recs *[]Record) {
	st := g.st
	ids := st.sortedIDs()
	var out map[string]tasks
	if st.configured.ready() {
		spec := &stickySpec{standbys: st.settings.NumStandbyReplicas}
		for _, s := range st.topology.Subtopologies {
			spec.subs = append(spec.subs, stickySub{id: s.ID, tasks: st.configured.subs[s.ID].tasks, stateful: len(s.StateChangelogTopics) > 0})
		}
		for _, id := range ids {
			spec.members = append(spec.members, stickyMember{id: id, process: st.members[id].processID, prev: st.targetOf(id)})
		}
		out = assignTasks(spec)
	}
	st.installTargetLocked(g, ids, func(id string) tasks {
		if a, ok := out[id]; ok {
			return a
		}
		return newTasks()
	}, recs)
}

// targetOf is a member's target, empty when it has none yet.
func (st *streamsState) targetOf(id string) tasks {
	if t, ok := st.target[id]; ok {
		return t
	}
	return newTasks()
}

// snext is a streams-group member's reconciled state.
type snext = reconciled[tasks]

// reconcileStreamsLocked moves m towards its target and records the change. owned is
// what the member's heartbeat says it owns (nil: not said). A member in an unknown
// state is fenced unless it owns nothing.
func (g *group) reconcileStreamsLocked(m *stmember, owned *tasks, recs *[]Record) (int16, string) {
	st := g.st
	stillOwns := func(t tasks) bool { return owned == nil || owned.intersects(t) }
	next := func(epoch int32) snext { return g.streamsNext(m, epoch, st.assignmentEpoch, owned) }
	if st.reconcileLocked(g, m, stillOwns, owned != nil && owned.empty(), next, recs) {
		return kerr.FencedMemberEpoch.Code, "The streams group member is in a unknown state. The member must abandon all its tasks and rejoin."
	}
	return 0, ""
}

// streamsNext is the reconciliation step from m's assigned tasks at epoch towards its
// target at the target epoch te.
func (g *group) streamsNext(m *stmember, epoch, te int32, owned *tasks) snext {
	target := g.st.targetOf(m.id)
	keep, revoke, add := newTasks(), newTasks(), newTasks()
	unreleased := false
	cur, tgt := m.assigned.roles(), target.roles()
	keeps, revokes, adds := keep.roles(), revoke.roles(), add.roles()
	for role := range cur {
		cur[role].each(func(t taskID) {
			if tgt[role].has(t.sub, t.p) {
				keeps[role].add(t.sub, t.p)
			} else {
				revokes[role].add(t.sub, t.p)
			}
		})
		tgt[role].each(func(t taskID) {
			if keeps[role].has(t.sub, t.p) {
				return
			}
			if g.streamsUnreleased(role, t, m) {
				unreleased = true
				return
			}
			adds[role].add(t.sub, t.p)
		})
	}
	revoking := !revoke.empty() && (owned == nil || owned.intersects(revoke))
	if !revoking {
		for role, s := range adds {
			s.each(func(t taskID) { keeps[role].add(t.sub, t.p) })
		}
	}
	return nextReconciled(epoch, te, keep, revoke, newTasks(), revoking, unreleased)
}

// streamsUnreleased reports whether task t of role (0 active, 1 standby, 2 warm-up) of
// m's target is still held where m may not take it yet.
func (g *group) streamsUnreleased(role int, t taskID, m *stmember) bool {
	st := g.st
	onProcess := func(ids []string) bool {
		for _, id := range ids {
			if o := st.members[id]; o != nil && o.processID == m.processID {
				return true
			}
		}
		return false
	}
	owner, held := st.activeOwner[t]
	if role == 0 {
		if held {
			return true
		}
	} else if held && st.members[owner] != nil && st.members[owner].processID == m.processID {
		return true
	}
	return onProcess(st.standbyOwners[t]) || onProcess(st.warmupOwners[t])
}

// setStreamsAssignmentLocked installs m's new epochs, state and tasks, keeping the
// owners maps (invariant 2). A change of the tasks of a member with a user endpoint
// changes the endpoint-to-partitions map.
func (g *group) setStreamsAssignmentLocked(m *stmember, epoch, prev int32, state memberState, assigned, pending tasks) {
	st := g.st
	st.release(m)
	if m.endpoint != nil && !assigned.equal(m.assigned) {
		st.endpointEpoch++
	}
	m.epoch, m.prevEpoch, m.state = epoch, prev, state
	m.assigned, m.pending = assigned, pending
	st.claim(m)
}

// claim records m's assigned and pending tasks in the owners maps.
func (st *streamsState) claim(m *stmember) {
	for _, t := range []tasks{m.assigned, m.pending} {
		t.active.each(func(id taskID) { st.activeOwner[id] = m.id })
		t.standby.each(func(id taskID) { st.standbyOwners[id] = appendOnce(st.standbyOwners[id], m.id) })
		t.warmup.each(func(id taskID) { st.warmupOwners[id] = appendOnce(st.warmupOwners[id], m.id) })
	}
}

// release removes m's tasks from the owners maps.
func (st *streamsState) release(m *stmember) {
	drop := func(owners map[taskID][]string, id taskID) {
		ids := slices.DeleteFunc(owners[id], func(s string) bool { return s == m.id })
		if len(ids) == 0 {
			delete(owners, id)
			return
		}
		owners[id] = ids
	}
	for _, t := range []tasks{m.assigned, m.pending} {
		t.active.each(func(id taskID) {
			if st.activeOwner[id] == m.id {
				delete(st.activeOwner, id)
			}
		})
		t.standby.each(func(id taskID) { drop(st.standbyOwners, id) })
		t.warmup.each(func(id taskID) { drop(st.warmupOwners, id) })
	}
}

func appendOnce(ids []string, id string) []string {
	if slices.Contains(ids, id) {
		return ids
	}
	return append(ids, id)
}
