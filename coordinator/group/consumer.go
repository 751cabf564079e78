package group

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"regexp"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// groupKind is the protocol a group follows. A group id names one group of one kind at
// a time; an empty group changes kind when a member of the other protocol arrives
// (offline migration).
type groupKind int8

const (
	kindClassic  groupKind = iota // JoinGroup/SyncGroup (the zero value: groups start classic)
	kindConsumer                  // ConsumerGroupHeartbeat (KIP-848)
	kindShare                     // ShareGroupHeartbeat (KIP-932)
	kindStreams                   // StreamsGroupHeartbeat (KIP-1071)
)

// String is the group type as ListGroups v5+ reports it.
func (k groupKind) String() string {
	switch k {
	case kindConsumer:
		return "consumer"
	case kindShare:
		return "share"
	case kindStreams:
		return "streams"
	}
	return "classic"
}

// cmember is a member of a consumer group: the modern member and its subscription.
// Guarded by the group's mu.
type cmember struct {
	modernMember[assignment]
	names    []string // subscribed topic names, sorted
	regex    *string  // subscribed topic regex
	assignor *string  // server assignor the member asked for
	// assignedAt is the member epoch at which each assigned partition was given to it
	// (memory only: 0 after a load), for the offset-commit fence of KIP-1251.
	assignedAt map[tpKey]int32
}

func newCmember(id string) *cmember {
	return &cmember{modernMember: modernMember[assignment]{id: id, state: msStable, assigned: assignment{}, pending: assignment{}},
		assignedAt: map[tpKey]int32{}}
}

// consumerState is a consumer group's state: the modern group (group epoch, members,
// the target assignment of the last assignment epoch), which member holds each
// partition, and the subscribed topics.
//
// Invariants (under the group's mu), beyond modernGroup's:
//
//  1. owners holds exactly the partitions in some member's assigned or pending set,
//     each with that member; no partition is in two members' sets.
//  2. subMeta is the subscribed topics that exist, by name or by a resolved regex, as
//     of the topic image version topicsVersion (when refreshed); regexes were resolved
//     at that version too.
type consumerState struct {
	modernGroup[assignment, *cmember]
	subscribedTopics
	owners  map[tpKey]string // partition -> member holding it
	regexes map[string]*regexResolution
}

// regexResolution is what a subscribed regular expression matched.
type regexResolution struct {
	topics    []string // sorted
	version   int64    // topic image version it was resolved at
	timestamp int64
}

func newConsumerState() *consumerState {
	return &consumerState{
		modernGroup:      newModernGroup[assignment, *cmember](kindConsumer, consumerRecordTypes, consumerRules{}),
		subscribedTopics: newSubscribedTopics(nil),
		owners:           map[tpKey]string{},
		regexes:          map[string]*regexResolution{},
	}
}

// consumerRules are the consumer protocol's answers to the modern-group skeleton.
type consumerRules struct{}

func (consumerRules) sessionTimeout(g *group) time.Duration {
	return g.settingsLocked().ConsumerSessionTimeout
}

func (consumerRules) fenceLocked(g *group, m *cmember, recs *[]Record) {
	g.fenceConsumerMemberLocked(m, recs)
}

func (consumerRules) targetValue(a assignment) []byte {
	return appendTargetMemberValue(nil, assignmentRecordForm(a))
}

func (consumerRules) currentValue(m *cmember) []byte {
	v := CurrentAssignmentValue{
		MemberEpoch: m.epoch, PreviousMemberEpoch: m.prevEpoch, State: int8(m.state),
		Assigned: assignmentRecordForm(m.assigned), Pending: assignmentRecordForm(m.pending),
	}
	return appendCurrentAssignmentValue(nil, &v, false)
}

func (consumerRules) newMember(id string) *cmember { return newCmember(id) }

func (consumerRules) replacement(old *cmember, id string) *cmember {
	n := newCmember(id)
	n.instanceID, n.rackID, n.clientID, n.clientHost = old.instanceID, old.rackID, old.clientID, old.clientHost
	n.names, n.regex, n.assignor, n.rebalanceTimeout = old.names, old.regex, old.assignor, old.rebalanceTimeout
	n.assigned = old.assigned.clone()
	return n
}

func (consumerRules) none() assignment { return assignment{} }

func (consumerRules) setAssignmentLocked(g *group, m *cmember, epoch, prev int32, state memberState, assigned, pending assignment) {
	g.setMemberAssignmentLocked(m, epoch, prev, state, assigned, pending)
}

func (consumerRules) claimLocked(g *group, m *cmember) { g.cg.claim(m) }

func (consumerRules) dropLocked(g *group, m *cmember) { g.dropConsumerMemberLocked(m) }

func (consumerRules) memberRecord(g *group, m *cmember) Record { return g.memberMetadataRecord(m) }

// newConsumerMemberID is a member id as Kafka's v0 server or a v1 client makes one: a
// random UUID, base64url without padding (22 characters).
func newConsumerMemberID() string {
	var u [16]byte
	_, _ = rand.Read(u[:])
	return base64.RawURLEncoding.EncodeToString(u[:])
}

// compileRegex compiles a subscribed topic regex. Kafka matches it (RE2/J) against whole
// topic names; Go's regexp is RE2.
func compileRegex(s string) (*regexp.Regexp, error) {
	return regexp.Compile(`^(?:` + s + `)$`)
}

// validateConsumerHeartbeat checks a request's shape as Kafka does before it reaches the
// group.
func (c *Coordinator) validateConsumerHeartbeat(req *kmsg.ConsumerGroupHeartbeatRequest) (int16, string) {
	bad := func(msg string) (int16, string) { return kerr.InvalidRequest.Code, msg }
	switch {
	case req.Group == "":
		return kerr.InvalidGroupID.Code, "GroupId can't be empty."
	case req.InstanceID != nil && *req.InstanceID == "":
		return bad("InstanceId can't be empty.")
	case req.RackID != nil && *req.RackID == "":
		return bad("RackId can't be empty.")
	}
	switch e := req.MemberEpoch; {
	case e > 0 || e == leaveEpoch:
		if req.MemberID == "" {
			return bad("MemberId can't be empty.")
		}
	case e == 0:
		if req.Version >= 1 && req.MemberID == "" {
			return bad("MemberId can't be empty.")
		}
		if req.RebalanceTimeoutMillis == -1 {
			return bad("RebalanceTimeoutMs must be provided in first request.")
		}
		if req.Topics == nil || len(req.Topics) > 0 {
			return bad("TopicPartitions must be empty when (re-)joining.")
		}
		if len(req.SubscribedTopicNames) == 0 && (req.SubscribedTopicRegex == nil || *req.SubscribedTopicRegex == "") {
			return bad("SubscribedTopicNames or SubscribedTopicRegex must be set in first request.")
		}
	case e == staticLeaveEpoch:
		if req.MemberID == "" {
			return bad("MemberId can't be empty.")
		}
		if req.InstanceID == nil {
			return bad("InstanceId can't be null.")
		}
	default:
		return bad("MemberEpoch is invalid.")
	}
	if req.SubscribedTopicRegex != nil && *req.SubscribedTopicRegex != "" {
		if _, err := compileRegex(*req.SubscribedTopicRegex); err != nil {
			return kerr.InvalidRegularExpression.Code, fmt.Sprintf("SubscribedTopicRegex %s is not a valid regular expression: %v.", *req.SubscribedTopicRegex, err)
		}
	}
	if a := req.ServerAssignor; a != nil && !slices.Contains(c.cfg.ConsumerAssignors, *a) {
		return kerr.UnsupportedAssignor.Code, fmt.Sprintf("ServerAssignor %s is not supported. Supported assignors: %v.", *a, c.cfg.ConsumerAssignors)
	}
	return 0, ""
}

// ConsumerGroupHeartbeat handles ConsumerGroupHeartbeat (v0-v1, KIP-848): a member joins
// (epoch 0), heartbeats (its epoch), leaves (-1) or, when static, leaves for now (-2).
// The coordinator updates the member's subscription, bumps the group epoch when the
// subscriptions or the subscribed topics change, computes a new target assignment with
// the server assignor when the group epoch moved past the assignment epoch, and
// reconciles the member towards its target (revoke first, then assign partitions
// released by their previous owners). cb is called once, after the records of the
// change are durable in __consumer_offsets (at once for an error; after earlier writes
// of the group for a heartbeat that changed nothing).
func (c *Coordinator) ConsumerGroupHeartbeat(req *kmsg.ConsumerGroupHeartbeatRequest, clientID, clientHost string, cb func(*kmsg.ConsumerGroupHeartbeatResponse)) {
	fail := func(code int16, msg string) {
		r := kmsg.NewPtrConsumerGroupHeartbeatResponse()
		r.Version, r.ErrorCode, r.ErrorMessage = req.Version, code, errorMessage(code, msg)
		cb(r)
	}
	if code, msg := c.validateConsumerHeartbeat(req); code != 0 {
		fail(code, msg)
		return
	}
	serveHeartbeat(c, kindConsumer, req.Group, req.MemberEpoch == 0, fail,
		func(g *group, recs *[]Record) (*kmsg.ConsumerGroupHeartbeatResponse, int16, string) {
			return g.consumerHeartbeatLocked(req, clientID, clientHost, recs)
		},
		func(r *kmsg.ConsumerGroupHeartbeatResponse) {
			r.Version = req.Version
			cb(r)
		})
}

func (g *group) consumerHeartbeatLocked(req *kmsg.ConsumerGroupHeartbeatRequest, clientID, clientHost string, recs *[]Record) (*kmsg.ConsumerGroupHeartbeatResponse, int16, string) {
	if code, msg := g.heartbeatKindLocked(kindConsumer, req.MemberEpoch == 0, g.classicEmptyLocked(), func() { g.convertToConsumerLocked(recs) }); code != 0 {
		return nil, code, msg
	}
	switch req.MemberEpoch {
	case leaveEpoch, staticLeaveEpoch:
		return g.consumerLeaveLocked(req, recs)
	}
	m, created, code, msg := g.consumerMemberLocked(req, recs)
	if code != 0 {
		return nil, code, msg
	}
	cg := g.cg
	before := m.assigned.clone()

	// 1. The member's subscription; the group epoch moves when it changed, or when the
	// topics it subscribes to changed since the group last looked.
	changed, subChanged := m.update(req, clientID, clientHost)
	if changed || created {
		*recs = append(*recs, g.memberMetadataRecord(m))
	}
	bump := subChanged || created
	if g.refreshSubscriptionLocked(bump, recs) {
		bump = true
	}
	if bump {
		cg.epoch++
		*recs = append(*recs, cg.epochRecord(g))
	}
	// 2. A new target assignment when the group epoch moved past the assignment's.
	if cg.epoch > cg.assignmentEpoch {
		g.computeTargetLocked(recs)
	}
	// 3. The member's current assignment, towards its target.
	owned, ownedSet := req.Topics, req.Topics != nil
	if code, msg := g.reconcileLocked(m, owned, ownedSet, recs); code != 0 {
		return nil, code, msg
	}
	cg.armSessionLocked(g, m)

	r := kmsg.NewPtrConsumerGroupHeartbeatResponse()
	id := m.id
	r.MemberID = &id
	r.MemberEpoch = m.epoch
	r.HeartbeatIntervalMillis = int32(g.settingsLocked().ConsumerHeartbeatInterval / time.Millisecond)
	full := req.MemberEpoch == 0 || (req.RebalanceTimeoutMillis != -1 && (req.SubscribedTopicNames != nil || req.SubscribedTopicRegex != nil) && req.Topics != nil)
	if full || !before.equal(m.assigned) {
		r.Assignment = heartbeatAssignment(m.assigned)
	}
	return r, 0, ""
}

// heartbeatAssignment is the Assignment field of a heartbeat answer: the member's
// assigned partitions (not those it still has to revoke).
func heartbeatAssignment(a assignment) *kmsg.ConsumerGroupHeartbeatResponseAssignment {
	out := &kmsg.ConsumerGroupHeartbeatResponseAssignment{Topics: []kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic{}}
	for _, tp := range assignmentRecordForm(a) {
		t := kmsg.NewConsumerGroupHeartbeatResponseAssignmentTopic()
		t.TopicID, t.Partitions = tp.TopicID, tp.Partitions
		out.Topics = append(out.Topics, t)
	}
	return out
}

// consumerMemberLocked finds or creates the member a join or heartbeat names (a v0
// join names none: the coordinator makes its id).
func (g *group) consumerMemberLocked(req *kmsg.ConsumerGroupHeartbeatRequest, recs *[]Record) (m *cmember, created bool, code int16, msg string) {
	id := req.MemberID
	if req.MemberEpoch == 0 && id == "" {
		id = newConsumerMemberID() // v0: the server names the member
	}
	return g.cg.memberLocked(g, memberRequest[assignment]{
		id: id, instanceID: req.InstanceID, epoch: req.MemberEpoch, maxSize: g.c.cfg.ConsumerMaxSize,
		ownsSubset: func(a assignment) bool { return ownedSubset(req.Topics, a) },
	}, recs)
}

// ownedSubset reports whether the owned partitions a request lists (nil: not listed)
// are all in a.
func ownedSubset(owned []kmsg.ConsumerGroupHeartbeatRequestTopic, a assignment) bool {
	if owned == nil {
		return false
	}
	for _, t := range owned {
		for _, p := range t.Partitions {
			if !a.has(t.TopicID, p) {
				return false
			}
		}
	}
	return true
}

// update applies the request's non-null fields to m. changed: anything of the member's
// metadata changed (a MemberMetadata record is due); subChanged: its subscription
// (names or regex) changed.
func (m *cmember) update(req *kmsg.ConsumerGroupHeartbeatRequest, clientID, clientHost string) (changed, subChanged bool) {
	changed, _ = m.updateClient(req.InstanceID, req.RackID, req.RebalanceTimeoutMillis, clientID, clientHost)
	if setIfNew(&m.assignor, req.ServerAssignor) {
		changed = true
	}
	if req.SubscribedTopicNames != nil {
		if names := subscribedNames(req.SubscribedTopicNames); !slices.Equal(names, m.names) {
			m.names, changed, subChanged = names, true, true
		}
	}
	if req.SubscribedTopicRegex != nil {
		var re *string
		if *req.SubscribedTopicRegex != "" {
			s := *req.SubscribedTopicRegex
			re = &s
		}
		if (re == nil) != (m.regex == nil) || (re != nil && *re != *m.regex) {
			m.regex, changed, subChanged = re, true, true
		}
	}
	return changed, subChanged
}

// consumerLeaveLocked handles epochs -1 (leave) and -2 (a static member leaves for now).
func (g *group) consumerLeaveLocked(req *kmsg.ConsumerGroupHeartbeatRequest, recs *[]Record) (*kmsg.ConsumerGroupHeartbeatResponse, int16, string) {
	m, code, msg := g.cg.leavingLocked(g, req.MemberID, req.InstanceID)
	if code != 0 {
		return nil, code, msg
	}
	r := kmsg.NewPtrConsumerGroupHeartbeatResponse()
	id := m.id
	r.MemberID, r.MemberEpoch = &id, req.MemberEpoch
	g.cg.leaveLocked(g, m, req.MemberEpoch, recs)
	return r, 0, ""
}

// fenceConsumerMemberLocked removes m (it left, its session expired, it did not revoke
// in time): its records are deleted, the subscription metadata recomputed without it,
// and the group epoch bumped, so that the next heartbeat computes a new target.
func (g *group) fenceConsumerMemberLocked(m *cmember, recs *[]Record) {
	cg := g.cg
	*recs = append(*recs, cg.memberTombstones(g, m.id)...)
	g.dropConsumerMemberLocked(m)
	g.refreshSubscriptionLocked(true, recs)
	cg.epoch++
	*recs = append(*recs, cg.epochRecord(g))
}

// dropConsumerMemberLocked forgets m: timers, partitions, target, instance id.
func (g *group) dropConsumerMemberLocked(m *cmember) {
	g.releaseLocked(m)
	g.cg.forget(m)
}

// claim records m's partitions, assigned and pending, in the owners map.
func (cg *consumerState) claim(m *cmember) {
	take := func(id [16]byte, p int32) { cg.owners[tpKey{id, p}] = m.id }
	m.assigned.each(take)
	m.pending.each(take)
}

// releaseLocked removes m's partitions from the owners map.
func (g *group) releaseLocked(m *cmember) {
	cg := g.cg
	free := func(id [16]byte, p int32) {
		if cg.owners[tpKey{id, p}] == m.id {
			delete(cg.owners, tpKey{id, p})
		}
	}
	m.assigned.each(free)
	m.pending.each(free)
}

// writeThenLocked appends recs (if any) and then calls done (may be nil) with the
// outcome, with no lock held. With no records, done waits only for the group's earlier
// writes, so that an answer never reports state that is not durable yet.
func (g *group) writeThenLocked(fx *effects, recs []Record, done func(error)) {
	if len(recs) == 0 {
		if done == nil {
			return
		}
		if g.pendingWrites == 0 {
			fx.add(func() { done(nil) })
			return
		}
		g.writeWaiters = append(g.writeWaiters, func() { done(nil) })
		return
	}
	g.pendingWrites++
	g.appendLocked(fx, recs, func(err error) {
		if err != nil {
			g.c.logger.Warn("group write failed", "group", g.id, "err", err)
		}
		g.with(func(fx *effects) {
			g.pendingWrites--
			if done != nil {
				fx.add(func() { done(err) })
			}
			if g.pendingWrites == 0 {
				for _, w := range g.writeWaiters {
					fx.add(w)
				}
				g.writeWaiters = nil
			}
		})
	})
}
