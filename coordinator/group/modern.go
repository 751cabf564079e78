package group

import (
	"iter"
	"maps"
	"sort"
	"strings"
	"time"
)

// Modern groups: consumer groups (KIP-848), share groups (KIP-932) and streams groups
// (KIP-1071) share one skeleton, Kafka's ModernGroup and ModernGroupMember. Members
// heartbeat with a member epoch within a session timeout; the group epoch moves when
// what the assignment depends on changes; a target assignment is computed for an
// assignment epoch; each member moves towards its target, giving up what it must
// within its rebalance timeout. The skeleton is written once:
//
//	               embeds modernGroup[A, M]            M embeds modernMember[A]   rules
//	consumerState  A = assignment, M = *cmember  + subscribed names, regex, assignor  consumerRules
//	shareState     A = assignment, M = *smember  + subscribed names                   shareRules
//	streamsState   A = tasks,      M = *stmember + process, topology epoch, endpoint  streamsRules
//
// modern.go holds the types, the member sessions and rebalance timers;
// modern_heartbeat.go the path of a heartbeat (the kind check, members joining,
// rejoining, replacing a static member, leaving, the epoch fence, reconciliation),
// describes and offset fetches; modern_records.go the records, tombstones and replay.
// Each protocol keeps its own rules in its files: the assignors and the subscription
// (consumer_reconcile.go, share.go), the share-partition state (share_state_meta.go),
// the topology and the task assignor (streams_*.go). What the skeleton needs of a
// protocol is its modernRules (revokingRules for consumer and streams groups).

// memberState is a member's reconciliation state, with Kafka's byte values
// (MemberState) as CurrentMemberAssignment records store them. Share-group members are
// always STABLE (a share group revokes nothing).
type memberState int8

const (
	msStable     memberState = 0 // reconciled with its target
	msUnrevoked  memberState = 1 // must give up partitions or tasks before moving to a newer epoch
	msUnreleased memberState = 2 // at the newest epoch, waiting for others to release partitions or tasks
	msUnknown    memberState = 127
)

// Member epochs with a meaning of their own.
const (
	leaveEpoch       = -1 // the member leaves
	staticLeaveEpoch = -2 // a static member leaves for now; its instance keeps its place
)

// modernMember is what every member of a modern group has (Kafka's ModernGroupMember):
// its ids and client, its epochs and reconciliation state, what it holds (A: partitions
// or tasks) and its two timers. Guarded by the group's mu.
type modernMember[A any] struct {
	id               string
	instanceID       *string // static members (consumer and streams groups)
	rackID           *string
	clientID         string
	clientHost       string
	rebalanceTimeout time.Duration

	epoch, prevEpoch int32
	state            memberState
	assigned         A // what the member owns (or will own)
	pending          A // what it must give up

	// hbSeq and revokeSeq bump each time the session or the rebalance timer is armed or
	// stopped: a timer that fires with another seq is stale.
	hbSeq, revokeSeq     uint64
	hbTimer, revokeTimer Timer
}

func (m *modernMember[A]) base() *modernMember[A] { return m }

// stopSession stops m's session timer.
func (m *modernMember[A]) stopSession() {
	if m.hbTimer != nil {
		m.hbTimer.Stop()
	}
	m.hbSeq++
}

// stopRevokeTimer stops m's rebalance timer.
func (m *modernMember[A]) stopRevokeTimer() {
	if m.revokeTimer != nil {
		m.revokeTimer.Stop()
		m.revokeTimer = nil
	}
	m.revokeSeq++
}

// memberOf is a protocol's member type: a pointer to a struct embedding modernMember[A].
type memberOf[A any] interface {
	comparable
	base() *modernMember[A]
}

// holding is what a member holds: an assignment of partitions, or tasks.
type holding[A any] interface {
	equal(A) bool
}

// recordTypes are a protocol's record key types in __consumer_offsets.
type recordTypes struct {
	metadata, member, targetMetadata, targetMember, current int16
}

var (
	consumerRecordTypes = recordTypes{recConsumerGroupMetadata, recConsumerMemberMetadata, recConsumerTargetMetadata, recConsumerTargetMember, recConsumerCurrentAssignment}
	shareRecordTypes    = recordTypes{recShareGroupMetadata, recShareMemberMetadata, recShareTargetMetadata, recShareTargetMember, recShareCurrentAssignment}
	streamsRecordTypes  = recordTypes{recStreamsGroupMetadata, recStreamsMemberMetadata, recStreamsTargetMetadata, recStreamsTargetMember, recStreamsCurrentAssignment}
)

// modernRules is what the skeleton asks of a protocol (consumerRules, shareRules,
// streamsRules): its session timeout, how it fences a member, and how its records
// encode what members hold.
type modernRules[A any, M memberOf[A]] interface {
	// sessionTimeout is the group's session timeout now (its own config, else the
	// broker's).
	sessionTimeout(g *group) time.Duration
	// fenceLocked removes m (it left, or a timer expired), bumps the group epoch and
	// adds the records of the change to recs.
	fenceLocked(g *group, m M, recs *[]Record)
	// targetValue and currentValue are the values of a member's TargetAssignment and
	// CurrentAssignment records.
	targetValue(a A) []byte
	currentValue(m M) []byte
}

// revokingRules is what the skeleton asks more of a protocol whose members may be
// static and revoke what they hold before taking more (consumer and streams groups,
// not share groups).
type revokingRules[A any, M memberOf[A]] interface {
	modernRules[A, M]
	// newMember is a member that holds nothing yet; replacement is a member under id
	// that takes the place of old (a static member back under a new member id).
	newMember(id string) M
	replacement(old M, id string) M
	// none is an empty A.
	none() A
	// setAssignmentLocked installs m's epochs, state and holdings, keeping the
	// protocol's owners maps; claimLocked records what m holds there; dropLocked
	// forgets m and what it holds.
	setAssignmentLocked(g *group, m M, epoch, prev int32, state memberState, assigned, pending A)
	claimLocked(g *group, m M)
	dropLocked(g *group, m M)
	memberRecord(g *group, m M) Record
}

// modernGroup is what every modern group has (Kafka's ModernGroup): the group epoch,
// the target assignment of the assignment epoch, the members and the static members'
// instance ids. Guarded by the group's mu. Invariants: assignmentEpoch <= epoch; a
// member's epoch <= assignmentEpoch, or is -2 (a static member away); target has an
// entry for every member assigned at its join epoch or later and none for others;
// static maps each instance id to the member holding it.
type modernGroup[A holding[A], M memberOf[A]] struct {
	kind  groupKind
	types recordTypes
	rules modernRules[A, M]

	epoch           int32
	assignmentEpoch int32
	members         map[string]M
	static          map[string]string // instance id -> member id
	target          map[string]A
}

func newModernGroup[A holding[A], M memberOf[A]](kind groupKind, types recordTypes, rules modernRules[A, M]) modernGroup[A, M] {
	return modernGroup[A, M]{kind: kind, types: types, rules: rules,
		members: map[string]M{}, static: map[string]string{}, target: map[string]A{}}
}

// sortedIDs is the member ids, sorted.
func (mg *modernGroup[A, M]) sortedIDs() []string { return sortedKeys(mg.members) }

// stateName is the group state describes and ListGroups report (Kafka's
// ConsumerGroupState): Empty, Assigning (the group epoch is past the assignment's),
// Reconciling (a member, not away, is not at the assignment epoch or not STABLE),
// Stable.
func (mg *modernGroup[A, M]) stateName() string {
	if len(mg.members) == 0 {
		return "Empty"
	}
	if mg.epoch > mg.assignmentEpoch {
		return "Assigning"
	}
	for _, m := range mg.members {
		b := m.base()
		if b.epoch != staticLeaveEpoch && (b.epoch != mg.assignmentEpoch || b.state != msStable) {
			return "Reconciling"
		}
	}
	return "Stable"
}

func (mg *modernGroup[A, M]) size() int { return len(mg.members) }

// liveLocked reports whether m is still a member of g, g still this kind of group and
// alive: a timer of m acts only then.
func (mg *modernGroup[A, M]) liveLocked(g *group, m M) bool {
	return g.kind == mg.kind && g.state != stateDead && mg.members[m.base().id] == m
}

// armSessionLocked (re)starts m's session: without a heartbeat within the session
// timeout the member is fenced.
func (mg *modernGroup[A, M]) armSessionLocked(g *group, m M) {
	b := m.base()
	b.stopSession()
	seq := b.hbSeq
	b.hbTimer = g.after(mg.rules.sessionTimeout(g), func(fx *effects) {
		if !mg.liveLocked(g, m) || b.hbSeq != seq {
			return
		}
		g.c.logger.Info(mg.kind.String()+" group member session expired", "group", g.id, "member", b.id)
		var recs []Record
		mg.rules.fenceLocked(g, m, &recs)
		g.writeThenLocked(fx, recs, nil)
	})
}

// armRevokeTimerLocked starts m's rebalance timeout as it enters UNREVOKED: a member
// that has not given up what it must by then is fenced.
func (mg *modernGroup[A, M]) armRevokeTimerLocked(g *group, m M) {
	b := m.base()
	b.stopRevokeTimer()
	seq, epoch := b.revokeSeq, b.epoch
	d := b.rebalanceTimeout
	if d <= 0 {
		d = mg.rules.sessionTimeout(g)
	}
	b.revokeTimer = g.after(d, func(fx *effects) {
		if !mg.liveLocked(g, m) || b.revokeSeq != seq || b.state != msUnrevoked || b.epoch != epoch {
			return
		}
		g.c.logger.Info(mg.kind.String()+" group member did not revoke its "+mg.kind.unit()+" within the rebalance timeout", "group", g.id, "member", b.id)
		var recs []Record
		mg.rules.fenceLocked(g, m, &recs)
		g.writeThenLocked(fx, recs, nil)
	})
}

// startTimersLocked starts the sessions of a loaded group's members (and the rebalance
// timeout of those still revoking), in member id order.
func (mg *modernGroup[A, M]) startTimersLocked(g *group) {
	for _, id := range mg.sortedIDs() {
		m := mg.members[id]
		mg.armSessionLocked(g, m)
		if m.base().state == msUnrevoked {
			mg.armRevokeTimerLocked(g, m)
		}
	}
}

// stopTimers stops every member's timers (the group is deleted, converted or
// unloaded).
func (mg *modernGroup[A, M]) stopTimers() {
	for _, m := range mg.members {
		m.base().stopSession()
		m.base().stopRevokeTimer()
	}
}

// forget drops m from the group: its timers, its target, its instance id.
func (mg *modernGroup[A, M]) forget(m M) {
	b := m.base()
	b.stopSession()
	b.stopRevokeTimer()
	delete(mg.members, b.id)
	delete(mg.target, b.id)
	if b.instanceID != nil && mg.static[*b.instanceID] == b.id {
		delete(mg.static, *b.instanceID)
	}
}

// subscribedTopics is the metadata of the topics a consumer or share group subscribes
// to that exist (its PartitionMetadata record), as of a topic image version.
type subscribedTopics struct {
	subMeta       map[string]PartitionMetadataTopic
	topicsVersion uint64 // topic image version subMeta was computed at
	refreshed     bool   // topicsVersion is meaningful
}

func newSubscribedTopics(loaded []PartitionMetadataTopic) subscribedTopics {
	s := subscribedTopics{subMeta: make(map[string]PartitionMetadataTopic, len(loaded))}
	for _, t := range loaded {
		s.subMeta[t.TopicName] = t
	}
	return s
}

// currentAt reports whether the metadata was computed at topic image version v.
func (s *subscribedTopics) currentAt(v uint64) bool { return s.refreshed && s.topicsVersion == v }

// setLocked makes the metadata that of the names that exist in im and adds a
// PartitionMetadata record of type t when it changed; it reports whether it did.
func (s *subscribedTopics) setLocked(g *group, t int16, im *topicImage, names iter.Seq[string], recs *[]Record) bool {
	meta := map[string]PartitionMetadataTopic{}
	for n := range names {
		if ti, ok := im.byName[n]; ok {
			meta[n] = PartitionMetadataTopic{TopicID: ti.ID, TopicName: n, NumPartitions: ti.Partitions}
		}
	}
	s.topicsVersion, s.refreshed = im.version, true
	if maps.Equal(meta, s.subMeta) {
		return false
	}
	s.subMeta = meta
	ts := make([]PartitionMetadataTopic, 0, len(meta))
	for _, m := range meta {
		ts = append(ts, m)
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i].TopicName < ts[j].TopicName })
	*recs = append(*recs, g.rec(t, "", appendPartitionMetadataValue(nil, ts)))
	return true
}

// title is the kind's name as a sentence starts with it.
func (k groupKind) title() string {
	s := k.String()
	return strings.ToUpper(s[:1]) + s[1:]
}

// unit is what members of the kind hold, in log lines and error messages.
func (k groupKind) unit() string {
	if k == kindStreams {
		return "tasks"
	}
	return "partitions"
}

// modernState is the view of a consumer, share or streams group's state that the code
// common to every kind uses (ListGroups, DeleteGroups, JoinGroup, loads and unloads).
type modernState interface {
	stateName() string
	size() int
	startTimersLocked(g *group)
	stopTimers()
	// tombstonesLocked deletes every record of the group (not its offsets).
	tombstonesLocked(g *group) []Record
}

// modern is g's consumer, share or streams state; nil for a classic group.
func (g *group) modern() modernState {
	switch {
	case g.kind == kindConsumer && g.cg != nil:
		return g.cg
	case g.kind == kindShare && g.sg != nil:
		return g.sg
	case g.kind == kindStreams && g.st != nil:
		return g.st
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
