package quorum

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"testing/cryptotest"
	"time"

	"github.com/samsa-broker/samsa/coordinator/metadata"
)

// The membership simulation: a dynamic quorum (kraft.version 1) whose voter set
// changes while the simulation's network drops, delays, duplicates and partitions
// messages, nodes crash (losing unsynced writes) and clients propose throughout. A
// driver asks the leader, one change at a time, to add a running controller that is
// no voter, to remove a voter or a learner, and wipes the disk of a crashed node (a
// new directory id: the controller that comes back is another member; the identity
// whose disk was lost is removed later, as an operator would). Every check of the
// simulation holds at every step (one leader per term, every applied log a prefix
// of one history, images equal to the history's); and:
//
//   - a change answered successfully is in the leader's configuration then (an
//     added controller is a voter, a removed one is no member);
//   - a node whose disk was wiped never runs under the raft id of the member whose
//     disk it lost;
//   - after the chaos, the members of the configuration converge.

type simMembers struct {
	op      <-chan error // the change in flight
	opKind  voterOpKind
	opNode  int    // its node index
	opRaft  uint64 // add: the raft id the node runs under; remove: the member's
	opLead  int    // the leader it was asked of
	lost    map[uint64]bool
	stats   simMembersStats
	every   time.Duration
	timeout time.Duration
}

type simMembersStats struct {
	added, removed, wiped, failed int
}

// newMembersSim is a quiet simulation (no clients, no faults) of a dynamic quorum:
// nodes 1..initial are the format's voters (every node formatted with the same
// VotersRecord, --initial-controllers), nodes initial+1..total were formatted with
// --no-initial-controllers and wait to be added.
func newMembersSim(t testing.TB, seed uint64, initial, total int, adjust func(*simParams)) *sim {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	p := drawParams(rng, initial, time.Hour)
	adjust(&p)
	s := &sim{t: t, seed: seed, rng: rng, p: p, dynamic: true,
		history: map[uint64]histEntry{}, digests: map[uint64]uint64{}, leaders: map[uint64]int32{},
		members: &simMembers{lost: map[uint64]bool{}, every: time.Duration(100+rng.IntN(300)) * time.Millisecond, timeout: 3 * time.Second}}
	for i := 0; i < total; i++ {
		s.nodes = append(s.nodes, &simNode{id: int32(i + 1), dir: s.newDir(), st: NewMemStorage()})
	}
	var voters []metadata.QuorumVoter
	for _, n := range s.nodes[:initial] {
		voters = append(voters, simVoter(n))
	}
	boot := []metadata.Record{&metadata.FeatureLevelRecord{Name: metadata.FeatureMetadataVersion, Level: metadata.LatestMetadataVersion().Level},
		&metadata.FeatureLevelRecord{Name: metadata.FeatureKRaftVersion, Level: 1}, &metadata.VotersRecord{Voters: voters}}
	im, err := (&metadata.Image{}).Apply(boot...)
	if err != nil {
		t.Fatal(err)
	}
	s.images = map[uint64]*metadata.Image{0: {}, 1: im}
	for i, n := range s.nodes {
		if i < initial {
			n.boot = boot
		}
		s.start(i)
	}
	return s
}

// simVoter is node n as a voter of the format records.
func simVoter(n *simNode) metadata.QuorumVoter {
	return metadata.QuorumVoter{ID: n.id, DirectoryID: n.dir, RaftID: DynamicRaftID(n.id, n.dir),
		Endpoints:    []metadata.VoterEndpoint{{Name: "CONTROLLER", Host: fmt.Sprintf("node-%d", n.id), Port: 9093}},
		KRaftVersion: metadata.VersionRange{Min: 0, Max: 1}}
}

func (s *sim) newDir() metadata.UUID {
	var u metadata.UUID
	for i := range u {
		u[i] = byte(s.rng.IntN(256))
	}
	return u
}

// leaderConf returns the configuration of the leader (nil: none).
func (s *sim) leaderMembers() []Member {
	if i := s.leaderIndex(); i >= 0 {
		return s.nodes[i].q.Members()
	}
	return nil
}

// isMember reports whether node n, under the raft id it runs with, is a member of
// the leader's configuration (true while there is no leader).
func (s *sim) isMember(n *simNode) bool {
	i := s.leaderIndex()
	if i < 0 {
		return true
	}
	return n.q != nil && slices.ContainsFunc(s.nodes[i].q.Members(), func(m Member) bool { return m.RaftID == n.q.self })
}

// membersStep asks the leader for one change, or wipes a crashed node's disk.
func (s *sim) membersStep() {
	m := s.members
	defer func() {
		if !s.healed {
			s.schedule(&event{at: s.now + time.Duration(1+s.rng.Int64N(int64(m.every))), kind: evMembers})
		}
	}()
	if m.op != nil || s.healed {
		return
	}
	li := s.leaderIndex()
	if li < 0 {
		return
	}
	lead := s.nodes[li].q
	if joint(lead.cs) {
		return // raft leaves it by itself
	}
	members := lead.Members()
	var voters, learners []Member
	for _, mb := range members {
		if mb.Voter {
			voters = append(voters, mb)
		} else {
			learners = append(learners, mb)
		}
	}
	var adds, wipes []int
	for i, n := range s.nodes {
		switch {
		case n.q == nil:
			wipes = append(wipes, i)
		case !slices.ContainsFunc(voters, func(mb Member) bool { return mb.RaftID == n.q.self }):
			adds = append(adds, i)
		}
	}
	// A wiped voter's identity is lost for good: wipe one only while the voters
	// whose disks are lost stay a minority after it.
	lostVoters := 0
	for _, v := range voters {
		if m.lost[v.RaftID] {
			lostVoters++
		}
	}
	switch k := s.rng.IntN(10); {
	case k < 4 && len(adds) > 0:
		i := adds[s.rng.IntN(len(adds))]
		n := s.nodes[i]
		v := simVoter(n)
		s.tracef("members: add node %d (raft id %x) via leader %d", n.id, v.RaftID, s.nodes[li].id)
		m.op, m.opKind, m.opNode, m.opRaft, m.opLead = lead.AddVoter(v, m.timeout), opAdd, i, v.RaftID, li
	case k < 7 && len(voters) > 1:
		// Prefer the identities whose disks were lost: they are what an operator
		// removes. A live voter goes only while the lost ones stay a minority of
		// the voters left (else the quorum could never commit again, in Kafka too).
		pick := voters[s.rng.IntN(len(voters))]
		for _, v := range voters {
			if m.lost[v.RaftID] {
				pick = v
			}
		}
		if !m.lost[pick.RaftID] && 2*lostVoters >= len(voters)-1 {
			return
		}
		s.tracef("members: remove voter %d (raft id %x) via leader %d", pick.ID, pick.RaftID, s.nodes[li].id)
		m.op, m.opKind, m.opNode, m.opRaft, m.opLead = lead.RemoveVoter(pick.ID, pick.DirectoryID, m.timeout), opRemove, int(pick.ID)-1, pick.RaftID, li
	case k < 8 && len(learners) > 0:
		pick := learners[s.rng.IntN(len(learners))]
		s.tracef("members: remove learner %d (raft id %x)", pick.ID, pick.RaftID)
		m.op, m.opKind, m.opNode, m.opRaft, m.opLead = lead.RemoveVoter(pick.ID, pick.DirectoryID, m.timeout), opRemove, int(pick.ID)-1, pick.RaftID, li
	case len(wipes) > 0:
		i := wipes[s.rng.IntN(len(wipes))]
		n := s.nodes[i]
		old := DynamicRaftID(n.id, n.dir)
		if slices.ContainsFunc(voters, func(mb Member) bool { return mb.RaftID == old }) && !m.lost[old] {
			if 2*(lostVoters+1) >= len(voters) {
				return
			}
		}
		m.lost[old] = true
		n.dir, n.boot, n.st = s.newDir(), nil, NewMemStorage()
		n.checked, n.lastImage, n.lastOffset = 0, nil, 0
		m.stats.wiped++
		s.tracef("members: node %d's disk wiped (raft id %x lost); it comes back as %x", n.id, old, DynamicRaftID(n.id, n.dir))
	}
}

// pollMembers collects the change's result and checks it against the leader's
// configuration.
func (s *sim) pollMembers() {
	m := s.members
	if m.op == nil {
		return
	}
	var err error
	select {
	case err = <-m.op:
	default:
		return
	}
	m.op = nil
	if err != nil {
		m.stats.failed++
		s.tracef("members: %s of node %d failed: %v", m.opKind, m.opNode+1, err)
		return
	}
	lead := s.nodes[m.opLead].q
	in := slices.ContainsFunc(lead.Members(), func(mb Member) bool { return mb.RaftID == m.opRaft })
	voter := isVoterIn(lead.cs, m.opRaft)
	switch m.opKind {
	case opAdd:
		if !voter || joint(lead.cs) {
			s.fatalf("the add of node %d answered, but raft id %x is not a voter of %s", m.opNode+1, m.opRaft, describeConfState(lead.cs))
		}
		m.stats.added++
	case opRemove:
		if in || joint(lead.cs) {
			s.fatalf("the removal of %x answered, but the configuration is %s", m.opRaft, describeConfState(lead.cs))
		}
		m.stats.removed++
	}
	s.tracef("members: %s of node %d done: %s", m.opKind, m.opNode+1, describeConfState(lead.cs))
}

// checkWiped: no node runs under a raft id whose disk was lost.
func (s *sim) checkWiped() {
	for _, n := range s.nodes {
		if n.q != nil && s.members.lost[n.q.self] {
			s.fatalf("node %d runs under raft id %x, whose disk was lost", n.id, n.q.self)
		}
	}
}

func runMembersSeed(t *testing.T, seed uint64, chaos time.Duration) *sim {
	t.Helper()
	cryptotest.SetGlobalRandom(t, seed)
	s := newMembersSim(t, seed, 3, 5, func(p *simParams) { p.chaos = chaos })
	s.schedule(&event{at: s.p.clientEvery, kind: evClient})
	s.schedule(&event{at: s.p.faultEvery, kind: evFault})
	s.schedule(&event{at: s.members.every, kind: evMembers})
	s.run()
	s.checkWiped()
	for _, n := range s.nodes {
		off, im := n.q.Committed()
		s.checkImageFull(n, off, im)
	}
	return s
}

// TestSimMembership runs the membership simulation over many seeds.
func TestSimMembership(t *testing.T) {
	chaos, seeds := 3*time.Second, 80
	if longRun() {
		chaos, seeds = 8*time.Second, 1500
	}
	if *flagSeed != 0 {
		s := runMembersSeed(t, *flagSeed, chaos)
		t.Logf("seed %d: %d acked, %d committed, members %+v, stats %+v", *flagSeed, s.acked, len(s.history), s.members.stats, s.stats)
		return
	}
	var total simMembersStats
	acked, crashes := 0, 0
	for seed := uint64(1); seed <= uint64(seeds); seed++ {
		s := runMembersSeed(t, seed*7919, chaos)
		acked += s.acked
		crashes += s.stats.crashes
		total.added += s.members.stats.added
		total.removed += s.members.stats.removed
		total.wiped += s.members.stats.wiped
		total.failed += s.members.stats.failed
	}
	t.Logf("%d seeds: %d controllers added, %d removed, %d disks wiped, %d changes failed (timed out, lost leadership, refused); %d proposals acknowledged, %d crashes",
		seeds, total.added, total.removed, total.wiped, total.failed, acked, crashes)
	if total.added == 0 || total.removed == 0 || total.wiped == 0 || acked == 0 {
		t.Fatalf("the simulation did not exercise adds, removals and wiped disks: %+v, %d acked", total, acked)
	}
}

// awaitChange advances the simulation until the change answers (within limit of
// simulated time) and returns its result.
func (s *sim) awaitChange(ch <-chan error, limit time.Duration) error {
	s.t.Helper()
	end := s.now + limit
	for s.now < end {
		select {
		case err := <-ch:
			return err
		default:
		}
		s.advance(s.now + 5*time.Millisecond)
	}
	s.fatalf("the change did not answer within %v", limit)
	return nil
}

// awaitLeader advances until a node leads, and returns its index.
func (s *sim) awaitLeader(limit time.Duration) int {
	s.t.Helper()
	end := s.now + limit
	for s.now < end {
		if i := s.leaderIndex(); i >= 0 && s.nodes[i].q.ReadyForWrites() {
			return i
		}
		s.advance(s.now + 5*time.Millisecond)
	}
	s.fatalf("no leader within %v", limit)
	return -1
}

// voterNodes are the node ids of the leader's voters, sorted.
func (s *sim) voterNodes() []int32 {
	var out []int32
	for _, m := range s.leaderMembers() {
		if m.Voter {
			out = append(out, m.ID)
		}
	}
	slices.Sort(out)
	return out
}

// TestSimGrowShrinkReplace is the operator's story on the simulation, with clients
// proposing throughout and messages dropped and delayed: one controller formatted
// --standalone grows to three (each added as a learner, caught up, then a voter),
// a partition cuts one off and heals, the leader is asked to remove itself
// (leadership moves, the new leader removes it) and it is added back, a crashed
// controller's disk is lost (its identity is removed, the node formatted anew
// comes back as another member and is added), and the quorum shrinks back to one.
// No acknowledged proposal is lost, and every check of the simulation holds.
func TestSimGrowShrinkReplace(t *testing.T) {
	const seed = 20
	cryptotest.SetGlobalRandom(t, seed)
	s := newMembersSim(t, seed, 1, 3, func(p *simParams) {
		p.drop, p.dup, p.minDelay, p.maxDelay, p.clientEvery, p.snapshotEntries = 0.02, 0.01, time.Millisecond, 10*time.Millisecond, 5*time.Millisecond, 30
	})
	s.schedule(&event{at: s.p.clientEvery, kind: evClient})
	const limit = 10 * time.Second
	add := func(i int) {
		t.Helper()
		li := s.awaitLeader(limit)
		if err := s.awaitChange(s.nodes[li].q.AddVoter(simVoter(s.nodes[i]), 5*time.Second), limit); err != nil {
			t.Fatalf("add node %d: %v", s.nodes[i].id, err)
		}
	}
	remove := func(id int32, dir metadata.UUID) {
		t.Helper()
		for tries := 0; ; tries++ {
			li := s.awaitLeader(limit)
			err := s.awaitChange(s.nodes[li].q.RemoveVoter(id, dir, 5*time.Second), limit)
			if err == nil {
				return
			}
			if !errors.Is(err, ErrNotLeader) || tries > 3 {
				t.Fatalf("remove node %d: %v", id, err)
			}
			t.Logf("remove node %d asked of leader %d: %v", id, s.nodes[li].id, err)
			s.advance(s.now + 300*time.Millisecond) // leadership moves
		}
	}
	want := func(ids ...int32) {
		t.Helper()
		if got := s.voterNodes(); !slices.Equal(got, ids) {
			t.Fatalf("voters %v, want %v (%s)", got, ids, describeConfState(s.nodes[s.leaderIndex()].q.cs))
		}
	}
	s.awaitLeader(limit)
	want(1)
	// Grow: one to three.
	add(1)
	add(2)
	want(1, 2, 3)
	// A partition cuts node 3 off and heals; the quorum commits throughout.
	s.nodes[2].group = 1
	s.advance(s.now + 500*time.Millisecond)
	s.nodes[2].group = 0
	// The leader is asked to remove itself; the new leader does it; it comes back.
	li := s.awaitLeader(limit)
	leader := s.nodes[li]
	remove(leader.id, leader.dir)
	want(slices.DeleteFunc([]int32{1, 2, 3}, func(id int32) bool { return id == leader.id })...)
	add(li)
	want(1, 2, 3)
	// A follower crashes and its disk is lost: its identity is removed, the node is
	// formatted anew (another directory id) and added.
	f := (s.awaitLeader(limit) + 1) % 3
	lost := s.nodes[f]
	oldDir := lost.dir
	s.tracef("crash node %d for good", lost.id)
	lost.q = nil
	remove(lost.id, oldDir)
	want(slices.DeleteFunc([]int32{1, 2, 3}, func(id int32) bool { return id == lost.id })...)
	lost.dir, lost.boot, lost.st = s.newDir(), nil, NewMemStorage()
	s.start(f)
	if lost.q.self == DynamicRaftID(lost.id, oldDir) {
		t.Fatalf("the node formatted anew runs under its old raft id %x", lost.q.self)
	}
	add(f)
	want(1, 2, 3)
	// Shrink back to one.
	for len(s.voterNodes()) > 1 {
		v := s.voterNodes()
		id := v[len(v)-1]
		remove(id, s.nodes[id-1].dir)
	}
	// Every acknowledged proposal is in the history; the last voter commits alone.
	li = s.awaitLeader(limit)
	ch := s.nodes[li].q.Propose([]metadata.Record{topic("after-shrink")})
	s.handle(li)
	s.advance(s.now + 100*time.Millisecond)
	if r := result(t, ch); r.Err != nil {
		t.Fatalf("the last voter does not commit: %v", r.Err)
	}
	s.pollClients()
	if s.acked < 100 {
		t.Fatalf("only %d proposals acknowledged during the changes", s.acked)
	}
	t.Logf("%d proposals acknowledged, %d entries committed, over %v of simulated time", s.acked, len(s.history), s.now)
}
