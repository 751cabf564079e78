package group

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

func tid(b byte) [16]byte { return [16]byte{15: b} }

// checkAssignment verifies what every assignor promises: each partition of a subscribed
// topic goes to exactly one member subscribed to it, and nothing else is assigned.
func checkAssignment(t *testing.T, spec *assignSpec, out map[string]assignment) {
	t.Helper()
	owner := map[tpKey]string{}
	for _, m := range spec.members {
		a, ok := out[m.id]
		if !ok {
			t.Fatalf("member %s missing from the assignment", m.id)
		}
		a.each(func(id [16]byte, p int32) {
			if !m.subscribed[id] {
				t.Fatalf("member %s got %x-%d of a topic it does not subscribe to", m.id, id[15], p)
			}
			if n, ok := spec.topics[id]; !ok || p < 0 || p >= n {
				t.Fatalf("member %s got a partition that does not exist: %x-%d", m.id, id[15], p)
			}
			k := tpKey{id, p}
			if o, dup := owner[k]; dup {
				t.Fatalf("partition %x-%d to both %s and %s", id[15], p, o, m.id)
			}
			owner[k] = m.id
		})
	}
	for id, n := range spec.topics {
		subscribed := false
		for _, m := range spec.members {
			subscribed = subscribed || m.subscribed[id]
		}
		for p := int32(0); p < n && subscribed; p++ {
			if _, ok := owner[tpKey{id, p}]; !ok {
				t.Fatalf("partition %x-%d unassigned", id[15], p)
			}
		}
	}
}

// checkBalanced: no partition could move to another member subscribed to its topic
// that has two or more fewer partitions.
func checkBalanced(t *testing.T, spec *assignSpec, out map[string]assignment) {
	t.Helper()
	for _, a := range spec.members {
		out[a.id].each(func(id [16]byte, p int32) {
			for _, b := range spec.members {
				if b.subscribed[id] && out[a.id].count()-out[b.id].count() >= 2 {
					t.Fatalf("unbalanced: %s has %d, %s has %d and subscribes to %x", a.id, out[a.id].count(), b.id, out[b.id].count(), id[15])
				}
			}
		})
	}
}

func homogeneous(n int, topics map[[16]byte]int32) *assignSpec {
	spec := &assignSpec{topics: topics}
	for i := 0; i < n; i++ {
		sub := map[[16]byte]bool{}
		for id := range topics {
			sub[id] = true
		}
		id := fmt.Sprintf("m%02d", i)
		spec.members = append(spec.members, assignMember{id: id, sortKey: id, subscribed: sub})
	}
	return spec
}

func TestRangeAssignorCoPartitions(t *testing.T) {
	spec := homogeneous(3, map[[16]byte]int32{tid(1): 7, tid(2): 7})
	out := assignRange(spec)
	checkAssignment(t, spec, out)
	for _, m := range spec.members {
		if !slicesEqual(out[m.id][tid(1)], out[m.id][tid(2)]) {
			t.Fatalf("%s: topic 1 %v, topic 2 %v", m.id, out[m.id][tid(1)], out[m.id][tid(2)])
		}
	}
	if got := out["m00"][tid(1)]; !slicesEqual(got, []int32{0, 1, 2}) {
		t.Fatalf("first member's range %v", got)
	}
	if got := out["m02"][tid(1)]; !slicesEqual(got, []int32{5, 6}) {
		t.Fatalf("last member's range %v", got)
	}
}

func slicesEqual(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestUniformAssignorSticky(t *testing.T) {
	topics := map[[16]byte]int32{tid(1): 12, tid(2): 6}
	spec := homogeneous(3, topics)
	first := assignUniform(spec)
	checkAssignment(t, spec, first)
	checkBalanced(t, spec, first)
	// The same input again moves nothing.
	for i := range spec.members {
		spec.members[i].current = first[spec.members[i].id]
	}
	again := assignUniform(spec)
	for _, m := range spec.members {
		if !again[m.id].equal(first[m.id]) {
			t.Fatalf("%s: %v then %v", m.id, first[m.id], again[m.id])
		}
	}
	// A fourth member takes exactly its share from the others; they keep the rest.
	spec2 := homogeneous(4, topics)
	for i := 0; i < 3; i++ {
		spec2.members[i].current = first[spec2.members[i].id]
	}
	next := assignUniform(spec2)
	checkAssignment(t, spec2, next)
	checkBalanced(t, spec2, next)
	moved := 0
	for i := 0; i < 3; i++ {
		id := spec2.members[i].id
		first[id].each(func(tp [16]byte, p int32) {
			if !next[id].has(tp, p) {
				moved++
			}
		})
	}
	if moved != next["m03"].count() || moved != 18/4 {
		t.Fatalf("moved %d partitions, the new member has %d", moved, next["m03"].count())
	}
}

// TestAssignorsRandom checks both assignors on seeded random subscriptions, with
// stickiness inputs from the previous round.
func TestAssignorsRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for round := 0; round < 300; round++ {
		topics := map[[16]byte]int32{}
		for i := 0; i < 1+rng.IntN(5); i++ {
			topics[tid(byte(i+1))] = int32(rng.IntN(20))
		}
		spec := &assignSpec{topics: topics}
		for i := 0; i < 1+rng.IntN(8); i++ {
			sub := map[[16]byte]bool{}
			for id := range topics {
				if rng.IntN(3) > 0 {
					sub[id] = true
				}
			}
			cur := assignment{}
			for j := 0; j < rng.IntN(6); j++ {
				cur.add(tid(byte(1+rng.IntN(6))), int32(rng.IntN(25)))
			}
			id := fmt.Sprintf("m%d", i)
			spec.members = append(spec.members, assignMember{id: id, sortKey: id, subscribed: sub, current: cur})
		}
		u := assignUniform(spec)
		checkAssignment(t, spec, u)
		checkBalanced(t, spec, u)
		checkAssignment(t, spec, assignRange(spec))
	}
}

func TestParseAssignors(t *testing.T) {
	got, err := ParseAssignors("org.apache.kafka.coordinator.group.assignor.UniformAssignor, range")
	if err != nil || len(got) != 2 || got[0] != AssignorUniform || got[1] != AssignorRange {
		t.Fatalf("%v %v", got, err)
	}
	if _, err := ParseAssignors("sticky"); err == nil {
		t.Fatal("an unknown assignor was accepted")
	}
	if _, err := ParseAssignors(" , "); err == nil {
		t.Fatal("an empty list was accepted")
	}
}
