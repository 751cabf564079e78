package group

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Modern groups: consumer groups (KIP-848), share groups (KIP-932) and streams groups
// (KIP-1071) share one skeleton, Kafka's ModernGroup and ModernGroupMember. Members
// heartbeat with a member epoch within a session timeout; the group epoch moves when
// what the assignment depends on changes; a target assignment is computed for an
// assignment epoch; each member moves towards its target, giving up what it must
// within its rebalance timeout. This file holds that skeleton, once:
//
//	                modernGroup[A, M]                 modernMember[A] embedded in M
//	consumerState   A = assignment, M = *cmember      + subscribed names, regex, assignor
//	shareState      A = assignment, M = *smember      + subscribed names
//	streamsState    A = tasks,      M = *stmember     + process, topology epoch, endpoint, tags
//
// and each protocol keeps its own rules in its files: the assignors and the
// subscription (consumer_reconcile.go, share.go), the share-partition state
// (share_state_meta.go), the topology and the task assignor (streams_*.go). What the
// skeleton needs of a protocol is its modernRules.

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

// updateClient applies what a heartbeat says of the member's client: its instance id
// and rack when set, its rebalance timeout unless -1, its client id and host. changed:
// any of them changed; rackChanged: the rack did.
func (m *modernMember[A]) updateClient(instanceID, rackID *string, rebalanceTimeoutMs int32, clientID, clientHost string) (changed, rackChanged bool) {
	changed = setIfNew(&m.instanceID, instanceID)
	rackChanged = setIfNew(&m.rackID, rackID)
	changed = changed || rackChanged
	if rebalanceTimeoutMs != -1 {
		if d := millis(rebalanceTimeoutMs); d != m.rebalanceTimeout {
			m.rebalanceTimeout, changed = d, true
		}
	}
	if clientID != m.clientID || clientHost != m.clientHost {
		m.clientID, m.clientHost, changed = clientID, clientHost, true
	}
	return changed, rackChanged
}

// setIfNew sets *dst to a copy of v when v is set and differs; it reports whether it
// did.
func setIfNew(dst **string, v *string) bool {
	if v == nil || (*dst != nil && **dst == *v) {
		return false
	}
	s := *v
	*dst = &s
	return true
}

// subscribedNames is a subscription's topic names, sorted and without duplicates.
func subscribedNames(names []string) []string {
	names = slices.Clone(names)
	slices.Sort(names)
	return slices.Compact(names)
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

// installTargetLocked makes out(id) the target of each member of ids, writing a
// TargetAssignment record for each one that changed, and then the target's epoch: the
// group epoch (a TargetAssignmentMetadata record).
func (mg *modernGroup[A, M]) installTargetLocked(g *group, ids []string, out func(id string) A, recs *[]Record) {
	for _, id := range ids {
		a := out(id)
		if old, ok := mg.target[id]; ok && old.equal(a) {
			continue
		}
		mg.target[id] = a
		*recs = append(*recs, mg.targetRecord(g, id, a))
	}
	mg.assignmentEpoch = mg.epoch
	*recs = append(*recs, mg.targetMetadataRecord(g))
}

// epochRecord is the group's metadata record when it holds the group epoch alone
// (consumer and share groups).
func (mg *modernGroup[A, M]) epochRecord(g *group) Record {
	return g.rec(mg.types.metadata, "", appendEpochValue(nil, mg.epoch))
}

func (mg *modernGroup[A, M]) targetMetadataRecord(g *group) Record {
	return g.rec(mg.types.targetMetadata, "", appendEpochValue(nil, mg.assignmentEpoch))
}

func (mg *modernGroup[A, M]) targetRecord(g *group, id string, a A) Record {
	return g.rec(mg.types.targetMember, id, mg.rules.targetValue(a))
}

func (mg *modernGroup[A, M]) currentRecord(g *group, m M) Record {
	return g.rec(mg.types.current, m.base().id, mg.rules.currentValue(m))
}

// memberTombstones deletes a member's three records, in Kafka's order.
func (mg *modernGroup[A, M]) memberTombstones(g *group, id string) []Record {
	return []Record{
		g.rec(mg.types.current, id, nil),
		g.rec(mg.types.targetMember, id, nil),
		g.rec(mg.types.member, id, nil),
	}
}

// membersTombstones deletes the records of every member and of the target, in the
// order of Kafka's createGroupTombstoneRecords (consumer and streams groups): current
// assignments, target assignments, the target's metadata, members' metadata.
func (mg *modernGroup[A, M]) membersTombstones(g *group) []Record {
	ids := mg.sortedIDs()
	recs := make([]Record, 0, 3*len(ids)+1)
	for _, id := range ids {
		recs = append(recs, g.rec(mg.types.current, id, nil))
	}
	for _, id := range ids {
		recs = append(recs, g.rec(mg.types.targetMember, id, nil))
	}
	recs = append(recs, g.rec(mg.types.targetMetadata, "", nil))
	for _, id := range ids {
		recs = append(recs, g.rec(mg.types.member, id, nil))
	}
	return recs
}

func (g *group) rec(t int16, second string, value []byte) Record {
	return Record{Timestamp: g.c.clock.Now().UnixMilli(), Key: appendGroupTypedKey(nil, t, g.id, second), Value: value}
}

// partitionMetadataRecord is the subscribed topics' metadata of a consumer or share
// group, in topic name order.
func (g *group) partitionMetadataRecord(t int16, meta map[string]PartitionMetadataTopic) Record {
	ts := make([]PartitionMetadataTopic, 0, len(meta))
	for _, m := range meta {
		ts = append(ts, m)
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i].TopicName < ts[j].TopicName })
	return g.rec(t, "", appendPartitionMetadataValue(nil, ts))
}

// revoking is the group's rules as a protocol with static members and revocation.
// Only consumer and streams groups call what needs it.
func (mg *modernGroup[A, M]) revoking() revokingRules[A, M] {
	return mg.rules.(revokingRules[A, M])
}

// memberRequest is what a heartbeat says of the member it comes from.
type memberRequest[A any] struct {
	id         string // the member id (a join that names none has had one made)
	instanceID *string
	epoch      int32
	maxSize    int // members at most; 0: no cap
	// ownsSubset reports whether what the heartbeat says the member owns is within
	// assigned (false when it does not say).
	ownsSubset func(assigned A) bool
}

// memberLocked finds or creates the member a join (epoch 0) or heartbeat names, as
// Kafka's GroupMetadataManager does: a static member away (epoch -2) is replaced by a
// join of its instance under another member id; an instance id held by a member
// present, an unknown member, an epoch ahead of the member's, or one behind it other
// than its previous epoch with what it owns, are refused. created: the member is new.
func (mg *modernGroup[A, M]) memberLocked(g *group, r memberRequest[A], recs *[]Record) (m M, created bool, code int16, msg string) {
	var none M
	if r.epoch == 0 {
		if r.instanceID != nil {
			inst := *r.instanceID
			cur, ok := mg.static[inst]
			switch {
			case !ok:
			case cur == r.id:
				return mg.members[cur], false, 0, ""
			default:
				old := mg.members[cur]
				if old.base().epoch != staticLeaveEpoch {
					return none, false, kerr.UnreleasedInstanceID.Code, fmt.Sprintf("Static member %s with instance id %s cannot join the group because the instance id is owned by %s member.", r.id, inst, cur)
				}
				if _, inUse := mg.members[r.id]; inUse {
					return none, false, kerr.UnreleasedInstanceID.Code, fmt.Sprintf("Member id %s is already in use.", r.id)
				}
				return mg.replaceStaticLocked(g, old, r.id, recs), false, 0, ""
			}
		}
		if m, ok := mg.members[r.id]; ok {
			// The member rejoins in place (it lost its state, or an answer): it keeps
			// what it holds, which the answer delivers again.
			if inst := m.base().instanceID; inst != nil && (r.instanceID == nil || *r.instanceID != *inst) {
				return none, false, kerr.FencedInstanceID.Code, fmt.Sprintf("Member %s is held by instance id %s.", r.id, *inst)
			}
			return m, false, 0, ""
		}
		if r.maxSize > 0 && len(mg.members) >= r.maxSize {
			return none, false, kerr.GroupMaxSizeReached.Code, fmt.Sprintf("The %s group has reached its maximum capacity of %d members.", mg.kind, r.maxSize)
		}
		m := mg.revoking().newMember(r.id)
		if r.instanceID != nil {
			inst := *r.instanceID
			m.base().instanceID = &inst
			mg.static[inst] = r.id
		}
		mg.members[r.id] = m
		g.c.logger.Info("member joins the "+mg.kind.String()+" group", "group", g.id, "member", r.id)
		return m, true, 0, ""
	}
	if r.instanceID != nil {
		cur, ok := mg.static[*r.instanceID]
		if !ok {
			return none, false, kerr.UnknownMemberID.Code, fmt.Sprintf("Instance id %s is unknown.", *r.instanceID)
		}
		if cur != r.id {
			return none, false, kerr.FencedInstanceID.Code, fmt.Sprintf("Static member %s with instance id %s was fenced by member %s.", r.id, *r.instanceID, cur)
		}
	}
	m, ok := mg.members[r.id]
	if !ok {
		return none, false, kerr.UnknownMemberID.Code, fmt.Sprintf("Member %s is not a member of group %s.", r.id, g.id)
	}
	b := m.base()
	switch {
	case r.epoch > b.epoch:
		return none, false, kerr.FencedMemberEpoch.Code, fmt.Sprintf("The %s group member has a greater member epoch (%d) than the one known by the group coordinator (%d). The member must abandon all its %s and rejoin.", mg.kind, r.epoch, b.epoch, mg.kind.unit())
	case r.epoch < b.epoch:
		// The answer that moved it to its epoch may have been lost: its previous epoch
		// with a subset of what it holds is accepted.
		if r.epoch != b.prevEpoch || !r.ownsSubset(b.assigned) {
			return none, false, kerr.FencedMemberEpoch.Code, fmt.Sprintf("The %s group member has a smaller member epoch (%d) than the one known by the group coordinator (%d). The member must abandon all its %s and rejoin.", mg.kind, r.epoch, b.epoch, mg.kind.unit())
		}
	}
	return m, false, 0, ""
}

// replaceStaticLocked: a static member that left for now (epoch -2) is back under a new
// member id: the new member takes its place, its target and what it held, from epoch 0
// (it reconciles to the target at once, keeping what it held).
func (mg *modernGroup[A, M]) replaceStaticLocked(g *group, old M, id string, recs *[]Record) M {
	r := mg.revoking()
	ob := old.base()
	n := r.replacement(old, id)
	target, hasTarget := mg.target[ob.id]
	*recs = append(*recs, mg.memberTombstones(g, ob.id)...)
	r.dropLocked(g, old)
	mg.members[id] = n
	mg.static[*ob.instanceID] = id
	r.claimLocked(g, n)
	*recs = append(*recs, r.memberRecord(g, n))
	if hasTarget {
		mg.target[id] = target
		*recs = append(*recs, mg.targetRecord(g, id, target))
	}
	*recs = append(*recs, mg.currentRecord(g, n))
	g.c.logger.Info("static member rejoins the "+mg.kind.String()+" group", "group", g.id, "instance", *ob.instanceID, "member", id, "replaces", ob.id)
	return n
}

// leavingLocked finds the member a leave (epoch -1 or -2) names, by its instance id
// when it gives one.
func (mg *modernGroup[A, M]) leavingLocked(g *group, id string, instanceID *string) (M, int16, string) {
	var none M
	if instanceID != nil {
		cur, ok := mg.static[*instanceID]
		if !ok {
			return none, kerr.UnknownMemberID.Code, fmt.Sprintf("Instance id %s is unknown.", *instanceID)
		}
		if cur != id {
			return none, kerr.FencedInstanceID.Code, fmt.Sprintf("Static member %s with instance id %s was fenced by member %s.", id, *instanceID, cur)
		}
		return mg.members[cur], 0, ""
	}
	m, ok := mg.members[id]
	if !ok {
		return none, kerr.UnknownMemberID.Code, fmt.Sprintf("Member %s is not a member of group %s.", id, g.id)
	}
	return m, 0, ""
}

// leaveLocked: at epoch -1 m leaves (it is fenced); at -2, a static member leaves for
// now: it keeps its place, what it holds and its session, at epoch -2, until its
// instance joins again or its session expires.
func (mg *modernGroup[A, M]) leaveLocked(g *group, m M, epoch int32, recs *[]Record) {
	b := m.base()
	if epoch == staticLeaveEpoch {
		g.c.logger.Info("static member leaves the "+mg.kind.String()+" group for now", "group", g.id, "member", b.id)
		r := mg.revoking()
		r.setAssignmentLocked(g, m, staticLeaveEpoch, b.epoch, msStable, b.assigned, r.none())
		b.stopRevokeTimer()
		*recs = append(*recs, mg.currentRecord(g, m))
		mg.armSessionLocked(g, m)
		return
	}
	g.c.logger.Info("member leaves the "+mg.kind.String()+" group", "group", g.id, "member", b.id)
	mg.rules.fenceLocked(g, m, recs)
}

// reconciled is a member's next epochs, state and holdings.
type reconciled[A any] struct {
	epoch    int32
	state    memberState
	assigned A
	pending  A
}

// reconcileLocked moves m towards its target, as Kafka's CurrentAssignmentBuilder: a
// STABLE member behind the assignment epoch, or an UNRELEASED one, takes next(its
// epoch); an UNREVOKED member waits until its heartbeat no longer lists what it gives
// up (stillOwns), then takes next(its epoch + 1); a member in an unknown state takes
// next(assignment epoch) if its heartbeat says it owns nothing, else unknown is true
// (the caller fences it). A change is recorded (CurrentAssignment), and the rebalance
// timer runs while the member is UNREVOKED.
func (mg *modernGroup[A, M]) reconcileLocked(g *group, m M, stillOwns func(A) bool, ownsNothing bool, next func(epoch int32) reconciled[A], recs *[]Record) (unknown bool) {
	b := m.base()
	if b.epoch == staticLeaveEpoch {
		return false
	}
	te := mg.assignmentEpoch
	var n reconciled[A]
	switch b.state {
	case msStable:
		if b.epoch == te {
			return false
		}
		n = next(b.epoch)
	case msUnrevoked:
		if stillOwns(b.pending) {
			return false
		}
		n = next(min(b.epoch+1, te))
	case msUnreleased:
		n = next(b.epoch)
	default:
		if !ownsNothing {
			return true
		}
		n = next(te)
	}
	if n.epoch == b.epoch && n.state == b.state && n.assigned.equal(b.assigned) && n.pending.equal(b.pending) {
		return false
	}
	wasUnrevoked, oldEpoch := b.state == msUnrevoked, b.epoch
	mg.revoking().setAssignmentLocked(g, m, n.epoch, b.epoch, n.state, n.assigned, n.pending)
	*recs = append(*recs, mg.currentRecord(g, m))
	switch {
	case b.state == msUnrevoked && (!wasUnrevoked || b.epoch != oldEpoch):
		mg.armRevokeTimerLocked(g, m)
	case b.state != msUnrevoked:
		b.stopRevokeTimer()
	}
	return false
}

// nextReconciled is a member's next step from what it keeps of what it holds, what
// it must give up (revoke; revoking when its heartbeat still lists some of it) and
// whether part of its target is still held by others (unreleased): while revoking, it
// stays at its epoch, UNREVOKED; else it moves to the target's epoch te holding keep
// (with what it may take added by the caller), UNRELEASED or STABLE.
func nextReconciled[A any](epoch, te int32, keep, revoke, none A, revoking, unreleased bool) reconciled[A] {
	if revoking {
		return reconciled[A]{epoch: epoch, state: msUnrevoked, assigned: keep, pending: revoke}
	}
	state := msStable
	if unreleased {
		state = msUnreleased
	}
	return reconciled[A]{epoch: te, state: state, assigned: keep, pending: none}
}

// fetchMemberCode checks the member of an OffsetFetch v9+ (Kafka's
// validateOffsetFetch of consumer and streams groups): no member id with a negative
// epoch is an admin's fetch; else UNKNOWN_MEMBER_ID, or STALE_MEMBER_EPOCH unless the
// epoch is the member's.
func (mg *modernGroup[A, M]) fetchMemberCode(memberID *string, epoch int32) int16 {
	if memberID == nil || (*memberID == "" && epoch < 0) {
		return 0
	}
	m, ok := mg.members[*memberID]
	switch {
	case !ok:
		return kerr.UnknownMemberID.Code
	case epoch != m.base().epoch:
		return kerr.StaleMemberEpoch.Code
	}
	return 0
}

// serveHeartbeat serves a heartbeat of a modern group: step runs under the lock of the
// group id names (made when the member joins), and the answer goes once the records
// step added are durable: ok with step's answer, or fail with an error code and
// message (at once for an error, after the records step added before it, such as a
// converted empty group's).
func serveHeartbeat[R any](c *Coordinator, kind groupKind, id string, join bool, fail func(code int16, msg string),
	step func(g *group, recs *[]Record) (R, int16, string), ok func(R)) {
	g, code := c.lookup(id, join)
	if code != 0 {
		fail(code, "")
		return
	}
	if g == nil {
		fail(kerr.GroupIDNotFound.Code, fmt.Sprintf("%s group %s not found.", kind.title(), id))
		return
	}
	g.with(func(fx *effects) {
		var recs []Record
		r, code, msg := step(g, &recs)
		if code != 0 {
			g.writeThenLocked(fx, recs, func(error) { fail(code, msg) })
			return
		}
		g.writeThenLocked(fx, recs, func(err error) {
			if err != nil {
				fail(appendErrorCode(err, false), "")
				return
			}
			ok(r)
		})
	})
}

// errorMessage is a heartbeat answer's error message: msg, else the code's own.
func errorMessage(code int16, msg string) *string {
	if msg == "" {
		msg = kerr.ErrorForCode(code).Error()
	}
	return &msg
}

// heartbeatKindLocked checks that a heartbeat reaches a live group of kind. A join may
// take over a classic group when free says it may (convert makes the group kind's);
// any other group is GROUP_ID_NOT_FOUND.
func (g *group) heartbeatKindLocked(kind groupKind, join, free bool, convert func()) (int16, string) {
	switch {
	case g.state == stateDead:
		return kerr.CoordinatorNotAvailable.Code, ""
	case g.kind == kind:
		return 0, ""
	case g.kind == kindClassic && join && free:
		convert()
		return 0, ""
	}
	return kerr.GroupIDNotFound.Code, fmt.Sprintf("Group %s is not a %s group.", g.id, kind)
}

// describeModern runs fill under the lock of the group id names when it is a live
// group of kind, and returns the error code and message of the group's entry.
func (c *Coordinator) describeModern(id string, kind groupKind, fill func(g *group)) (int16, *string) {
	g, code := c.lookup(id, false)
	switch {
	case code != 0:
		return code, nil
	case g == nil:
		msg := fmt.Sprintf("Group %s not found.", id)
		return kerr.GroupIDNotFound.Code, &msg
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.kind != kind || g.state == stateDead {
		msg := fmt.Sprintf("Group %s is not a %s group.", id, kind)
		return kerr.GroupIDNotFound.Code, &msg
	}
	fill(g)
	return 0, nil
}

// title is the kind's name as a sentence starts with it.
func (k groupKind) title() string {
	s := k.String()
	return strings.ToUpper(s[:1]) + s[1:]
}

// loadedModern gathers a modern group's records during a replay: where its last
// metadata record was and whether it lives, and the values of its members', targets'
// and current assignments' records as they decode (MV, TV, CV).
type loadedModern[MV, TV, CV any] struct {
	seq         int  // replay position of the group's last metadata record
	live        bool // that record holds a value (not a tombstone) that decodes
	members     map[string]MV
	targetEpoch int32
	targets     map[string]TV
	current     map[string]CV
}

func newLoadedModern[MV, TV, CV any]() loadedModern[MV, TV, CV] {
	return loadedModern[MV, TV, CV]{members: map[string]MV{}, targets: map[string]TV{}, current: map[string]CV{}}
}

// decodeValue decodes a record's value; a tombstone is V's zero value.
func decodeValue[V any](value []byte, decode func([]byte) (V, error)) (V, error) {
	if value == nil {
		var zero V
		return zero, nil
	}
	return decode(value)
}

// applyKeyed folds a record keyed by a member id (or a regex) into m: a tombstone
// deletes the key, a value that decodes replaces it.
func applyKeyed[V any](m map[string]V, key string, value []byte, decode func([]byte) (V, error)) error {
	if value == nil {
		delete(m, key)
		return nil
	}
	v, err := decode(value)
	if err == nil {
		m[key] = v
	}
	return err
}

// restoreMembers makes mg's members from l's records: member makes one from its
// metadata, current sets its epochs and holdings from its current assignment when it
// has one (without, it starts at epoch 0 holding nothing); and the targets of those
// members.
func restoreMembers[A holding[A], M memberOf[A], MV, TV, CV any](mg *modernGroup[A, M], l *loadedModern[MV, TV, CV],
	member func(id string, v MV) M, current func(m M, v CV), target func(TV) A) {
	for id, v := range l.members {
		m := member(id, v)
		if cur, ok := l.current[id]; ok {
			current(m, cur)
		}
		mg.members[id] = m
		if inst := m.base().instanceID; inst != nil {
			mg.static[*inst] = id
		}
	}
	for id, tv := range l.targets {
		if _, ok := mg.members[id]; ok {
			mg.target[id] = target(tv)
		}
	}
}

// restoredState is a member state as a record holds it; a value Kafka may add later is
// msUnknown (the member is fenced unless it owns nothing).
func restoredState(s int8) memberState {
	switch memberState(s) {
	case msStable, msUnrevoked, msUnreleased:
		return memberState(s)
	}
	return msUnknown
}

// unit is what members of the kind hold, in log lines and error messages.
func (k groupKind) unit() string {
	if k == kindStreams {
		return "tasks"
	}
	return "partitions"
}

// convertFromClassicLocked turns an empty classic group into an empty group of kind
// (consumer or streams; a share group takes only a fresh id, convertToShareLocked), as
// Kafka's offline migration: the classic metadata record, if any, is deleted;
// committed offsets stay.
func (g *group) convertFromClassicLocked(kind groupKind, recs *[]Record) {
	if g.generation > 0 || g.protocolType != "" {
		*recs = append(*recs, g.groupTombstone())
		g.c.logger.Info("empty classic group becomes a "+kind.String()+" group", "group", g.id)
	}
	g.stopTimersLocked()
	g.kind = kind
	g.protocolType, g.protocol, g.leader, g.generation = kind.String(), "", "", 0
	g.subscriptions = nil
}

// convertToClassicLocked turns an empty consumer or streams group into an empty classic
// group (a JoinGroup arrived): its records are deleted, committed offsets stay.
func (g *group) convertToClassicLocked(recs *[]Record) {
	mg := g.modern()
	*recs = append(*recs, mg.tombstonesLocked(g)...)
	g.c.logger.Info("empty "+g.kind.String()+" group becomes a classic group", "group", g.id)
	mg.stopTimers()
	g.kind = kindClassic
	g.cg, g.st = nil, nil
	g.protocolType, g.protocol, g.leader, g.generation = "", "", "", 0
	g.subscriptions = nil
	g.transition(stateEmpty)
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
