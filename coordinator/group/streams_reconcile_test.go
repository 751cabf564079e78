package group

import (
	"testing"
)

// TestStreamsReconcileStep: one reconciliation step of a member (Kafka's streams
// CurrentAssignmentBuilder) from its tasks, its target and what the other members
// hold: revoke before assign, and tasks still held elsewhere withheld.
func TestStreamsReconcileStep(t *testing.T) {
	type holder struct {
		id, process string
		assigned    tasks
	}
	tt := func(active, standby taskSet) tasks { return tasks{active: active, standby: standby, warmup: taskSet{}} }
	for _, c := range []struct {
		name     string
		assigned tasks // the member's (process p1)
		target   tasks
		others   []holder
		owned    *tasks // what its heartbeat says it owns (nil: not said)
		want     snext
	}{
		{
			name:     "revoke first, keeping the epoch",
			assigned: tt(ts("0:0", "0:1", "0:2", "0:3"), taskSet{}),
			target:   tt(ts("0:0", "0:1"), taskSet{}),
			owned:    &tasks{active: ts("0:0", "0:1", "0:2", "0:3"), standby: taskSet{}, warmup: taskSet{}},
			want:     snext{epoch: 1, state: msUnrevoked, assigned: tt(ts("0:0", "0:1"), taskSet{}), pending: tt(ts("0:2", "0:3"), taskSet{})},
		},
		{
			name:     "tasks not reported are taken as still owned",
			assigned: tt(ts("0:0", "0:1"), taskSet{}),
			target:   tt(ts("0:0"), taskSet{}),
			want:     snext{epoch: 1, state: msUnrevoked, assigned: tt(ts("0:0"), taskSet{}), pending: tt(ts("0:1"), taskSet{})},
		},
		{
			name:     "already revoked: straight to the target epoch",
			assigned: tt(ts("0:0", "0:1"), taskSet{}),
			target:   tt(ts("0:0"), taskSet{}),
			owned:    &tasks{active: ts("0:0"), standby: taskSet{}, warmup: taskSet{}},
			want:     snext{epoch: 2, state: msStable, assigned: tt(ts("0:0"), taskSet{}), pending: newTasks()},
		},
		{
			name:     "a task another member still holds is withheld",
			assigned: tt(ts("0:0"), taskSet{}),
			target:   tt(ts("0:0", "0:1", "0:2"), taskSet{}),
			others:   []holder{{"B", "p2", tt(ts("0:1"), taskSet{})}},
			want:     snext{epoch: 2, state: msUnreleased, assigned: tt(ts("0:0", "0:2"), taskSet{}), pending: newTasks()},
		},
		{
			name:     "nothing free yet",
			assigned: newTasks(),
			target:   tt(ts("0:1"), taskSet{}),
			others:   []holder{{"B", "p2", tt(ts("0:1"), taskSet{})}},
			want:     snext{epoch: 2, state: msUnreleased, assigned: newTasks(), pending: newTasks()},
		},
		{
			name:     "an active task waits for the standby of its own process",
			assigned: newTasks(),
			target:   tt(ts("0:1"), taskSet{}),
			others:   []holder{{"B", "p1", tt(taskSet{}, ts("0:1"))}},
			want:     snext{epoch: 2, state: msUnreleased, assigned: newTasks(), pending: newTasks()},
		},
		{
			name:     "a standby waits while its process holds the task active",
			assigned: newTasks(),
			target:   tt(taskSet{}, ts("0:1")),
			others:   []holder{{"B", "p1", tt(ts("0:1"), taskSet{})}},
			want:     snext{epoch: 2, state: msUnreleased, assigned: newTasks(), pending: newTasks()},
		},
		{
			name:     "a standby of a task active on another process is free",
			assigned: newTasks(),
			target:   tt(taskSet{}, ts("0:1")),
			others:   []holder{{"B", "p2", tt(ts("0:1"), taskSet{})}},
			want:     snext{epoch: 2, state: msStable, assigned: tt(taskSet{}, ts("0:1")), pending: newTasks()},
		},
		{
			name:     "active to standby of the same task: revoke the active first",
			assigned: tt(ts("0:1"), taskSet{}),
			target:   tt(taskSet{}, ts("0:1")),
			owned:    &tasks{active: ts("0:1"), standby: taskSet{}, warmup: taskSet{}},
			want:     snext{epoch: 1, state: msUnrevoked, assigned: newTasks(), pending: tt(ts("0:1"), taskSet{})},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := &group{kind: kindStreams, st: newStreamsState()}
			st := g.st
			m := &stmember{modernMember: modernMember[tasks]{id: "A", epoch: 1, state: msStable, assigned: c.assigned, pending: newTasks()}, processID: "p1"}
			st.members["A"] = m
			st.claim(m)
			for _, o := range c.others {
				om := &stmember{modernMember: modernMember[tasks]{id: o.id, assigned: o.assigned, pending: newTasks()}, processID: o.process}
				st.members[o.id] = om
				st.claim(om)
			}
			st.target["A"] = c.target
			got := g.streamsNext(m, 1, 2, c.owned)
			if got.epoch != c.want.epoch || got.state != c.want.state || !got.assigned.equal(c.want.assigned) || !got.pending.equal(c.want.pending) {
				t.Fatalf("got %+v\nwant %+v", got, c.want)
			}
		})
	}
}
