package group

import (
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// simLong reports whether the long campaigns run (SAMSA_LONG=1; SAMSA_SIM_LONG, the
// classic simulation's switch, too).
func simLong() bool {
	return !testing.Short() && (os.Getenv("SAMSA_LONG") != "" || os.Getenv("SAMSA_SIM_LONG") != "")
}

func simSeeds(t *testing.T, n int) []uint64 {
	if s := os.Getenv("SAMSA_SIM_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return []uint64{v}
	}
	if simLong() {
		n *= 10
	}
	seeds := make([]uint64, n)
	for i := range seeds {
		seeds[i] = uint64(i + 1)
	}
	return seeds
}

// cgModel is one consumer process of the simulation: a client that follows the
// protocol, and may be slow to revoke, leave, crash and come back.
type cgModel struct {
	c       *cgClient
	alive   bool
	n       int // incarnation, for fresh member ids
	revoke  int // steps left before it releases partitions it was told to give up
	keepers assignment
}

// TestConsumerSimulation drives seeded random schedules of consumer-protocol clients
// (joins, heartbeats with and without their partitions, slow revocations, leaves,
// static leaves, crashes, topic changes, coordinator reloads, offset commits) through
// the coordinator on a fake clock, and checks after every step that no two members the
// coordinator knows can both own a partition; at the end, with everyone heartbeating,
// that the group is Stable with every partition owned by exactly one live member. A
// failing seed replays with SAMSA_SIM_SEED=<seed>; SAMSA_LONG=1 runs ten times the seeds
// and steps.
func TestConsumerSimulation(t *testing.T) {
	steps := 400
	if simLong() {
		steps = 10000
	}
	for _, seed := range simSeeds(t, 12) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) { simulateConsumer(t, seed, steps) })
	}
}

func simulateConsumer(t *testing.T, seed uint64, steps int) {
	rng := rand.New(rand.NewPCG(seed, seed*0x9e3779b97f4a7c15+1))
	h := newHarness(t, func(c *Config) { c.ConsumerSessionTimeout = 20 * time.Second })
	topics := map[string]int32{"a": int32(1 + rng.IntN(6)), "b": int32(rng.IntN(5)), "c": 3}
	version := uint64(1)
	h.setTopics(version, topics)
	var ms []*cgModel
	assignor := []*string{nil, strp("uniform"), strp("range")}[rng.IntN(3)]
	for i := 0; i < 5; i++ {
		m := &cgModel{alive: true}
		m.c = h.cgClient("g", fmt.Sprintf("m%d-0", i), "a", "b")
		m.c.assignor = assignor
		if i%2 == 0 {
			m.c.instance = strp(fmt.Sprint("inst-", i))
		}
		if i == 4 {
			m.c.names, m.c.regex = nil, strp("[ab]|d")
		}
		ms = append(ms, m)
	}
	cg := func() *consumerState {
		h.c.mu.Lock()
		defer h.c.mu.Unlock()
		if g := h.c.mu.groups["g"]; g != nil && g.kind == kindConsumer {
			return g.cg
		}
		return nil
	}
	heartbeat := func(m *cgModel, full bool) {
		before := m.c.owned.clone()
		req := m.c.request(full || m.c.epoch == 0 || rng.IntN(3) == 0)
		r := m.c.send(req)
		switch r.ErrorCode {
		case 0:
		case kerr.FencedMemberEpoch.Code:
			m.c.epoch, m.c.owned, m.keepers = 0, assignment{}, nil
			return
		case kerr.UnknownMemberID.Code:
			m.n++
			m.c.id = fmt.Sprintf("m%s-%d", m.c.id[1:2], m.n)
			m.c.epoch, m.c.owned, m.keepers = 0, assignment{}, nil
			return
		case kerr.UnreleasedInstanceID.Code, kerr.FencedInstanceID.Code:
			if r.ErrorCode == kerr.FencedInstanceID.Code {
				m.alive = false // a zombie: its instance was taken over
				m.c.owned = assignment{}
			}
			return
		default:
			t.Fatalf("seed %d: heartbeat of %s: %d %v", seed, m.c.id, r.ErrorCode, r.ErrorMessage)
		}
		m.c.id, m.c.epoch = *r.MemberID, r.MemberEpoch
		if r.Assignment == nil {
			return
		}
		next := assignment{}
		for _, tp := range r.Assignment.Topics {
			for _, p := range tp.Partitions {
				next.add(tp.TopicID, p)
			}
		}
		// Partitions it must give up: released now, or held a while (a slow
		// OnPartitionsRevoked).
		lost := assignment{}
		before.each(func(id [16]byte, p int32) {
			if !next.has(id, p) {
				lost.add(id, p)
			}
		})
		m.c.owned = next
		if len(lost) > 0 && rng.IntN(3) == 0 {
			m.keepers, m.revoke = lost, 1+rng.IntN(4)
			lost.each(m.c.owned.add)
		}
	}
	check := func(step int) {
		s := cg()
		if s == nil {
			return
		}
		if s.assignmentEpoch > s.epoch {
			t.Fatalf("seed %d step %d: assignment epoch %d > group epoch %d", seed, step, s.assignmentEpoch, s.epoch)
		}
		seen := map[tpKey]string{}
		for id, m := range s.members {
			if m.epoch > s.assignmentEpoch && m.epoch != staticLeaveEpoch {
				t.Fatalf("seed %d step %d: member %s epoch %d > assignment epoch %d", seed, step, id, m.epoch, s.assignmentEpoch)
			}
			for _, a := range []assignment{m.assigned, m.pending} {
				a.each(func(tid [16]byte, p int32) {
					k := tpKey{tid, p}
					if o, dup := seen[k]; dup {
						t.Fatalf("seed %d step %d: partition %v held by %s and %s", seed, step, k, o, id)
					}
					seen[k] = id
					if s.owners[k] != id {
						t.Fatalf("seed %d step %d: owners[%v] = %q, want %s", seed, step, k, s.owners[k], id)
					}
				})
			}
		}
		if len(seen) != len(s.owners) {
			t.Fatalf("seed %d step %d: %d owners entries for %d held partitions", seed, step, len(s.owners), len(seen))
		}
		// What a live client owns, the coordinator knows it may own.
		for _, m := range ms {
			sm := s.members[m.c.id]
			if !m.alive || sm == nil || m.c.epoch == 0 {
				continue
			}
			m.c.owned.each(func(tid [16]byte, p int32) {
				if !sm.assigned.has(tid, p) && !sm.pending.has(tid, p) {
					t.Fatalf("seed %d step %d: client %s owns %x-%d the coordinator does not know it holds (assigned %v pending %v)", seed, step, m.c.id, tid[15], p, sm.assigned, sm.pending)
				}
			})
		}
	}
	for step := 0; step < steps; step++ {
		m := ms[rng.IntN(len(ms))]
		switch x := rng.IntN(100); {
		case x < 55:
			if m.alive {
				if m.revoke > 0 {
					if m.revoke--; m.revoke == 0 {
						m.keepers.each(m.c.owned.remove)
						m.keepers = nil
					}
				}
				heartbeat(m, false)
			}
		case x < 60:
			if m.alive && m.c.epoch != 0 {
				if r := m.c.leave(); r.ErrorCode == 0 {
					m.keepers = nil
					if m.c.instance == nil {
						m.n++
						m.c.id = fmt.Sprintf("m%s-%d", m.c.id[1:2], m.n)
					}
				}
			}
		case x < 65:
			if m.alive {
				m.alive, m.c.owned, m.keepers = false, assignment{}, nil // crash: its partitions go with it
			}
		case x < 72:
			if !m.alive {
				m.alive = true
				m.n++
				m.c.id, m.c.epoch = fmt.Sprintf("m%s-%d", m.c.id[1:2], m.n), 0
			}
		case x < 85:
			h.clock.Advance(time.Duration(1+rng.IntN(5)) * time.Second)
		case x < 88:
			version++
			switch rng.IntN(3) {
			case 0:
				topics["a"]++
			case 1:
				if _, ok := topics["d"]; ok {
					delete(topics, "d")
				} else {
					topics["d"] = int32(1 + rng.IntN(3))
				}
			case 2:
				topics["b"] = int32(rng.IntN(5))
			}
			h.setTopics(version, topics)
		case x < 90:
			// The coordinator moves: what the new one loads from __consumer_offsets is
			// exactly the group the old one had.
			before := cgSnapshot(cg())
			h.start(func(c *Config) { c.ConsumerSessionTimeout = 20 * time.Second })
			h.setTopics(version, topics)
			if after := cgSnapshot(cg()); after != before {
				t.Fatalf("seed %d step %d: the reloaded group differs from the one written\nbefore: %s\nafter:  %s", seed, step, before, after)
			}
		default:
			if !m.alive || m.c.epoch <= 0 || len(m.c.owned) == 0 {
				continue
			}
			var tp tpKey
			m.c.owned.each(func(id [16]byte, p int32) { tp = tpKey{id, p} })
			name := ""
			for n := range topics {
				if topicID(n) == tp.id {
					name = n
				}
			}
			if name == "" {
				continue
			}
			s := cg()
			code := h.commitWith(commitReq("g", m.c.id, m.c.epoch, 9, name, tp.p, int64(step)))
			if s != nil && s.members[m.c.id] != nil && s.members[m.c.id].epoch == m.c.epoch && code != 0 {
				t.Fatalf("seed %d step %d: commit by current member %s at its epoch: %d", seed, step, m.c.id, code)
			}
		}
		check(step)
	}
	// Quiesce: everyone comes back and heartbeats promptly; the group must settle.
	for _, m := range ms {
		if !m.alive {
			m.alive = true
			m.n++
			m.c.id, m.c.epoch = fmt.Sprintf("m%s-%d", m.c.id[1:2], m.n), 0
		}
		m.keepers.each(m.c.owned.remove)
		m.keepers, m.revoke = nil, 0
	}
	h.clock.Advance(25 * time.Second) // static members crashed earlier expire
	for round := 0; round < 40; round++ {
		for _, m := range ms {
			heartbeat(m, true)
			m.keepers.each(m.c.owned.remove)
			m.keepers = nil
			check(steps + round)
		}
	}
	s := cg()
	if s == nil || s.stateName() != "Stable" {
		t.Fatalf("seed %d: group did not settle: %+v", seed, s)
	}
	owned := map[tpKey]string{}
	for _, m := range ms {
		m.c.owned.each(func(id [16]byte, p int32) {
			if o, dup := owned[tpKey{id, p}]; dup {
				t.Fatalf("seed %d: %x-%d owned by %s and %s", seed, id[15], p, o, m.c.id)
			}
			owned[tpKey{id, p}] = m.c.id
		})
	}
	want := 0
	for n, parts := range topics {
		if n == "a" || n == "b" || n == "d" {
			want += int(parts)
		}
	}
	if len(owned) != want {
		t.Fatalf("seed %d: %d partitions owned after settling, want %d (%v)", seed, len(owned), want, topics)
	}
}

// cgSnapshot renders what a consumer group's records must carry (group and assignment
// epochs, subscription metadata, regex resolutions, and per member its metadata,
// epochs, state, partitions and target) in a canonical order, for comparison across a
// reload. Memory-only state (timers, per-partition assignment epochs) is left out.
func cgSnapshot(s *consumerState) string {
	if s == nil {
		return "<no consumer group>"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "epoch=%d assignment=%d", s.epoch, s.assignmentEpoch)
	names := make([]string, 0, len(s.subMeta))
	for n := range s.subMeta {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(&b, " topic(%s %x %d)", n, s.subMeta[n].TopicID[15], s.subMeta[n].NumPartitions)
	}
	res := make([]string, 0, len(s.regexes))
	for re := range s.regexes {
		res = append(res, re)
	}
	sort.Strings(res)
	for _, re := range res {
		fmt.Fprintf(&b, " regex(%s %v)", re, s.regexes[re].topics)
	}
	ids := make([]string, 0, len(s.members))
	for id := range s.members {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	str := func(p *string) string {
		if p == nil {
			return "-"
		}
		return *p
	}
	for _, id := range ids {
		m := s.members[id]
		fmt.Fprintf(&b, " member(%s inst=%s names=%v regex=%s assignor=%s rt=%v epoch=%d prev=%d state=%d assigned=%v pending=%v",
			id, str(m.instanceID), m.names, str(m.regex), str(m.assignor), m.rebalanceTimeout, m.epoch, m.prevEpoch, m.state,
			assignmentRecordForm(m.assigned), assignmentRecordForm(m.pending))
		if tgt, ok := s.target[id]; ok {
			fmt.Fprintf(&b, " target=%v", assignmentRecordForm(tgt))
		}
		b.WriteString(")")
	}
	if len(s.static) > 0 {
		insts := make([]string, 0, len(s.static))
		for inst, id := range s.static {
			insts = append(insts, inst+"="+id)
		}
		sort.Strings(insts)
		fmt.Fprintf(&b, " static=%v", insts)
	}
	return b.String()
}
