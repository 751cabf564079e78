package group

import (
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
)

// The path of a modern group's heartbeat, in the order it runs, and what describes
// and offset fetches need of members:
//
//	serveHeartbeat         lookup (made for a join), answer once the records are durable
//	heartbeatKindLocked    the group is of the kind, or an empty classic group converts
//	memberLocked           the member: joins, rejoins, static replacement, epoch fence
//	  or leaveLocked       epoch -1 (fenced) or -2 (a static member away)
//	                       (consumer and streams groups; shareHeartbeatLocked finds a
//	                       share group's members, which are never static)
//	updateClient           the member's client fields (each protocol adds its own)
//	reconcileLocked        towards the target: revoke first, then take what is free
//	                       (consumer and streams groups; share members take their target)

// serveHeartbeat serves a heartbeat of a modern group: step runs under the lock of the
// group id names (made when the member joins), and the answer goes once the records
// step added are durable: ok with step's answer, or fail with an error code and
// message (at once for an error, after the records step added before it, such as a
// converted empty group's).
func serveHeartbeat[R any](c *Coordinator, kind groupKind, id string, join bool, fail func(code int16, msg string),
	step func(g *group, recs *[]Record) (R, int16, string), ok func(R)) {
	serveHeartbeatThen(c, kind, id, join, fail, step, nil, ok)
}

// serveHeartbeatThen is serveHeartbeat with a step between the write of a successful
// heartbeat's records and its answer: written is told the write's outcome (the answer
// is then failed by serveHeartbeatThen) or, on success, given the answer to send when
// it is done (a share group initializes the share state of partitions it assigns
// first). nil written answers at once.
func serveHeartbeatThen[R any](c *Coordinator, kind groupKind, id string, join bool, fail func(code int16, msg string),
	step func(g *group, recs *[]Record) (R, int16, string), written func(g *group, err error, answer func()), ok func(R)) {
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
			if written != nil {
				written(g, err, func() { ok(r) })
				if err == nil {
					return
				}
			}
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
