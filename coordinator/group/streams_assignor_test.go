package group

import (
	"fmt"
	"math/rand"
	"slices"
	"testing"
)

// ts builds a task set from "sub:p" pairs.
func ts(pairs ...string) taskSet {
	s := taskSet{}
	for _, pr := range pairs {
		var sub string
		var p int32
		if _, err := fmt.Sscanf(pr, "%1s:%d", &sub, &p); err != nil {
			panic(pr)
		}
		s.add(sub, p)
	}
	return s
}

// checkTaskAssignment checks the assignor's invariants 1, 2 and 4 (streams_assignor.go).
func checkTaskAssignment(t *testing.T, spec *stickySpec, out map[string]tasks) {
	t.Helper()
	if len(spec.members) == 0 {
		if len(out) != 0 {
			t.Fatalf("an answer without members: %v", out)
		}
		return
	}
	process := map[string]string{}
	for _, m := range spec.members {
		process[m.id] = m.process
		if _, ok := out[m.id]; !ok {
			t.Fatalf("member %s has no entry", m.id)
		}
	}
	activeOn := map[taskID]string{}
	standbyProcs := map[taskID]map[string]bool{}
	minA, maxA := 1<<30, -1
	for id, a := range out {
		if a.warmup.count() != 0 {
			t.Fatalf("%s got warm-up tasks %v", id, a.warmup)
		}
		n := a.active.count()
		minA, maxA = min(minA, n), max(maxA, n)
		a.active.each(func(tk taskID) {
			if o, dup := activeOn[tk]; dup {
				t.Fatalf("task %v active on %s and %s", tk, o, id)
			}
			activeOn[tk] = id
		})
		a.standby.each(func(tk taskID) {
			if standbyProcs[tk] == nil {
				standbyProcs[tk] = map[string]bool{}
			}
			if standbyProcs[tk][process[id]] {
				t.Fatalf("two standbys of %v on process %s", tk, process[id])
			}
			standbyProcs[tk][process[id]] = true
		})
	}
	total := 0
	procs := map[string]bool{}
	for _, m := range spec.members {
		procs[m.process] = true
	}
	for _, s := range spec.subs {
		for p := int32(0); p < s.tasks; p++ {
			tk := taskID{s.id, p}
			total++
			owner, ok := activeOn[tk]
			if !ok {
				t.Fatalf("task %v not assigned", tk)
			}
			if standbyProcs[tk][process[owner]] {
				t.Fatalf("task %v has a standby on its active's process %s", tk, process[owner])
			}
			want := 0
			if s.stateful {
				want = min(spec.standbys, len(procs)-1)
			}
			if got := len(standbyProcs[tk]); got != want {
				t.Fatalf("task %v has %d standbys, want %d", tk, got, want)
			}
		}
	}
	if len(activeOn) != total {
		t.Fatalf("%d active tasks for %d tasks", len(activeOn), total)
	}
	if len(out) > 0 && maxA-minA > 1 {
		t.Fatalf("active tasks unbalanced: %d to %d", minA, maxA)
	}
}

func TestStickyTaskAssignor(t *testing.T) {
	for _, c := range []struct {
		name string
		spec stickySpec
		want map[string]tasks // nil: only the invariants
	}{
		{
			name: "first assignment spreads the tasks",
			spec: stickySpec{members: []stickyMember{{id: "a", process: "p1"}, {id: "b", process: "p2"}},
				subs: []stickySub{{id: "0", tasks: 4, stateful: true}}},
			want: map[string]tasks{
				"a": {active: ts("0:0", "0:2"), standby: taskSet{}, warmup: taskSet{}},
				"b": {active: ts("0:1", "0:3"), standby: taskSet{}, warmup: taskSet{}},
			},
		},
		{
			// KIP-1071: a new member takes only what balance requires; the others keep
			// what they had.
			name: "sticky when a member joins",
			spec: stickySpec{members: []stickyMember{
				{id: "a", process: "p1", prev: tasks{active: ts("0:0", "0:1", "0:2"), standby: taskSet{}, warmup: taskSet{}}},
				{id: "b", process: "p2", prev: tasks{active: ts("0:3", "0:4", "0:5"), standby: taskSet{}, warmup: taskSet{}}},
				{id: "c", process: "p3", prev: newTasks()}},
				subs: []stickySub{{id: "0", tasks: 6}}},
			want: map[string]tasks{
				"a": {active: ts("0:0", "0:1"), standby: taskSet{}, warmup: taskSet{}},
				"b": {active: ts("0:3", "0:4"), standby: taskSet{}, warmup: taskSet{}},
				"c": {active: ts("0:2", "0:5"), standby: taskSet{}, warmup: taskSet{}},
			},
		},
		{
			// A member leaves: its tasks go where their standbys were.
			name: "standby takes over",
			spec: stickySpec{standbys: 1, members: []stickyMember{
				{id: "a", process: "p1", prev: tasks{active: ts("0:0", "0:1"), standby: ts("0:2"), warmup: taskSet{}}},
				{id: "b", process: "p2", prev: tasks{active: ts("0:3"), standby: ts("0:0", "0:1"), warmup: taskSet{}}},
			}, subs: []stickySub{{id: "0", tasks: 4, stateful: true}}},
			want: map[string]tasks{
				"a": {active: ts("0:0", "0:1"), standby: ts("0:2", "0:3"), warmup: taskSet{}},
				"b": {active: ts("0:2", "0:3"), standby: ts("0:0", "0:1"), warmup: taskSet{}},
			},
		},
		{
			name: "standbys never on the active's process",
			spec: stickySpec{standbys: 2, members: []stickyMember{
				{id: "a", process: "p1"}, {id: "b", process: "p1"}, {id: "c", process: "p2"}, {id: "d", process: "p3"}},
				subs: []stickySub{{id: "0", tasks: 5, stateful: true}, {id: "1", tasks: 3}}},
		},
		{
			name: "more standbys asked than processes",
			spec: stickySpec{standbys: 3, members: []stickyMember{{id: "a", process: "p1"}, {id: "b", process: "p2"}},
				subs: []stickySub{{id: "0", tasks: 3, stateful: true}}},
		},
		{
			name: "more members than tasks",
			spec: stickySpec{members: []stickyMember{{id: "a", process: "p1"}, {id: "b", process: "p1"}, {id: "c", process: "p2"}},
				subs: []stickySub{{id: "0", tasks: 2}}},
		},
		{
			name: "no members",
			spec: stickySpec{subs: []stickySub{{id: "0", tasks: 2}}},
			want: map[string]tasks{},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := assignTasks(&c.spec)
			checkTaskAssignment(t, &c.spec, out)
			if c.want != nil {
				for id, w := range c.want {
					if !out[id].equal(w) {
						t.Fatalf("%s: %+v, want %+v", id, out[id], w)
					}
				}
				if len(out) != len(c.want) {
					t.Fatalf("%d members in the answer, want %d", len(out), len(c.want))
				}
			}
		})
	}
}

// TestStickyTaskAssignorBalanceAcrossProcesses: with one member per process, processes
// get equal shares; a process with two members gets about twice a one-member one's.
func TestStickyTaskAssignorBalanceAcrossProcesses(t *testing.T) {
	spec := &stickySpec{members: []stickyMember{
		{id: "a1", process: "p1"}, {id: "a2", process: "p1"}, {id: "b", process: "p2"}, {id: "c", process: "p3"}},
		subs: []stickySub{{id: "0", tasks: 8}}}
	out := assignTasks(spec)
	checkTaskAssignment(t, spec, out)
	per := map[string]int{}
	for _, m := range spec.members {
		per[m.process] += out[m.id].active.count()
	}
	if per["p1"] != 4 || per["p2"] != 2 || per["p3"] != 2 {
		t.Fatalf("per process: %v", per)
	}
}

// TestStickyTaskAssignorRandomized: the invariants on random groups, and stickiness:
// re-running the assignor on its own answer moves nothing; one member leaving moves
// only that member's tasks.
func TestStickyTaskAssignorRandomized(t *testing.T) {
	rng := rand.New(rand.NewSource(1071))
	for round := 0; round < 300; round++ {
		spec := &stickySpec{standbys: rng.Intn(3)}
		nproc := 1 + rng.Intn(4)
		for i := 0; i < 1+rng.Intn(7); i++ {
			spec.members = append(spec.members, stickyMember{id: fmt.Sprintf("m%02d", i), process: fmt.Sprintf("p%d", rng.Intn(nproc)), prev: newTasks()})
		}
		for s := 0; s < 1+rng.Intn(3); s++ {
			spec.subs = append(spec.subs, stickySub{id: fmt.Sprint(s), tasks: int32(1 + rng.Intn(9)), stateful: rng.Intn(2) == 0})
		}
		out := assignTasks(spec)
		checkTaskAssignment(t, spec, out)
		// Same members, previous = this answer: nothing moves.
		again := &stickySpec{standbys: spec.standbys, subs: spec.subs}
		for _, m := range spec.members {
			again.members = append(again.members, stickyMember{id: m.id, process: m.process, prev: out[m.id]})
		}
		out2 := assignTasks(again)
		for id := range out {
			if !out[id].active.equal(out2[id].active) {
				t.Fatalf("round %d: %s moved from %v to %v on a stable group", round, id, out[id].active, out2[id].active)
			}
		}
		// One member leaves: the others keep their active tasks (they gain, never lose).
		if len(again.members) > 1 {
			gone := rng.Intn(len(again.members))
			left := &stickySpec{standbys: spec.standbys, subs: spec.subs, members: slices.Delete(slices.Clone(again.members), gone, gone+1)}
			out3 := assignTasks(left)
			checkTaskAssignment(t, left, out3)
			for _, m := range left.members {
				kept := true
				out[m.id].active.each(func(tk taskID) { kept = kept && out3[m.id].active.has(tk.sub, tk.p) })
				if !kept {
					t.Fatalf("round %d: %s lost tasks when another left: %v -> %v", round, m.id, out[m.id].active, out3[m.id].active)
				}
			}
		}
	}
}
