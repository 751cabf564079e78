package group

import (
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Share groups (KIP-932): the membership half, which lives with the group coordinator.
// Members heartbeat with ShareGroupHeartbeat; the coordinator assigns partitions with
// the "simple" assignor and a member takes its target at once (share groups have no
// revocation: a partition may be read by several members, records are handed out one
// by one by the partition's leader). Which records a member holds, and for how long, is
// the share partition's business (coordinator/share), not the coordinator's.
//
// The simple assignor: for each subscribed topic with P partitions and the n members
// subscribed to it (in member id order), partition p goes to member p mod n when
// n <= P (every partition to one member, counts within one), else member j reads
// partition j mod P (every member gets one, partitions shared). Kafka 4.1's assignor
// also balances but may pick other partitions.

// AssignorSimple is the share groups' assignor.
const AssignorSimple = "simple"

// smember is a share-group member: the modern member (never static, never revoking)
// and its subscription. Guarded by the group's mu.
type smember struct {
	modernMember[assignment]
	names []string
}

func newSmember(id string) *smember {
	return &smember{modernMember: modernMember[assignment]{id: id, assigned: assignment{}}}
}

// shareState is a share group's membership state: the modern group, the subscribed
// topics and the share state it holds.
type shareState struct {
	modernGroup[assignment, *smember]
	subscribedTopics
	state ShareStateMetadata // the share state it holds (share_state_meta.go)
	inits shareInits         // its initializations under way (share_state_init.go)
}

func newShareState() *shareState {
	return &shareState{
		modernGroup:      newModernGroup[assignment, *smember](kindShare, shareRecordTypes, shareRules{}),
		subscribedTopics: newSubscribedTopics(nil),
	}
}

// shareRules are the share protocol's answers to the modern-group skeleton.
type shareRules struct{}

func (shareRules) sessionTimeout(g *group) time.Duration {
	return g.settingsLocked().ShareSessionTimeout
}

func (shareRules) fenceLocked(g *group, m *smember, recs *[]Record) {
	g.fenceShareMemberLocked(m, recs)
}

func (shareRules) targetValue(a assignment) []byte {
	return appendTargetMemberValue(nil, assignmentRecordForm(a))
}

func (shareRules) currentValue(m *smember) []byte {
	v := CurrentAssignmentValue{MemberEpoch: m.epoch, PreviousMemberEpoch: m.prevEpoch, State: int8(msStable), Assigned: assignmentRecordForm(m.assigned)}
	return appendCurrentAssignmentValue(nil, &v, true)
}

// stateName is Empty or Stable: a share group has no reconciliation to wait for.
func (sg *shareState) stateName() string {
	if len(sg.members) == 0 {
		return "Empty"
	}
	return "Stable"
}

// ShareGroupHeartbeat handles ShareGroupHeartbeat (v1, KIP-932): a member joins (epoch
// 0), heartbeats or leaves (-1). cb is called once, after the change is durable.
func (c *Coordinator) ShareGroupHeartbeat(req *kmsg.ShareGroupHeartbeatRequest, clientID, clientHost string, cb func(*kmsg.ShareGroupHeartbeatResponse)) {
	fail := func(code int16, msg string) {
		r := kmsg.NewPtrShareGroupHeartbeatResponse()
		r.Version, r.ErrorCode, r.ErrorMessage = req.Version, code, errorMessage(code, msg)
		cb(r)
	}
	switch {
	case req.GroupID == "":
		fail(kerr.InvalidGroupID.Code, "GroupId can't be empty.")
		return
	case req.RackID != nil && *req.RackID == "":
		fail(kerr.InvalidRequest.Code, "RackId can't be empty.")
		return
	case req.MemberID == "":
		fail(kerr.InvalidRequest.Code, "MemberId can't be empty.")
		return
	case req.MemberEpoch == 0 && len(req.SubscribedTopicNames) == 0:
		fail(kerr.InvalidRequest.Code, "SubscribedTopicNames must be set in first request.")
		return
	case req.MemberEpoch < leaveEpoch:
		fail(kerr.InvalidRequest.Code, "MemberEpoch is invalid.")
		return
	}
	var in *shareInit
	serveHeartbeatThen(c, kindShare, req.GroupID, req.MemberEpoch == 0, fail,
		func(g *group, recs *[]Record) (*kmsg.ShareGroupHeartbeatResponse, int16, string) {
			r, code, msg := g.shareHeartbeatLocked(req, clientID, clientHost, recs)
			if code == 0 {
				in = g.shareInitializingLocked(recs) // share_state_init.go
			}
			return r, code, msg
		},
		func(g *group, err error, answer func()) {
			if err != nil {
				g.abandonShareInit(in)
				return
			}
			g.initializeShareState(in, answer)
		},
		func(r *kmsg.ShareGroupHeartbeatResponse) {
			r.Version = req.Version
			cb(r)
		})
}

// freshClassicLocked reports whether g is a classic group that never held anything: a
// share group may take its id (Kafka lets a share group take only a free id).
func (g *group) freshClassicLocked() bool {
	return g.classicEmptyLocked() && g.generation == 0 && g.protocolType == "" && len(g.offsets) == 0 && len(g.pendingCommits) == 0
}

// convertToShareLocked makes a classic group that never held anything an empty share
// group.
func (g *group) convertToShareLocked() {
	g.kind = kindShare
	g.protocolType = "share"
	g.sg = newShareState()
}

func (g *group) shareHeartbeatLocked(req *kmsg.ShareGroupHeartbeatRequest, clientID, clientHost string, recs *[]Record) (*kmsg.ShareGroupHeartbeatResponse, int16, string) {
	if code, msg := g.heartbeatKindLocked(kindShare, req.MemberEpoch == 0, g.freshClassicLocked(), g.convertToShareLocked); code != 0 {
		return nil, code, msg
	}
	sg := g.sg
	if req.MemberEpoch == leaveEpoch {
		m, code, msg := sg.leavingLocked(g, req.MemberID, nil)
		if code != 0 {
			return nil, code, msg
		}
		sg.leaveLocked(g, m, leaveEpoch, recs)
		r := kmsg.NewPtrShareGroupHeartbeatResponse()
		id := m.id
		r.MemberID, r.MemberEpoch = &id, leaveEpoch
		return r, 0, ""
	}
	m := sg.members[req.MemberID]
	created := false
	switch {
	case m == nil && req.MemberEpoch == 0:
		if max := g.c.cfg.ShareMaxSize; max > 0 && len(sg.members) >= max {
			return nil, kerr.GroupMaxSizeReached.Code, fmt.Sprintf("The share group has reached its maximum capacity of %d members.", max)
		}
		m = newSmember(req.MemberID)
		sg.members[m.id] = m
		created = true
		g.c.logger.Info("member joins the share group", "group", g.id, "member", m.id)
	case m == nil:
		return nil, kerr.UnknownMemberID.Code, fmt.Sprintf("Member %s is not a member of group %s.", req.MemberID, g.id)
	case req.MemberEpoch == 0:
		// rejoin in place: it gets its assignment again
	case req.MemberEpoch > m.epoch || (req.MemberEpoch < m.epoch && req.MemberEpoch != m.prevEpoch):
		return nil, kerr.FencedMemberEpoch.Code, fmt.Sprintf("The share group member has a member epoch (%d) other than the one known by the group coordinator (%d). The member must abandon all its partitions and rejoin.", req.MemberEpoch, m.epoch)
	}
	before := m.assigned.clone()
	changed, subChanged := created, created
	if c, _ := m.updateClient(nil, req.RackID, -1, clientID, clientHost); c {
		changed = true
	}
	if req.SubscribedTopicNames != nil {
		if names := subscribedNames(req.SubscribedTopicNames); !slices.Equal(names, m.names) {
			m.names, changed, subChanged = names, true, true
		}
	}
	if changed {
		*recs = append(*recs, g.shareMemberRecord(m))
	}
	bump := subChanged
	if g.refreshShareSubscriptionLocked(bump, recs) {
		bump = true
	}
	if bump {
		sg.epoch++
		*recs = append(*recs, sg.epochRecord(g))
	}
	if sg.epoch > sg.assignmentEpoch {
		g.computeShareTargetLocked(recs)
	}
	if m.epoch != sg.assignmentEpoch {
		m.prevEpoch, m.epoch = m.epoch, sg.assignmentEpoch
		m.assigned = sg.target[m.id].clone()
		if m.assigned == nil {
			m.assigned = assignment{}
		}
		*recs = append(*recs, sg.currentRecord(g, m))
	}
	sg.armSessionLocked(g, m)
	r := kmsg.NewPtrShareGroupHeartbeatResponse()
	id := m.id
	r.MemberID, r.MemberEpoch = &id, m.epoch
	r.HeartbeatIntervalMillis = int32(g.settingsLocked().ShareHeartbeatInterval / time.Millisecond)
	if req.MemberEpoch == 0 || req.SubscribedTopicNames != nil || !before.equal(m.assigned) {
		r.Assignment = &kmsg.ShareGroupHeartbeatResponseAssignment{TopicPartitions: []kmsg.ShareGroupHeartbeatResponseAssignmentTopicPartition{}}
		for _, tp := range assignmentRecordForm(m.assigned) {
			t := kmsg.NewShareGroupHeartbeatResponseAssignmentTopicPartition()
			t.TopicID, t.Partitions = tp.TopicID, tp.Partitions
			r.Assignment.TopicPartitions = append(r.Assignment.TopicPartitions, t)
		}
	}
	return r, 0, ""
}

// refreshShareSubscriptionLocked recomputes the share group's subscribed topic metadata;
// true when it changed.
func (g *group) refreshShareSubscriptionLocked(force bool, recs *[]Record) bool {
	sg := g.sg
	im := g.c.topics.load()
	if !force && sg.currentAt(im.version) {
		return false
	}
	names := func(yield func(string) bool) {
		for _, m := range sg.members {
			for _, n := range m.names {
				if !yield(n) {
					return
				}
			}
		}
	}
	return sg.setLocked(g, recSharePartitionMetadata, im, names, recs)
}

// computeShareTargetLocked runs the simple assignor for the group epoch.
func (g *group) computeShareTargetLocked(recs *[]Record) {
	sg := g.sg
	ids := sg.sortedIDs()
	out := make(map[string]assignment, len(ids))
	for _, id := range ids {
		out[id] = assignment{}
	}
	topics := make([]PartitionMetadataTopic, 0, len(sg.subMeta))
	for _, t := range sg.subMeta {
		topics = append(topics, t)
	}
	sort.Slice(topics, func(i, j int) bool { return topics[i].TopicName < topics[j].TopicName })
	for _, t := range topics {
		var subs []string
		for _, id := range ids {
			if slices.Contains(sg.members[id].names, t.TopicName) {
				subs = append(subs, id)
			}
		}
		n, parts := int32(len(subs)), t.NumPartitions
		if n == 0 || parts == 0 {
			continue
		}
		if n <= parts {
			for p := int32(0); p < parts; p++ {
				out[subs[p%n]].add(t.TopicID, p)
			}
		} else {
			for j, id := range subs {
				out[id].add(t.TopicID, int32(j)%parts)
			}
		}
	}
	sg.installTargetLocked(g, ids, func(id string) assignment { return out[id] }, recs)
}

func (g *group) shareMemberRecord(m *smember) Record {
	v := ConsumerMemberValue{RackID: m.rackID, ClientID: m.clientID, ClientHost: m.clientHost, SubscribedTopicNames: m.names}
	if v.SubscribedTopicNames == nil {
		v.SubscribedTopicNames = []string{}
	}
	return g.rec(recShareMemberMetadata, m.id, appendShareMemberValue(nil, &v))
}

// tombstonesLocked deletes every record of the share group, in the order of Kafka's
// ShareGroup.createGroupTombstoneRecords.
func (sg *shareState) tombstonesLocked(g *group) []Record {
	var recs []Record
	for _, id := range sg.sortedIDs() {
		recs = append(recs, sg.memberTombstones(g, id)...)
	}
	return append(recs,
		g.rec(recShareTargetMetadata, "", nil),
		g.rec(recSharePartitionMetadata, "", nil),
		g.rec(recShareStatePartitionMetadata, "", nil),
		g.rec(recShareGroupMetadata, "", nil))
}

// fenceShareMemberLocked removes m and bumps the group epoch.
func (g *group) fenceShareMemberLocked(m *smember, recs *[]Record) {
	sg := g.sg
	sg.forget(m)
	*recs = append(*recs, sg.memberTombstones(g, m.id)...)
	g.refreshShareSubscriptionLocked(true, recs)
	sg.epoch++
	*recs = append(*recs, sg.epochRecord(g))
}

// ShareGroupDescribe handles ShareGroupDescribe (v1).
func (c *Coordinator) ShareGroupDescribe(req *kmsg.ShareGroupDescribeRequest) *kmsg.ShareGroupDescribeResponse {
	r := kmsg.NewPtrShareGroupDescribeResponse()
	r.Version = req.Version
	im := c.topics.load()
	for _, id := range req.GroupIDs {
		out := kmsg.NewShareGroupDescribeResponseGroup()
		out.GroupID = id
		if req.IncludeAuthorizedOperations {
			out.AuthorizedOperations = groupOperations
		}
		out.ErrorCode, out.ErrorMessage = c.describeModern(id, kindShare, func(g *group) { g.sg.describe(&out, im) })
		r.Groups = append(r.Groups, out)
	}
	return r
}

func (sg *shareState) describe(out *kmsg.ShareGroupDescribeResponseGroup, im *topicImage) {
	out.GroupState, out.GroupEpoch, out.AssignmentEpoch, out.Assignor = sg.stateName(), sg.epoch, sg.assignmentEpoch, AssignorSimple
	for _, id := range sg.sortedIDs() {
		m := sg.members[id]
		dm := kmsg.NewShareGroupDescribeResponseGroupMember()
		dm.MemberID, dm.RackID, dm.MemberEpoch, dm.ClientID, dm.ClientHost = m.id, m.rackID, m.epoch, m.clientID, m.clientHost
		dm.SubscribedTopicNames = slices.Clone(m.names)
		for _, tp := range assignmentRecordForm(m.assigned) {
			t := kmsg.NewShareGroupDescribeResponseGroupMemberAssignmentTopicPartition()
			t.TopicID, t.Partitions = tp.TopicID, tp.Partitions
			t.Topic = im.byID[tp.TopicID].Name
			dm.Assignment.TopicPartitions = append(dm.Assignment.TopicPartitions, t)
		}
		out.Members = append(out.Members, dm)
	}
}

// ShareGroupTopics returns the topics a share group subscribes to (its members'
// subscriptions) and those it holds share state for (its
// ShareGroupStatePartitionMetadata, by topic id: a topic deleted since is left out),
// for the share-group offset admin APIs; ok is false when group is not a share group
// here, with the error code to answer (0 when it does not exist).
func (c *Coordinator) ShareGroupTopics(group string) (topics []string, code int16, ok bool) {
	g, code := c.lookup(group, false)
	if code != 0 || g == nil {
		return nil, code, false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.kind != kindShare || g.state == stateDead {
		return nil, 0, false
	}
	set := map[string]bool{}
	for _, m := range g.sg.members {
		for _, n := range m.names {
			set[n] = true
		}
	}
	im := c.topics.load()
	for _, t := range g.sg.state.Initialized {
		if cur, ok := im.byID[t.TopicID]; ok {
			set[cur.Name] = true
		}
	}
	for n := range set {
		topics = append(topics, n)
	}
	sort.Strings(topics)
	return topics, 0, true
}

// CreateShareGroup makes group an empty share group when no group holds its id (or a
// classic group that never held anything does), as Kafka's AlterShareGroupOffsets
// creates the share group it sets offsets for; the group's metadata record is written
// before cb(0), so that the group outlives a failover. A share group already there is
// left as it is (cb(0)); a consumer group, or a classic group in use, is
// GROUP_ID_NOT_FOUND; not coordinator or loading, their codes. cb runs with no lock held.
func (c *Coordinator) CreateShareGroup(group string, cb func(code int16)) {
	g, code := c.lookup(group, true)
	if code != 0 {
		cb(code)
		return
	}
	g.with(func(fx *effects) {
		switch {
		case g.state == stateDead:
			fx.add(func() { cb(kerr.CoordinatorNotAvailable.Code) })
			return
		case g.kind == kindShare:
			fx.add(func() { cb(0) })
			return
		case g.kind != kindClassic || !g.freshClassicLocked():
			fx.add(func() { cb(kerr.GroupIDNotFound.Code) })
			return
		}
		g.convertToShareLocked()
		g.c.logger.Info("share group created for its offsets", "group", g.id)
		recs := []Record{g.sg.epochRecord(g)}
		g.writeThenLocked(fx, recs, func(err error) {
			if err != nil {
				cb(appendErrorCode(err, false))
				return
			}
			cb(0)
		})
	})
}

// ShareGroupEmpty reports whether group is a share group without members (AlterShare
// GroupOffsets and DeleteShareGroupOffsets need that); code is the error to answer when
// it cannot be said (not coordinator, loading) or GROUP_ID_NOT_FOUND.
func (c *Coordinator) ShareGroupEmpty(group string) (empty bool, code int16) {
	g, code := c.lookup(group, false)
	if code != 0 {
		return false, code
	}
	if g == nil {
		return false, kerr.GroupIDNotFound.Code
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.kind != kindShare || g.state == stateDead {
		return false, kerr.GroupIDNotFound.Code
	}
	return len(g.sg.members) == 0, 0
}

// loadedShare gathers one share group's records during a replay.
type loadedShare struct {
	loadedModern[ConsumerMemberValue, []TopicPartitions, CurrentAssignmentValue]
	epoch   int32
	subMeta []PartitionMetadataTopic
	state   ShareStateMetadata
}

func newLoadedShare() *loadedShare {
	return &loadedShare{loadedModern: newLoadedModern[ConsumerMemberValue, []TopicPartitions, CurrentAssignmentValue]()}
}

// apply folds one share-group record into l; false when the value does not decode.
func (l *loadedShare) apply(k Key, value []byte, seq int) bool {
	var err error
	switch k.Kind {
	case KeyShareGroup:
		if value == nil {
			*l = *newLoadedShare()
			l.seq = seq
			return true
		}
		l.epoch, err = DecodeEpochValue(value)
		l.live, l.seq = err == nil, seq
	case KeySharePartitionMetadata:
		l.subMeta, err = decodeValue(value, DecodePartitionMetadataValue)
	case KeyShareMember:
		err = applyKeyed(l.members, k.Member, value, DecodeShareMemberValue)
	case KeyShareTargetMetadata:
		l.targetEpoch, err = decodeValue(value, DecodeEpochValue)
	case KeyShareTargetMember:
		err = applyKeyed(l.targets, k.Member, value, DecodeTargetMemberValue)
	case KeyShareCurrentAssignment:
		err = applyKeyed(l.current, k.Member, value, func(b []byte) (CurrentAssignmentValue, error) { return DecodeCurrentAssignmentValue(b, true) })
	case KeyShareStatePartitionMetadata:
		l.state, err = decodeValue(value, DecodeShareStateValue)
	}
	return err == nil
}

// restoreShare makes g a share group from l (members without a current assignment
// record start at epoch 0 with nothing).
func (g *group) restoreShare(l *loadedShare) {
	g.convertToShareLocked()
	sg := g.sg
	sg.epoch, sg.assignmentEpoch, sg.state = l.epoch, l.targetEpoch, l.state
	sg.subscribedTopics = newSubscribedTopics(l.subMeta)
	restoreMembers(&sg.modernGroup, &l.loadedModern, func(id string, v ConsumerMemberValue) *smember {
		m := newSmember(id)
		m.rackID, m.clientID, m.clientHost = v.RackID, v.ClientID, v.ClientHost
		m.names = append([]string(nil), v.SubscribedTopicNames...)
		sort.Strings(m.names)
		return m
	}, func(m *smember, cur CurrentAssignmentValue) {
		m.epoch, m.prevEpoch = cur.MemberEpoch, cur.PreviousMemberEpoch
		m.assigned = assignmentFromRecord(cur.Assigned)
	}, assignmentFromRecord)
}
