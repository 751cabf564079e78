package controller

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/samsa-broker/samsa/coordinator/metadata"
)

// elrSim is a seeded simulation of one partition (replicas 1, 2, 3) under the
// controller's election rules at eligible.leader.replicas.version 1. The controller's
// side is the functions the controller commits (alterPartitionChange,
// FenceBrokerRecords, ControlledShutdownRecords, RegisterBrokerRecords,
// UnfenceBrokerRecords) applied to an image; the brokers' side is a model of their
// logs as lists of record ids: the leader appends, a follower fetches (truncating to
// where it agrees with the leader, then copying part or all of what it lacks), the
// leader's high watermark moves only while the ISR holds min(min.insync.replicas,
// replicas) members (the replication package's rule), a crash may lose any suffix of
// a log (a power loss), a clean shutdown loses nothing.
//
// What it checks, after every step: a leader newly elected holds every committed
// record, unless the election was an unclean one its recovery strategy allows (with
// Balanced: the last known leader, once the ISR and the ELR are empty); every running
// member of the ISR or the ELR holds them.
type elrSim struct {
	t        *testing.T
	seed     uint64
	rng      *rand.Rand
	im       *metadata.Image
	policy   PolicyFunc
	strategy RecoveryStrategy
	minISR   int
	logs     map[int32][]int
	up       map[int32]bool
	clean    map[int32]bool // a stopped broker stopped cleanly
	epoch    int64          // the last broker epoch given
	next     int            // the next record id
	// committed is the prefix of the leader's log below the high watermark: it only
	// grows, except by an unclean election.
	committed []int
	trace     []simTrace // the last steps, formatted only on failure

	elections, fromISR, fromELR, lastKnown, unclean, lostByUnclean, steps int
}

var simReplicas = []int32{1, 2, 3}

type simTrace struct {
	what      string
	p         metadata.PartitionImage
	lens      [3]int
	committed int
}

func (e simTrace) String() string {
	return fmt.Sprintf("%-28s leader %2d ISR %v ELR %v last known %v; logs %v committed %d",
		e.what, e.p.Leader, e.p.ISR, e.p.ELR, e.p.LastKnownELR, e.lens, e.committed)
}

func newELRSim(t *testing.T, seed uint64, minISR int, strategy RecoveryStrategy) *elrSim {
	s := &elrSim{t: t, seed: seed, rng: rand.New(rand.NewPCG(seed, 0x656c72)), strategy: strategy, minISR: minISR,
		logs: map[int32][]int{}, up: map[int32]bool{}, clean: map[int32]bool{}}
	s.policy = policyOf(minISR, strategy)
	s.im = withTopic(t, elrImage(t, 1, brokers(simReplicas...)...), "t",
		testPartition{replicas: slices.Clone(simReplicas), isr: slices.Clone(simReplicas), leader: 1})
	s.epoch = int64(len(simReplicas))
	for _, id := range simReplicas {
		s.up[id] = true
	}
	return s
}

func (s *elrSim) part() metadata.PartitionImage { return part(s.t, s.im, "t", 0) }

func (s *elrSim) fail(format string, args ...any) {
	s.t.Helper()
	var steps []string
	for _, e := range s.trace {
		steps = append(steps, e.String())
	}
	s.t.Fatalf("seed %d, step %d: %s\nthe last steps:\n  %s", s.seed, s.steps, fmt.Sprintf(format, args...), strings.Join(steps, "\n  "))
}

// apply commits recs, as the controller would, and checks the elections they make.
func (s *elrSim) apply(what string, recs []metadata.Record) {
	s.t.Helper()
	before := s.part()
	next, err := s.im.Apply(recs...)
	if err != nil {
		s.fail("%s: apply: %v", what, err)
	}
	s.im = next
	p := s.part()
	if len(s.trace) == 40 {
		s.trace = s.trace[1:]
	}
	s.trace = append(s.trace, simTrace{what: what, p: p, lens: s.lens(), committed: len(s.committed)})
	if p.Leader >= 0 && (p.Leader != before.Leader || p.LeaderEpoch != before.LeaderEpoch) {
		s.elected(before, p)
	}
	for _, id := range append(slices.Clone(p.ISR), p.ELR...) {
		if s.up[id] && !s.holdsCommitted(id) {
			s.fail("%s: broker %d runs in the ISR or the ELR without every committed record (%d of %d)",
				what, id, commonPrefix(s.logs[id], s.committed), len(s.committed))
		}
	}
}

func (s *elrSim) elected(before, p metadata.PartitionImage) {
	s.t.Helper()
	if p.Leader == before.Leader {
		return // the same leader in a new epoch (its ISR changed)
	}
	s.elections++
	// The ISR and the ELR were empty, or became so in this step (an ELR member that
	// registers after a crash leaves the ELR), and the last known leader is elected.
	lastKnown := len(before.ISR) == 0 && slices.Equal(before.LastKnownELR, []int32{p.Leader}) && len(p.ELR) == 0 &&
		p.LeaderRecoveryState == metadata.LeaderRecovering
	switch {
	case slices.Contains(before.ISR, p.Leader):
		s.fromISR++
	case slices.Contains(before.ELR, p.Leader):
		s.fromELR++
	case lastKnown:
		s.lastKnown++
	default:
		s.fail("broker %d elected from neither the ISR %v, the ELR %v nor as the last known leader %v",
			p.Leader, before.ISR, before.ELR, before.LastKnownELR)
	}
	if s.holdsCommitted(p.Leader) {
		return
	}
	if s.strategy == RecoveryBalanced && lastKnown {
		// Balanced's unclean election of the last known leader, which lost records in
		// a crash: allowed, and counted.
		s.unclean++
		keep := commonPrefix(s.logs[p.Leader], s.committed)
		s.lostByUnclean += len(s.committed) - keep
		s.committed = s.committed[:keep]
		return
	}
	s.fail("broker %d elected without every committed record (%d of %d; before: ISR %v ELR %v last known %v)",
		p.Leader, commonPrefix(s.logs[p.Leader], s.committed), len(s.committed), before.ISR, before.ELR, before.LastKnownELR)
}

func (s *elrSim) holdsCommitted(id int32) bool {
	return commonPrefix(s.logs[id], s.committed) == len(s.committed)
}

func (s *elrSim) lens() [3]int {
	var out [3]int
	for i, id := range simReplicas {
		out[i] = len(s.logs[id])
	}
	return out
}

func commonPrefix(a, b []int) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

// alter sends the leader's AlterPartition for isr (recovered: the leader has
// recovered, as it says once its ISR grows).
func (s *elrSim) alter(what string, isr []int32) {
	p := s.part()
	in := alterPartitionInput{brokerID: p.Leader, leaderEpoch: p.LeaderEpoch, partitionEpoch: p.PartitionEpoch, version: 2,
		recovery: p.LeaderRecoveryState}
	if len(isr) > len(p.ISR) {
		in.recovery = metadata.LeaderRecovered
	}
	for _, id := range isr {
		in.isr = append(in.isr, isrMember{id: id, epoch: -1})
	}
	rec, code := alterPartitionChange(s.im, topic(s.t, s.im, "t"), 0, in, s.policy)
	if code != nil || rec == nil {
		return // refused (a member fenced, say): the leader tries again later
	}
	s.apply(what, []metadata.Record{rec})
}

// step takes one random step.
func (s *elrSim) step() {
	s.steps++
	p := s.part()
	leader := p.Leader
	leading := leader >= 0 && s.up[leader]
	id := simReplicas[s.rng.IntN(len(simReplicas))]
	switch k := s.rng.IntN(100); {
	case k < 25 && leading: // the leader appends
		for range 1 + s.rng.IntN(3) {
			s.next++
			s.logs[leader] = append(s.logs[leader], s.next)
		}
	case k < 50 && leading && id != leader && s.up[id]: // a follower fetches
		l := s.logs[leader]
		keep := commonPrefix(s.logs[id], l)
		s.logs[id] = slices.Clone(l[:keep+s.rng.IntN(len(l)-keep+1)])
	case k < 62 && leading: // the leader's high watermark
		if len(p.ISR) < min(s.minISR, len(p.Replicas)) {
			break
		}
		hw := len(s.logs[leader])
		for _, r := range p.ISR {
			hw = min(hw, commonPrefix(s.logs[r], s.logs[leader]))
		}
		if hw > len(s.committed) {
			if commonPrefix(s.logs[leader], s.committed) != len(s.committed) {
				s.fail("the leader's high watermark passes %d over a log without every committed record", hw)
			}
			s.committed = slices.Clone(s.logs[leader][:hw])
		}
	case k < 70 && leading && id != leader && slices.Contains(p.ISR, id) &&
		(!s.up[id] || len(s.logs[id]) < len(s.logs[leader])): // the leader shrinks the ISR
		s.alter(fmt.Sprintf("shrink %d", id), without(p.ISR, id))
	case k < 80 && leading && !slices.Contains(p.ISR, id) && s.up[id] &&
		slices.Equal(s.logs[id], s.logs[leader]): // the leader expands it
		s.alter(fmt.Sprintf("expand %d", id), append(slices.Clone(p.ISR), id))
	case k < 87 && s.up[id]: // a crash: fenced once its session expires
		s.up[id], s.clean[id] = false, false
		s.apply(fmt.Sprintf("crash %d", id), FenceBrokerRecords(s.im, id, s.policy))
	case k < 92 && s.up[id]: // a clean shutdown
		s.up[id], s.clean[id] = false, true
		s.apply(fmt.Sprintf("controlled shutdown %d", id), ControlledShutdownRecords(s.im, id, s.policy))
		s.apply(fmt.Sprintf("stopped %d", id), FenceBrokerRecords(s.im, id, s.policy))
	case !s.up[id]: // a restart
		how := "clean"
		if !s.clean[id] {
			how = "unclean"
			// A power loss: what was not flushed is gone.
			s.logs[id] = s.logs[id][:s.rng.IntN(len(s.logs[id])+1)]
		}
		s.epoch++
		b, _ := s.im.Broker(id)
		reg := &metadata.RegisterBrokerRecord{ID: id, Epoch: s.epoch, Fenced: true, Endpoints: b.Endpoints}
		s.apply(fmt.Sprintf("register %d (%s)", id, how), RegisterBrokerRecords(s.im, reg, s.policy, s.clean[id]))
		s.up[id] = true
		s.apply(fmt.Sprintf("unfence %d", id), UnfenceBrokerRecords(s.im, id, s.policy))
	}
}

// TestELRSimulation runs elrSim over seeded schedules of 300 steps: min.insync.replicas
// 2 and 3, strategies None and Balanced. With None no leader is ever elected without
// every committed record; with Balanced only the last known leader after a crash that
// lost records is (an unclean election, counted). 25 seeds per case; SAMSA_LONG=1
// runs 2,000 and SAMSA_ELR_SEEDS=n n; a failure prints its seed and last steps.
func TestELRSimulation(t *testing.T) {
	seeds := 25
	if os.Getenv("SAMSA_LONG") != "" {
		seeds = 2000
	}
	if v, err := strconv.Atoi(os.Getenv("SAMSA_ELR_SEEDS")); err == nil && v > 0 {
		seeds = v
	}
	for _, tc := range []struct {
		minISR   int
		strategy RecoveryStrategy
		name     string
	}{{2, RecoveryNone, "None"}, {2, RecoveryBalanced, "Balanced"}, {3, RecoveryNone, "None"}, {3, RecoveryBalanced, "Balanced"}} {
		t.Run(fmt.Sprintf("min.insync.replicas=%d/%s", tc.minISR, tc.name), func(t *testing.T) {
			var total elrSim
			committed := 0
			for seed := range uint64(seeds) {
				s := newELRSim(t, seed, tc.minISR, tc.strategy)
				for range 300 {
					s.step()
				}
				total.steps += s.steps
				total.elections += s.elections
				total.fromISR += s.fromISR
				total.fromELR += s.fromELR
				total.lastKnown += s.lastKnown
				total.unclean += s.unclean
				total.lostByUnclean += s.lostByUnclean
				committed += len(s.committed)
			}
			if tc.strategy == RecoveryNone && total.lastKnown > 0 {
				t.Fatalf("%d elections of the last known leader with None", total.lastKnown)
			}
			if total.fromELR == 0 {
				t.Fatalf("no election from the ELR in %d seeds: the schedule does not reach it", seeds)
			}
			t.Logf("%d seeds, %d steps: %d elections (%d from the ISR, %d from the ELR, %d of the last known leader, %d of them without every committed record, losing %d), %d records committed at the ends",
				seeds, total.steps, total.elections, total.fromISR, total.fromELR, total.lastKnown, total.unclean, total.lostByUnclean, committed)
		})
	}
}
