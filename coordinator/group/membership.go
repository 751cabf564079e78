package group

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func millis(v int32) time.Duration { return time.Duration(v) * time.Millisecond }

// JoinGroup handles JoinGroup (v0+). clientID comes from the request header and
// clientHost from the connection. cb is called exactly once: at once for errors and
// for joins that need no rebalance, otherwise when the rebalance completes. A v4+
// join without a member id (and without an instance id) is answered
// MEMBER_ID_REQUIRED with the id to join with.
func (c *Coordinator) JoinGroup(req *kmsg.JoinGroupRequest, clientID, clientHost string, cb func(*kmsg.JoinGroupResponse)) {
	fail := func(code int16) {
		r := kmsg.NewPtrJoinGroupResponse()
		r.Version = req.Version
		r.ErrorCode = code
		r.Generation = -1
		r.MemberID = req.MemberID
		cb(r)
	}
	session := millis(req.SessionTimeoutMillis)
	rebalance := millis(req.RebalanceTimeoutMillis)
	if req.Version < 1 || rebalance <= 0 {
		rebalance = session
	}
	if req.Group == "" {
		fail(kerr.InvalidGroupID.Code)
		return
	}
	if session < c.cfg.MinSessionTimeout || session > c.cfg.MaxSessionTimeout {
		fail(kerr.InvalidSessionTimeout.Code)
		return
	}
	if req.ProtocolType == "" || len(req.Protocols) == 0 {
		fail(kerr.InconsistentGroupProtocol.Code)
		return
	}
	size := 0
	for _, p := range req.Protocols {
		size += len(p.Name) + len(p.Metadata)
	}
	if size > c.cfg.MaxProtocolMetadata {
		fail(kerr.InvalidRequest.Code)
		return
	}
	g, code := c.lookup(req.Group, req.MemberID == "")
	if code != 0 {
		fail(code)
		return
	}
	if g == nil {
		fail(kerr.UnknownMemberID.Code)
		return
	}
	g.with(func(fx *effects) {
		if g.state == stateDead {
			fx.add(func() { fail(kerr.CoordinatorNotAvailable.Code) })
			return
		}
		switch g.kind {
		case kindConsumer, kindStreams:
			if g.modern().size() > 0 {
				// A classic member cannot join a consumer or streams group with members:
				// the online migration of KIP-848 is not served.
				fx.add(func() { fail(kerr.InconsistentGroupProtocol.Code) })
				return
			}
			var recs []Record
			g.convertToClassicLocked(&recs) // offline migration
			g.writeThenLocked(fx, recs, nil)
		case kindShare:
			fx.add(func() { fail(kerr.InconsistentGroupProtocol.Code) })
			return
		}
		if !g.supportsProtocols(req.ProtocolType, req.Protocols) {
			fx.add(func() { fail(kerr.InconsistentGroupProtocol.Code) })
			return
		}
		j := joinArgs{req: req, clientID: clientID, clientHost: clientHost, session: session, rebalance: rebalance, cb: cb}
		if code := g.joinLocked(fx, &j); code != 0 {
			fx.add(func() { fail(code) })
		}
		if g.state == statePreparingRebalance {
			g.tryCompleteJoinLocked(fx)
		}
	})
}

type joinArgs struct {
	req                  *kmsg.JoinGroupRequest
	clientID, clientHost string
	session, rebalance   time.Duration
	cb                   func(*kmsg.JoinGroupResponse)
}

func (g *group) supportsProtocols(ptype string, ps []kmsg.JoinGroupRequestProtocol) bool {
	if len(g.members) == 0 {
		return true // type and protocols were checked non-empty already
	}
	if ptype != g.protocolType {
		return false
	}
	ms := make([]*member, 0, len(g.members))
	for _, m := range g.members {
		ms = append(ms, m)
	}
	_, ok := selectCommon(ms, ps)
	return ok
}

// joinLocked routes a join; a non-zero code is answered by the caller.
func (g *group) joinLocked(fx *effects, j *joinArgs) int16 {
	req := j.req
	if req.MemberID == "" {
		prefix := j.clientID
		if req.InstanceID != nil {
			prefix = *req.InstanceID
		}
		if req.InstanceID == nil && g.c.cfg.MaxGroupSize > 0 && len(g.members)+len(g.pending) >= g.c.cfg.MaxGroupSize {
			return kerr.GroupMaxSizeReached.Code
		}
		id := g.c.cfg.NewMemberID(prefix)
		if req.InstanceID != nil {
			if _, ok := g.static[*req.InstanceID]; ok {
				g.replaceStaticLocked(fx, id, j)
				return 0
			}
			if g.c.cfg.MaxGroupSize > 0 && len(g.members)+len(g.pending) >= g.c.cfg.MaxGroupSize {
				return kerr.GroupMaxSizeReached.Code
			}
			g.addMemberLocked(fx, id, j)
			return 0
		}
		if req.Version >= 4 {
			g.addPendingLocked(id, j.session)
			r := kmsg.NewPtrJoinGroupResponse()
			r.Version = req.Version
			r.ErrorCode = kerr.MemberIDRequired.Code
			r.Generation = -1
			r.MemberID = id
			fx.add(func() { j.cb(r) })
			return 0
		}
		g.addMemberLocked(fx, id, j)
		return 0
	}
	if _, ok := g.pending[req.MemberID]; ok {
		if req.InstanceID != nil {
			return kerr.FencedInstanceID.Code // a pending member is never static
		}
		g.addMemberLocked(fx, req.MemberID, j)
		return 0
	}
	if code := g.validateMember(req.MemberID, req.InstanceID); code != 0 {
		return code
	}
	m := g.members[req.MemberID]
	switch g.state {
	case statePreparingRebalance:
		g.updateMemberLocked(fx, m, j)
	case stateCompletingRebalance:
		if m.sameProtocols(req.Protocols) {
			// The member lost our join answer: hand it the current generation again.
			m.joinVersion = req.Version
			r := g.joinResponse(m, m.id == g.leader)
			fx.add(func() { j.cb(r) })
			return 0
		}
		g.updateMemberLocked(fx, m, j)
		g.maybePrepareRebalanceLocked(fx)
	case stateStable:
		if m.id == g.leader || !m.sameProtocols(req.Protocols) {
			// A leader's join asks for a rebalance (its view of the topics changed).
			g.updateMemberLocked(fx, m, j)
			g.maybePrepareRebalanceLocked(fx)
			return 0
		}
		m.joinVersion = req.Version
		r := g.joinResponse(m, false)
		fx.add(func() { j.cb(r) })
	default:
		return kerr.UnknownMemberID.Code
	}
	return 0
}

// validateMember checks a request's member id and instance id against the group:
// FENCED_INSTANCE_ID when the instance belongs to another member id.
func (g *group) validateMember(id string, instanceID *string) int16 {
	if instanceID != nil {
		cur, ok := g.static[*instanceID]
		if !ok {
			return kerr.UnknownMemberID.Code
		}
		if cur != id {
			return kerr.FencedInstanceID.Code
		}
		return 0
	}
	if g.members[id] == nil {
		return kerr.UnknownMemberID.Code
	}
	return 0
}

func (g *group) addPendingLocked(id string, session time.Duration) {
	g.pending[id]++
	seq := g.pending[id]
	g.after(session, func(fx *effects) {
		if s, ok := g.pending[id]; !ok || s != seq || g.state == stateDead {
			return
		}
		delete(g.pending, id)
		if g.state == statePreparingRebalance {
			g.tryCompleteJoinLocked(fx)
		}
	})
}

func protocolsOf(ps []kmsg.JoinGroupRequestProtocol) []protocol {
	out := make([]protocol, len(ps))
	for i, p := range ps {
		out[i] = protocol{name: p.Name, metadata: append([]byte(nil), p.Metadata...)}
	}
	return out
}

func (g *group) addMemberLocked(fx *effects, id string, j *joinArgs) {
	m := &member{
		id:               id,
		instanceID:       j.req.InstanceID,
		clientID:         j.clientID,
		clientHost:       j.clientHost,
		sessionTimeout:   j.session,
		rebalanceTimeout: j.rebalance,
		protocolType:     j.req.ProtocolType,
		protocols:        protocolsOf(j.req.Protocols),
		joinCB:           j.cb,
		joinVersion:      j.req.Version,
		isNew:            true,
	}
	if g.state == statePreparingRebalance && g.generation == 0 {
		g.newMemberAdded = true
	}
	delete(g.pending, id)
	g.addMember(m)
	g.armSessionLocked(m, g.c.cfg.NewMemberJoinTimeout)
	g.maybePrepareRebalanceLocked(fx)
}

// updateMemberLocked parks a known member's rejoin with its new protocols.
func (g *group) updateMemberLocked(fx *effects, m *member, j *joinArgs) {
	if old := m.joinCB; old != nil {
		r := kmsg.NewPtrJoinGroupResponse()
		r.Version = m.joinVersion
		r.ErrorCode = kerr.RebalanceInProgress.Code
		r.Generation = -1
		r.MemberID = m.id
		fx.add(func() { old(r) })
	}
	m.protocols = protocolsOf(j.req.Protocols)
	m.sessionTimeout, m.rebalanceTimeout = j.session, j.rebalance
	m.joinCB, m.joinVersion = j.cb, j.req.Version
}

// replaceStaticLocked: a static member rejoined without its member id (it restarted).
// It takes over the old member's place under newID; the old id is fenced. In a
// Stable group whose protocol does not change, no rebalance happens (KIP-345).
func (g *group) replaceStaticLocked(fx *effects, newID string, j *joinArgs) {
	inst := *j.req.InstanceID
	oldID := g.static[inst]
	m := g.members[oldID]
	oldLeader := g.leader
	if cb := m.joinCB; cb != nil {
		r := kmsg.NewPtrJoinGroupResponse()
		r.Version, r.ErrorCode, r.Generation, r.MemberID = m.joinVersion, kerr.FencedInstanceID.Code, -1, oldID
		fx.add(func() { cb(r) })
		m.joinCB = nil
	}
	if cb := m.syncCB; cb != nil {
		r := kmsg.NewPtrSyncGroupResponse()
		r.Version, r.ErrorCode = m.syncVersion, kerr.FencedInstanceID.Code
		fx.add(func() { cb(r) })
		m.syncCB = nil
	}
	g.renameMember(m, oldID, newID)
	old := struct {
		protocols          []protocol
		session, rebalance time.Duration
		clientID, host     string
	}{m.protocols, m.sessionTimeout, m.rebalanceTimeout, m.clientID, m.clientHost}
	m.protocols = protocolsOf(j.req.Protocols)
	m.sessionTimeout, m.rebalanceTimeout = j.session, j.rebalance
	m.clientID, m.clientHost = j.clientID, j.clientHost
	m.joinCB, m.joinVersion = j.cb, j.req.Version
	g.armSessionLocked(m, m.sessionTimeout)

	switch g.state {
	case stateStable:
		if sel, _ := g.selectProtocol(); sel != g.protocol {
			g.maybePrepareRebalanceLocked(fx)
			return
		}
		gen := g.generation
		g.storeGroupLocked(fx, nil, func(fx *effects, err error) {
			if g.members[newID] != m || m.joinCB == nil {
				return // fenced again or the member left meanwhile
			}
			if g.state != stateStable || g.generation != gen {
				return // a rebalance started: the parked join completes with it
			}
			cb := m.joinCB
			m.joinCB = nil
			if err != nil {
				g.renameMember(m, newID, oldID)
				m.protocols, m.sessionTimeout, m.rebalanceTimeout = old.protocols, old.session, old.rebalance
				m.clientID, m.clientHost = old.clientID, old.host
				r := kmsg.NewPtrJoinGroupResponse()
				r.Version, r.ErrorCode, r.Generation, r.MemberID = m.joinVersion, appendErrorCode(err, false), -1, ""
				fx.add(func() { cb(r) })
				return
			}
			var r *kmsg.JoinGroupResponse
			if m.joinVersion >= 9 {
				// KIP-814: the static leader learns it leads but need not assign.
				r = g.joinResponse(m, m.id == g.leader)
				r.SkipAssignment = m.id == g.leader
			} else {
				// Older clients: answer with the leader id as it was, so a returning
				// leader does not recompute an assignment a Stable group would not send.
				r = g.joinResponse(m, false)
				if oldLeader == oldID {
					r.LeaderID = oldID
				}
			}
			fx.add(func() { cb(r) })
		})
	case stateCompletingRebalance:
		g.prepareRebalanceLocked(fx)
	case statePreparingRebalance:
		// parked; completes with the rebalance
	}
}

func (g *group) renameMember(m *member, from, to string) {
	delete(g.members, from)
	m.id = to
	g.members[to] = m
	if m.instanceID != nil {
		g.static[*m.instanceID] = to
	}
	if g.leader == from {
		g.leader = to
	}
	if _, ok := g.pendingSync[from]; ok {
		delete(g.pendingSync, from)
		g.pendingSync[to] = struct{}{}
	}
}

// joinResponse is a successful join answer for m; the leader view lists every member
// with its metadata for the selected protocol.
func (g *group) joinResponse(m *member, leaderView bool) *kmsg.JoinGroupResponse {
	r := kmsg.NewPtrJoinGroupResponse()
	r.Version = m.joinVersion
	r.Generation = g.generation
	pt, p := g.protocolType, g.protocol
	r.ProtocolType, r.Protocol = &pt, &p
	r.LeaderID = g.leader
	r.MemberID = m.id
	if leaderView {
		ms := g.sortedMembers()
		r.Members = make([]kmsg.JoinGroupResponseMember, 0, len(ms))
		for _, o := range ms {
			r.Members = append(r.Members, kmsg.JoinGroupResponseMember{
				MemberID:         o.id,
				InstanceID:       o.instanceID,
				ProtocolMetadata: o.metadataFor(g.protocol),
			})
		}
	}
	return r
}

// armSessionLocked (re)starts m's session timer. When it fires without a heartbeat
// in between, the member is removed, unless it is waiting in a join or sync of a
// rebalance (those end by the rebalance and pending-sync timeouts).
func (g *group) armSessionLocked(m *member, d time.Duration) {
	if m.hbTimer != nil {
		m.hbTimer.Stop()
	}
	m.hbSeq++
	seq := m.hbSeq
	m.hbTimer = g.after(d, func(fx *effects) {
		if g.members[m.id] != m || m.hbSeq != seq || g.state == stateDead {
			return
		}
		if !m.isNew && (m.joinCB != nil || m.syncCB != nil) {
			return
		}
		g.c.logger.Info("member session expired", "group", g.id, "member", m.id)
		g.removeAndUpdateLocked(fx, m)
	})
}

// removeAndUpdateLocked removes m (left or expired) and moves the group on.
func (g *group) removeAndUpdateLocked(fx *effects, m *member) {
	if cb := m.joinCB; cb != nil {
		r := kmsg.NewPtrJoinGroupResponse()
		r.Version, r.ErrorCode, r.Generation, r.MemberID = m.joinVersion, kerr.UnknownMemberID.Code, -1, m.id
		fx.add(func() { cb(r) })
		m.joinCB = nil
	}
	if cb := m.syncCB; cb != nil {
		r := kmsg.NewPtrSyncGroupResponse()
		r.Version, r.ErrorCode = m.syncVersion, kerr.UnknownMemberID.Code
		fx.add(func() { cb(r) })
		m.syncCB = nil
	}
	g.removeMember(m.id)
	switch g.state {
	case stateStable, stateCompletingRebalance:
		g.maybePrepareRebalanceLocked(fx)
	case statePreparingRebalance:
		g.tryCompleteJoinLocked(fx)
	}
}

func (g *group) maybePrepareRebalanceLocked(fx *effects) {
	switch g.state {
	case stateStable, stateCompletingRebalance, stateEmpty:
		g.prepareRebalanceLocked(fx)
	}
}

func (g *group) prepareRebalanceLocked(fx *effects) {
	if g.state == stateCompletingRebalance {
		g.propagateErrorLocked(fx, kerr.RebalanceInProgress.Code)
	}
	g.clearPendingSyncLocked()
	delay := g.rebalanceTimeout()
	g.initialJoin = false
	if g.state == stateEmpty && g.c.cfg.InitialRebalanceDelay > 0 {
		g.initialJoin = true
		g.newMemberAdded = false
		g.initialRemain = max(delay-g.c.cfg.InitialRebalanceDelay, 0)
		delay = g.c.cfg.InitialRebalanceDelay
	}
	g.transition(statePreparingRebalance)
	g.armJoinTimerLocked(delay)
	g.tryCompleteJoinLocked(fx)
}

func (g *group) armJoinTimerLocked(d time.Duration) {
	if g.joinTimer != nil {
		g.joinTimer.Stop()
	}
	g.joinSeq2++
	seq := g.joinSeq2
	g.joinTimer = g.after(d, func(fx *effects) {
		if g.joinSeq2 != seq || g.state != statePreparingRebalance {
			return
		}
		if g.initialJoin && g.newMemberAdded && g.initialRemain > 0 {
			// Members are still arriving: wait another delay, bounded by the
			// rebalance timeout.
			g.newMemberAdded = false
			d := min(g.c.cfg.InitialRebalanceDelay, g.initialRemain)
			g.initialRemain -= d
			g.armJoinTimerLocked(d)
			return
		}
		g.initialJoin = false
		g.completeJoinLocked(fx)
	})
}

func (g *group) tryCompleteJoinLocked(fx *effects) {
	if g.state == statePreparingRebalance && !g.initialJoin && g.allJoined() {
		g.completeJoinLocked(fx)
	}
}

// completeJoinLocked ends the join phase: members that did not rejoin are dropped
// (static ones are kept: they may be restarting), a new generation starts, and every
// parked join is answered.
func (g *group) completeJoinLocked(fx *effects) {
	if g.joinTimer != nil {
		g.joinTimer.Stop()
	}
	g.joinSeq2++
	g.initialJoin = false
	for _, m := range g.sortedMembers() {
		if m.joinCB == nil && m.instanceID == nil {
			g.removeMember(m.id)
		}
	}
	if g.state == stateDead {
		return
	}
	if !g.electJoinedLeader() && len(g.members) > 0 {
		// Only static members that have not rejoined remain: wait for them, or for
		// their sessions to expire.
		g.armJoinTimerLocked(g.rebalanceTimeout())
		return
	}
	g.generation++
	g.pendingSync = map[string]struct{}{}
	if len(g.members) == 0 {
		g.protocol = ""
		g.subscriptions = nil
		g.transition(stateEmpty)
		g.c.logger.Info("group is empty", "group", g.id, "generation", g.generation)
		g.storeGroupLocked(fx, nil, nil)
		return
	}
	g.protocol, _ = g.selectProtocol()
	g.computeSubscriptions()
	g.transition(stateCompletingRebalance)
	for _, m := range g.sortedMembers() {
		if cb := m.joinCB; cb != nil {
			r := g.joinResponse(m, m.id == g.leader)
			fx.add(func() { cb(r) })
			m.joinCB = nil
		}
		g.armSessionLocked(m, m.sessionTimeout)
		m.isNew = false
		g.pendingSync[m.id] = struct{}{}
	}
	g.armSyncTimerLocked(g.rebalanceTimeout())
}

// electJoinedLeader keeps the leader if it rejoined, else picks a member that did.
func (g *group) electJoinedLeader() bool {
	if l := g.members[g.leader]; l != nil && l.joinCB != nil {
		return true
	}
	for _, m := range g.sortedMembers() {
		if m.joinCB != nil {
			g.leader = m.id
			return true
		}
	}
	return false
}

// armSyncTimerLocked: members that have not sent SyncGroup within the rebalance
// timeout are removed and the group rebalances again.
func (g *group) armSyncTimerLocked(d time.Duration) {
	if g.syncTimer != nil {
		g.syncTimer.Stop()
	}
	g.syncSeq++
	seq, gen := g.syncSeq, g.generation
	g.syncTimer = g.after(d, func(fx *effects) {
		if g.syncSeq != seq || g.generation != gen || len(g.pendingSync) == 0 {
			return
		}
		if g.state != stateCompletingRebalance && g.state != stateStable {
			return
		}
		for id := range g.pendingSync {
			g.c.logger.Info("member did not sync in time", "group", g.id, "member", id)
			if m := g.members[id]; m != nil {
				if cb := m.syncCB; cb != nil {
					m.syncCB = nil
					r := kmsg.NewPtrSyncGroupResponse()
					r.Version, r.ErrorCode = m.syncVersion, kerr.UnknownMemberID.Code
					fx.add(func() { cb(r) })
				}
			}
			g.removeMember(id)
		}
		g.prepareRebalanceLocked(fx)
	})
}

func (g *group) clearPendingSyncLocked() {
	g.pendingSync = map[string]struct{}{}
	if g.syncTimer != nil {
		g.syncTimer.Stop()
	}
	g.syncSeq++
}

// propagateErrorLocked drops every assignment and answers parked syncs with code.
func (g *group) propagateErrorLocked(fx *effects, code int16) {
	for _, m := range g.members {
		m.assignment = nil
		if cb := m.syncCB; cb != nil {
			m.syncCB = nil
			r := kmsg.NewPtrSyncGroupResponse()
			r.Version, r.ErrorCode = m.syncVersion, code
			fx.add(func() { cb(r) })
			g.armSessionLocked(m, m.sessionTimeout)
		}
	}
}

// failParkedLocked answers every parked join and sync with code.
func (g *group) failParkedLocked(fx *effects, code int16) {
	for _, m := range g.members {
		if cb := m.joinCB; cb != nil {
			m.joinCB = nil
			r := kmsg.NewPtrJoinGroupResponse()
			r.Version, r.ErrorCode, r.Generation, r.MemberID = m.joinVersion, code, -1, m.id
			fx.add(func() { cb(r) })
		}
		if cb := m.syncCB; cb != nil {
			m.syncCB = nil
			r := kmsg.NewPtrSyncGroupResponse()
			r.Version, r.ErrorCode = m.syncVersion, code
			fx.add(func() { cb(r) })
		}
	}
}

// SyncGroup handles SyncGroup (v0+). The leader's request carries the assignment;
// every member's answer waits until the leader's assignment is durable.
func (c *Coordinator) SyncGroup(req *kmsg.SyncGroupRequest, cb func(*kmsg.SyncGroupResponse)) {
	fail := func(code int16) {
		r := kmsg.NewPtrSyncGroupResponse()
		r.Version, r.ErrorCode = req.Version, code
		cb(r)
	}
	g, code := c.lookup(req.Group, false)
	if code != 0 {
		fail(code)
		return
	}
	if g == nil {
		fail(kerr.UnknownMemberID.Code)
		return
	}
	g.with(func(fx *effects) {
		code := g.syncLocked(fx, req, cb)
		if code != 0 {
			fx.add(func() { fail(code) })
		}
	})
}

func (g *group) syncLocked(fx *effects, req *kmsg.SyncGroupRequest, cb func(*kmsg.SyncGroupResponse)) int16 {
	if g.state == stateDead {
		return kerr.CoordinatorNotAvailable.Code
	}
	if g.kind != kindClassic {
		return kerr.UnknownMemberID.Code
	}
	if code := g.validateMember(req.MemberID, req.InstanceID); code != 0 {
		return code
	}
	if req.Generation != g.generation {
		return kerr.IllegalGeneration.Code
	}
	if (req.ProtocolType != nil && *req.ProtocolType != g.protocolType) ||
		(req.Protocol != nil && *req.Protocol != g.protocol) {
		return kerr.InconsistentGroupProtocol.Code
	}
	m := g.members[req.MemberID]
	switch g.state {
	case stateEmpty:
		return kerr.UnknownMemberID.Code
	case statePreparingRebalance:
		return kerr.RebalanceInProgress.Code
	case stateStable:
		delete(g.pendingSync, m.id)
		g.armSessionLocked(m, m.sessionTimeout)
		r := g.syncResponse(req.Version, m.assignment)
		fx.add(func() { cb(r) })
		return 0
	}
	// CompletingRebalance
	if old := m.syncCB; old != nil {
		r := kmsg.NewPtrSyncGroupResponse()
		r.Version, r.ErrorCode = m.syncVersion, kerr.RebalanceInProgress.Code
		fx.add(func() { old(r) })
	}
	m.syncCB, m.syncVersion = cb, req.Version
	delete(g.pendingSync, m.id)
	if m.id != g.leader {
		return 0
	}
	assign := make(map[string][]byte, len(g.members))
	for _, a := range req.GroupAssignment {
		if g.members[a.MemberID] != nil {
			assign[a.MemberID] = append([]byte(nil), a.MemberAssignment...)
		}
	}
	for id := range g.members {
		if _, ok := assign[id]; !ok {
			assign[id] = []byte{}
		}
	}
	gen := g.generation
	g.storeGroupLocked(fx, assign, func(fx *effects, err error) {
		if g.state != stateCompletingRebalance || g.generation != gen {
			return
		}
		if err != nil {
			g.propagateErrorLocked(fx, appendErrorCode(err, false))
			g.maybePrepareRebalanceLocked(fx)
			return
		}
		for _, m := range g.members {
			m.assignment = assign[m.id]
			if cb := m.syncCB; cb != nil {
				m.syncCB = nil
				r := g.syncResponse(m.syncVersion, m.assignment)
				fx.add(func() { cb(r) })
				g.armSessionLocked(m, m.sessionTimeout)
			}
		}
		g.transition(stateStable)
	})
	return 0
}

func (g *group) syncResponse(version int16, assignment []byte) *kmsg.SyncGroupResponse {
	r := kmsg.NewPtrSyncGroupResponse()
	r.Version = version
	pt, p := g.protocolType, g.protocol
	r.ProtocolType, r.Protocol = &pt, &p
	r.MemberAssignment = assignment
	return r
}

// Heartbeat handles Heartbeat (v0+) and answers at once.
func (c *Coordinator) Heartbeat(req *kmsg.HeartbeatRequest) *kmsg.HeartbeatResponse {
	r := kmsg.NewPtrHeartbeatResponse()
	r.Version = req.Version
	g, code := c.lookup(req.Group, false)
	if code != 0 {
		r.ErrorCode = code
		return r
	}
	if g == nil {
		r.ErrorCode = kerr.UnknownMemberID.Code
		return r
	}
	g.with(func(fx *effects) {
		switch {
		case g.state == stateDead:
			r.ErrorCode = kerr.CoordinatorNotAvailable.Code
		case g.kind != kindClassic:
			r.ErrorCode = kerr.UnknownMemberID.Code
		case g.validateMember(req.MemberID, req.InstanceID) != 0:
			r.ErrorCode = g.validateMember(req.MemberID, req.InstanceID)
		case req.Generation != g.generation:
			r.ErrorCode = kerr.IllegalGeneration.Code
		default:
			m := g.members[req.MemberID]
			switch g.state {
			case stateEmpty:
				r.ErrorCode = kerr.UnknownMemberID.Code
			case statePreparingRebalance:
				g.armSessionLocked(m, m.sessionTimeout)
				r.ErrorCode = kerr.RebalanceInProgress.Code
			default: // CompletingRebalance (the member got its join answer) and Stable
				g.armSessionLocked(m, m.sessionTimeout)
			}
		}
	})
	return r
}

// LeaveGroup handles LeaveGroup: v0-v2 with one member id, v3+ with a batch of
// members named by member id and/or group instance id (KIP-345). It answers at once.
func (c *Coordinator) LeaveGroup(req *kmsg.LeaveGroupRequest) *kmsg.LeaveGroupResponse {
	r := kmsg.NewPtrLeaveGroupResponse()
	r.Version = req.Version
	leaving := req.Members
	if req.Version < 3 {
		leaving = []kmsg.LeaveGroupRequestMember{{MemberID: req.MemberID}}
	}
	r.Members = make([]kmsg.LeaveGroupResponseMember, len(leaving))
	for i, l := range leaving {
		r.Members[i] = kmsg.LeaveGroupResponseMember{MemberID: l.MemberID, InstanceID: l.InstanceID}
	}
	finish := func() *kmsg.LeaveGroupResponse {
		if req.Version < 3 {
			if r.ErrorCode == 0 && len(r.Members) == 1 {
				r.ErrorCode = r.Members[0].ErrorCode
			}
			r.Members = nil
		}
		return r
	}
	g, code := c.lookup(req.Group, false)
	if code != 0 {
		r.ErrorCode = code
		return finish()
	}
	if g == nil {
		for i := range r.Members {
			r.Members[i].ErrorCode = kerr.UnknownMemberID.Code
		}
		return finish()
	}
	g.with(func(fx *effects) {
		if g.state == stateDead {
			r.ErrorCode = kerr.CoordinatorNotAvailable.Code
			return
		}
		if g.kind != kindClassic {
			for i := range leaving {
				r.Members[i].ErrorCode = kerr.UnknownMemberID.Code
			}
			return
		}
		for i, l := range leaving {
			r.Members[i].ErrorCode = g.leaveLocked(fx, l.MemberID, l.InstanceID)
		}
	})
	return finish()
}

func (g *group) leaveLocked(fx *effects, id string, instanceID *string) int16 {
	if id == "" {
		if instanceID == nil {
			return kerr.UnknownMemberID.Code
		}
		cur, ok := g.static[*instanceID]
		if !ok {
			return kerr.UnknownMemberID.Code
		}
		id = cur
	} else if _, ok := g.pending[id]; ok && instanceID == nil {
		delete(g.pending, id)
		if g.state == statePreparingRebalance {
			g.tryCompleteJoinLocked(fx)
		}
		return 0
	} else if code := g.validateMember(id, instanceID); code != 0 {
		return code
	}
	g.c.logger.Info("member left", "group", g.id, "member", id)
	g.removeAndUpdateLocked(fx, g.members[id])
	return 0
}
