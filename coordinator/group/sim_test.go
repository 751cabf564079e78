package group

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// simMember is a client model: it joins, syncs, heartbeats, commits, leaves or dies
// at random, and follows the coordinator's error codes as a Kafka client does.
type simMember struct {
	idx      int
	instance *string
	id       string
	gen      int32
	alive    bool
	joining  bool // a JoinGroup is outstanding
	syncing  bool // a SyncGroup is outstanding
	stable   bool
	assigned string
	calls    int // outstanding callbacks
}

// TestSimulation drives seeded random schedules of members through the coordinator
// on a fake clock and checks the group's invariants after every step. A failing
// seed replays with SAMSA_SIM_SEED=<seed>.
func TestSimulation(t *testing.T) {
	seeds := []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
	if s := os.Getenv("SAMSA_SIM_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		seeds = []uint64{n}
	}
	steps := 400
	if !testing.Short() && os.Getenv("SAMSA_SIM_LONG") != "" {
		steps = 20000
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) { simulate(t, seed, steps) })
	}
}

func simulate(t *testing.T, seed uint64, steps int) {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	h := newHarness(t, func(c *Config) {
		c.InitialRebalanceDelay = time.Duration(rng.IntN(2)) * time.Second
	})
	var ms []*simMember
	for i := 0; i < 6; i++ {
		m := &simMember{idx: i}
		if i%3 == 0 {
			m.instance = strp(fmt.Sprint("static-", i))
		}
		ms = append(ms, m)
	}
	var lastGen int32
	answered := map[string]int{}

	var join func(m *simMember)
	join = func(m *simMember) {
		if m.joining || m.syncing {
			return
		}
		m.joining, m.stable = true, false
		m.calls++
		req := kmsg.NewPtrJoinGroupRequest()
		req.Version, req.Group, req.MemberID, req.InstanceID = 9, "g", m.id, m.instance
		req.ProtocolType = "consumer"
		req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 10_000, 15_000
		req.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: consumerMeta("t")}}
		h.c.JoinGroup(req, fmt.Sprint("c", m.idx), "/h", func(r *kmsg.JoinGroupResponse) {
			m.calls--
			m.joining = false
			answered["join"]++
			switch r.ErrorCode {
			case 0:
				m.id, m.gen = r.MemberID, r.Generation
				if r.Generation < lastGen {
					t.Errorf("seed %d: join answered generation %d after %d", seed, r.Generation, lastGen)
				}
				if r.LeaderID == r.MemberID && len(r.Members) == 0 && !r.SkipAssignment {
					t.Errorf("seed %d: leader answered without members", seed)
				}
				m.syncing = true
				m.calls++
				sreq := kmsg.NewPtrSyncGroupRequest()
				sreq.Version, sreq.Group, sreq.MemberID, sreq.Generation, sreq.InstanceID = 5, "g", m.id, m.gen, m.instance
				if !r.SkipAssignment {
					for _, o := range r.Members {
						sreq.GroupAssignment = append(sreq.GroupAssignment, kmsg.SyncGroupRequestGroupAssignment{
							MemberID: o.MemberID, MemberAssignment: []byte(fmt.Sprintf("%s@%d", o.MemberID, r.Generation)),
						})
					}
				}
				gen := m.gen
				h.c.SyncGroup(sreq, func(s *kmsg.SyncGroupResponse) {
					m.calls--
					m.syncing = false
					answered["sync"]++
					if s.ErrorCode == 0 {
						m.stable = true
						m.assigned = string(s.MemberAssignment)
						want := fmt.Sprintf("%s@", m.id)
						if len(m.assigned) > 0 && (len(m.assigned) < len(want) || m.assigned[:len(want)] != want) {
							// a static member keeps the assignment made for its old id
							if m.instance == nil {
								t.Errorf("seed %d: member %s got assignment %q (generation %d)", seed, m.id, m.assigned, gen)
							}
						}
					}
				})
			case kerr.MemberIDRequired.Code:
				m.id = r.MemberID
				join(m)
			case kerr.UnknownMemberID.Code, kerr.FencedInstanceID.Code:
				m.id, m.gen = "", -1
			}
		})
	}

	checkInvariants := func(step int) {
		g, _ := h.c.lookup("g", false)
		if g == nil {
			return
		}
		g.mu.Lock()
		defer g.mu.Unlock()
		fail := func(format string, args ...any) {
			t.Fatalf("seed %d step %d: %s", seed, step, fmt.Sprintf(format, args...))
		}
		if g.generation < lastGen {
			fail("generation went from %d to %d", lastGen, g.generation)
		}
		lastGen = g.generation
		if g.state == stateStable || g.state == stateCompletingRebalance {
			if g.members[g.leader] == nil {
				fail("leader %q is not a member in %v", g.leader, g.state)
			}
			if g.protocol == "" {
				fail("no protocol in %v", g.state)
			}
		}
		if g.state == stateEmpty && len(g.members) != 0 {
			fail("Empty with %d members", len(g.members))
		}
		for inst, id := range g.static {
			if m := g.members[id]; m == nil || m.instanceID == nil || *m.instanceID != inst {
				fail("static %q -> %q inconsistent", inst, id)
			}
		}
		for id, m := range g.members {
			if m.id != id {
				fail("member keyed %q has id %q", id, m.id)
			}
			if m.instanceID != nil && g.static[*m.instanceID] != id {
				fail("member %q not in static map", id)
			}
		}
	}

	for step := 0; step < steps; step++ {
		m := ms[rng.IntN(len(ms))]
		switch op := rng.IntN(10); {
		case op < 3: // start or rejoin
			if !m.alive {
				m.alive = true
				if m.instance == nil {
					m.id = ""
				}
			}
			join(m)
		case op < 6: // heartbeat
			if m.alive && m.id != "" && !m.joining {
				switch code := h.heartbeat("g", m.id, m.gen, m.instance); code {
				case kerr.RebalanceInProgress.Code:
					join(m)
				case kerr.UnknownMemberID.Code, kerr.FencedInstanceID.Code:
					m.id, m.gen = "", -1
					join(m)
				case kerr.IllegalGeneration.Code:
					join(m)
				}
			}
		case op < 7: // commit
			if m.alive && m.id != "" && m.stable {
				switch code := h.commit("g", m.id, m.gen, "t", int32(m.idx), int64(step), ""); code {
				case 0, kerr.RebalanceInProgress.Code, kerr.IllegalGeneration.Code, kerr.UnknownMemberID.Code, kerr.FencedInstanceID.Code:
				default:
					t.Fatalf("seed %d: commit: %v", seed, kerr.ErrorForCode(code))
				}
			}
		case op < 8: // leave, or die silently
			if m.alive && m.id != "" && !m.joining && !m.syncing {
				if rng.IntN(2) == 0 {
					req := kmsg.NewPtrLeaveGroupRequest()
					req.Version, req.Group = 5, "g"
					req.Members = []kmsg.LeaveGroupRequestMember{{MemberID: m.id, InstanceID: m.instance}}
					h.c.LeaveGroup(req)
				}
				m.alive, m.stable = false, false
				if m.instance == nil {
					m.id = ""
				}
			}
		default:
			h.clock.Advance(time.Duration(rng.IntN(4000)) * time.Millisecond)
		}
		checkInvariants(step)
	}
	// Liveness: when every member is alive and follows the protocol, the group
	// converges to Stable with all of them in one generation.
	for _, m := range ms {
		if !m.alive {
			m.alive = true
			if m.instance == nil {
				m.id = ""
			}
		}
	}
	converged := false
	for round := 0; round < 300 && !converged; round++ {
		h.clock.Advance(time.Second)
		for _, m := range ms {
			if m.id == "" {
				join(m)
				continue
			}
			if m.joining || m.syncing {
				continue
			}
			switch code := h.heartbeat("g", m.id, m.gen, m.instance); code {
			case 0:
			case kerr.UnknownMemberID.Code, kerr.FencedInstanceID.Code:
				m.id, m.gen = "", -1
				join(m)
			default:
				join(m)
			}
		}
		d := h.describe("g")
		converged = d.State == "Stable" && len(d.Members) == len(ms)
		for _, m := range ms {
			converged = converged && m.stable && m.gen == lastGen && !m.joining && !m.syncing
		}
		checkInvariants(steps + round)
	}
	if !converged {
		t.Fatalf("seed %d: group did not converge: %+v", seed, h.describe("g"))
	}
	t.Logf("seed %d: %d joins and %d syncs answered, generation %d", seed, answered["join"], answered["sync"], lastGen)
	// Everyone stops; the clock runs until the group is empty: every parked call
	// must have been answered.
	for _, m := range ms {
		m.alive = false
	}
	h.clock.Advance(10 * time.Minute)
	checkInvariants(steps)
	for _, m := range ms {
		if m.calls != 0 {
			t.Errorf("seed %d: member %d has %d unanswered calls", seed, m.idx, m.calls)
		}
	}
	if d := h.describe("g"); d.State != "Empty" && d.State != "Dead" {
		t.Errorf("seed %d: group %s after all members stopped", seed, d.State)
	}
}
