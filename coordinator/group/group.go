package group

import (
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// state is a classic group's state (see the package doc).
type state int8

const (
	stateEmpty state = iota
	statePreparingRebalance
	stateCompletingRebalance
	stateStable
	stateDead
)

// String returns the state's name as Kafka spells it in DescribeGroups and ListGroups.
func (s state) String() string {
	switch s {
	case stateEmpty:
		return "Empty"
	case statePreparingRebalance:
		return "PreparingRebalance"
	case stateCompletingRebalance:
		return "CompletingRebalance"
	case stateStable:
		return "Stable"
	default:
		return "Dead"
	}
}

type protocol struct {
	name     string
	metadata []byte
}

// member is one member of a group. All fields are guarded by the group's mu.
type member struct {
	id               string
	instanceID       *string
	clientID         string
	clientHost       string
	sessionTimeout   time.Duration
	rebalanceTimeout time.Duration
	protocolType     string
	protocols        []protocol
	assignment       []byte
	joinedAt         uint64 // join order; the first member still present leads

	// joinCB is set while the member waits in JoinGroup, syncCB while it waits in
	// SyncGroup (invariant 3).
	joinCB      func(*kmsg.JoinGroupResponse)
	joinVersion int16
	syncCB      func(*kmsg.SyncGroupResponse)
	syncVersion int16

	isNew bool // joined in the current rebalance and not yet answered

	hbSeq   uint64 // bumps each time the session timer is re-armed; stale timers see a mismatch
	hbTimer Timer
}

func (m *member) metadataFor(name string) []byte {
	for _, p := range m.protocols {
		if p.name == name {
			return p.metadata
		}
	}
	return nil
}

func (m *member) supports(name string) bool {
	for _, p := range m.protocols {
		if p.name == name {
			return true
		}
	}
	return false
}

// sameProtocols reports whether ps equals the member's protocols, names and metadata.
func (m *member) sameProtocols(ps []kmsg.JoinGroupRequestProtocol) bool {
	if len(ps) != len(m.protocols) {
		return false
	}
	for i := range ps {
		if ps[i].Name != m.protocols[i].name || string(ps[i].Metadata) != string(m.protocols[i].metadata) {
			return false
		}
	}
	return true
}

type topicPartition struct {
	topic     string
	partition int32
}

// group is one classic group. mu guards every field; the coordinator's map points
// at it. Invariants are listed in the package doc.
type group struct {
	mu sync.Mutex

	c         *Coordinator
	id        string
	partition int32

	state        state
	stateTime    time.Time // when state last changed (currentStateTimestamp)
	hasStateTime bool      // false for groups loaded from a pre-v2 record
	protocolType string
	protocol     string // selected protocol; "" when none
	generation   int32
	leader       string

	members       map[string]*member
	joinSeq       uint64
	static        map[string]string   // instance id -> member id
	pending       map[string]uint64   // members told MEMBER_ID_REQUIRED -> timer seq
	pendingSync   map[string]struct{} // members expected to SyncGroup this generation
	subscriptions map[string]struct{} // topics the consumer members subscribe to; nil if unknown

	// rebalance bookkeeping
	joinTimer      Timer
	joinSeq2       uint64 // bumps each time a join timer is armed
	initialJoin    bool   // the running join waits for group.initial.rebalance.delay
	initialRemain  time.Duration
	newMemberAdded bool
	syncTimer      Timer
	syncSeq        uint64

	offsets        map[topicPartition]OffsetValue
	pendingCommits map[topicPartition]int    // in-flight commits per partition
	deleted        map[topicPartition]uint64 // bumped when an offset with commits in flight is deleted

	// kind is the group's protocol; cg holds a consumer group's state (KIP-848), sg a
	// share group's (KIP-932), st a streams group's (KIP-1071). A consumer or share
	// group keeps state at stateEmpty, a streams group at stateStable (stateDead once
	// dropped): the classic states above are not theirs.
	kind groupKind
	cg   *consumerState
	sg   *shareState
	st   *streamsState // a streams group's state (KIP-1071, streams.go)
	// pendingWrites counts the group's appends not yet answered by the Log; answers
	// that wrote nothing wait in writeWaiters until it is zero (writeThenLocked).
	pendingWrites int
	writeWaiters  []func()
}

func newGroup(c *Coordinator, id string, partition int32) *group {
	return &group{
		c:              c,
		id:             id,
		partition:      partition,
		state:          stateEmpty,
		stateTime:      c.clock.Now(),
		hasStateTime:   true,
		members:        map[string]*member{},
		static:         map[string]string{},
		pending:        map[string]uint64{},
		pendingSync:    map[string]struct{}{},
		offsets:        map[topicPartition]OffsetValue{},
		pendingCommits: map[topicPartition]int{},
		deleted:        map[topicPartition]uint64{},
	}
}

func (g *group) transition(s state) {
	g.state = s
	g.stateTime = g.c.clock.Now()
	g.hasStateTime = true
}

// sortedMembers returns the members in join order.
func (g *group) sortedMembers() []*member {
	ms := make([]*member, 0, len(g.members))
	for _, m := range g.members {
		ms = append(ms, m)
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].joinedAt < ms[j].joinedAt })
	return ms
}

func (g *group) addMember(m *member) {
	g.joinSeq++
	m.joinedAt = g.joinSeq
	if len(g.members) == 0 {
		g.protocolType = m.protocolType
	}
	g.members[m.id] = m
	if m.instanceID != nil {
		g.static[*m.instanceID] = m.id
	}
	if g.leader == "" {
		g.leader = m.id
	}
}

// removeMember drops m and its timers; if it led, the next member in join order leads.
func (g *group) removeMember(id string) {
	m := g.members[id]
	if m == nil {
		return
	}
	if m.hbTimer != nil {
		m.hbTimer.Stop()
	}
	m.hbSeq++
	delete(g.members, id)
	delete(g.pendingSync, id)
	if m.instanceID != nil && g.static[*m.instanceID] == id {
		delete(g.static, *m.instanceID)
	}
	if g.leader == id {
		g.leader = ""
		if ms := g.sortedMembers(); len(ms) > 0 {
			g.leader = ms[0].id
		}
	}
}

// allJoined: every member waits in JoinGroup and no MEMBER_ID_REQUIRED member is out.
func (g *group) allJoined() bool {
	if len(g.pending) > 0 {
		return false
	}
	for _, m := range g.members {
		if m.joinCB == nil {
			return false
		}
	}
	return true
}

func (g *group) rebalanceTimeout() time.Duration {
	var d time.Duration
	for _, m := range g.members {
		d = max(d, m.rebalanceTimeout)
	}
	return d
}

// selectProtocol picks, among the protocols every member supports, the one most
// members list first (ties go to the leader's earlier preference). ok is false when
// there is no common protocol.
func (g *group) selectProtocol() (string, bool) {
	return selectCommon(g.sortedMembers(), nil)
}

// selectCommon is selectProtocol over members plus an optional joiner's protocols
// (a member not yet in the group).
func selectCommon(ms []*member, extra []kmsg.JoinGroupRequestProtocol) (string, bool) {
	prefs := make([][]string, 0, len(ms)+1)
	for _, m := range ms {
		names := make([]string, len(m.protocols))
		for i, p := range m.protocols {
			names[i] = p.name
		}
		prefs = append(prefs, names)
	}
	if extra != nil {
		names := make([]string, len(extra))
		for i, p := range extra {
			names[i] = p.Name
		}
		prefs = append(prefs, names)
	}
	if len(prefs) == 0 {
		return "", false
	}
	var candidates []string
	for _, name := range prefs[0] {
		if slices.Contains(candidates, name) {
			continue
		}
		all := true
		for _, p := range prefs[1:] {
			if !slices.Contains(p, name) {
				all = false
				break
			}
		}
		if all {
			candidates = append(candidates, name)
		}
	}
	if len(candidates) == 0 {
		return "", false
	}
	votes := make(map[string]int, len(candidates))
	for _, p := range prefs {
		for _, name := range p {
			if slices.Contains(candidates, name) {
				votes[name]++
				break
			}
		}
	}
	best := candidates[0]
	for _, c := range candidates[1:] {
		if votes[c] > votes[best] {
			best = c
		}
	}
	return best, true
}

// computeSubscriptions parses the consumer protocol metadata of every member for the
// selected protocol; any member it cannot read makes the set unknown (nil).
func (g *group) computeSubscriptions() {
	g.subscriptions = nil
	if g.protocolType != "consumer" || g.protocol == "" {
		return
	}
	subs := map[string]struct{}{}
	for _, m := range g.members {
		var md kmsg.ConsumerMemberMetadata
		if err := md.ReadFrom(m.metadataFor(g.protocol)); err != nil {
			return
		}
		for _, t := range md.Topics {
			subs[t] = struct{}{}
		}
	}
	g.subscriptions = subs
}

// subscribedTo reports whether topic may be consumed by the group: true when the
// subscriptions are unknown.
func (g *group) subscribedTo(topic string) bool {
	if g.subscriptions == nil {
		return true
	}
	_, ok := g.subscriptions[topic]
	return ok
}

// groupValue is the GroupMetadataValue of the group as it stands, with assignment
// taken from assign (or each member's current assignment when assign is nil).
func (g *group) groupValue(assign map[string][]byte) GroupValue {
	v := GroupValue{
		Version:               3,
		ProtocolType:          g.protocolType,
		Generation:            g.generation,
		CurrentStateTimestamp: g.stateTime.UnixMilli(),
	}
	if g.protocol != "" {
		p := g.protocol
		v.Protocol = &p
	}
	if g.leader != "" {
		l := g.leader
		v.Leader = &l
	}
	for _, m := range g.sortedMembers() {
		a := m.assignment
		if assign != nil {
			a = assign[m.id]
		}
		v.Members = append(v.Members, MemberValue{
			MemberID:         m.id,
			InstanceID:       m.instanceID,
			ClientID:         m.clientID,
			ClientHost:       m.clientHost,
			RebalanceTimeout: int32(m.rebalanceTimeout / time.Millisecond),
			SessionTimeout:   int32(m.sessionTimeout / time.Millisecond),
			Subscription:     m.metadataFor(g.protocol),
			Assignment:       a,
		})
	}
	return v
}
