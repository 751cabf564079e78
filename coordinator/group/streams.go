package group

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Streams groups (KIP-1071): the group of a Kafka Streams application with
// group.protocol=streams. Its members heartbeat (StreamsGroupHeartbeat) with their
// member epoch, their process id and, when joining, the application's topology; the
// coordinator configures the topology against the cluster's topics (its internal
// topics created by the broker), assigns the tasks with the sticky task assignor and
// reconciles each member towards its target, revoking before assigning:
//
//	heartbeat ─▶ member (join, update, leave)        ─▶ MemberMetadata record
//	          ─▶ topology (init, newer epoch)         ─▶ Topology record
//	          ─▶ configure against the topics image   ─▶ status, topics to create
//	          ─▶ group epoch bump when a member joined or left, its process, rack,
//	             client tags or topology epoch changed, the topology or the topics'
//	             metadata changed, the topology became valid or the standby count
//	             changed                              ─▶ Metadata record
//	          ─▶ target assignment (sticky)           ─▶ TargetMember, TargetMetadata
//	          ─▶ reconcile the member                 ─▶ CurrentAssignment record
//
// Differences from Kafka 4.2, on purpose: static members (an instance id; epoch -2 to
// leave for now) are served as Kafka 4.4 serves them (KAFKA-20169; Kafka 4.2 answers
// INVALID_REQUEST); a member joining with a topology of a higher epoch replaces the
// group's topology (KIP-1071's topology update; Kafka 4.2 answers INVALID_REQUEST
// "Topology updates are not supported yet"), and members behind it are told
// STALE_TOPOLOGY. Not built: warm-up tasks (the assignor assigns none; the task offsets
// members report are not kept), rack-aware standby placement (client tags are stored
// and described only), source topic regular expressions (INVALID_REQUEST, as Kafka
// 4.2), the assignment interval (a target is computed at once) and topology
// descriptions (StreamsGroupTopologyDescriptionUpdate).

// StreamsSettings are what a streams group acts on, resolved by the broker at each
// heartbeat from the group's own configs (streams.*) and the broker's keys
// (group.streams.*). A zero field takes Kafka's default.
type StreamsSettings struct {
	SessionTimeout        time.Duration // streams.session.timeout.ms (45 s)
	HeartbeatInterval     time.Duration // streams.heartbeat.interval.ms (5 s)
	NumStandbyReplicas    int           // streams.num.standby.replicas (0)
	MaxSize               int           // group.streams.max.size (0: no cap)
	AcceptableRecoveryLag int64         // streams.acceptable.recovery.lag (10000), handed to members
	TaskOffsetInterval    time.Duration // streams.task.offset.interval.ms (60 s), handed to members
}

func (s StreamsSettings) filled() StreamsSettings {
	if s.SessionTimeout <= 0 {
		s.SessionTimeout = 45 * time.Second
	}
	if s.HeartbeatInterval <= 0 {
		s.HeartbeatInterval = 5 * time.Second
	}
	if s.NumStandbyReplicas < 0 {
		s.NumStandbyReplicas = 0
	}
	if s.AcceptableRecoveryLag <= 0 {
		s.AcceptableRecoveryLag = 10000
	}
	if s.TaskOffsetInterval <= 0 {
		s.TaskOffsetInterval = time.Minute
	}
	return s
}

// stmember is a member of a streams group: the modern member and its process, topology
// epoch, endpoint and client tags. Guarded by the group's mu.
type stmember struct {
	modernMember[tasks]
	topologyEpoch int32
	processID     string
	endpoint      *StreamsEndpoint
	clientTags    []StreamsKeyValue // sorted by key
}

func newStmember(id string) *stmember {
	return &stmember{modernMember: modernMember[tasks]{id: id, state: msStable, assigned: newTasks(), pending: newTasks()}}
}

// streamsState is a streams group's state: the modern group, its topology, and which
// members hold each task.
//
// Invariants (under the group's mu), beyond modernGroup's:
//
//  1. activeOwner, standbyOwners and warmupOwners hold exactly the tasks of the members'
//     assigned and pending sets, each with the members holding it; a task is active on
//     at most one member.
//  2. validatedEpoch is the topology's epoch when its configuration (at the last epoch
//     bump) was ready, else -1; configured, when set, is topology configured against
//     the topics image of version configuredAt.
type streamsState struct {
	modernGroup[tasks, *stmember]
	metadataHash      int64
	validatedEpoch    int32
	assignmentConfigs []StreamsKeyValue // the configs of the last target (num.standby.replicas)
	topology          *StreamsTopologyValue

	configured   *configuredTopology // memory only: recomputed after a load
	configuredAt uint64

	activeOwner   map[taskID]string
	standbyOwners map[taskID][]string
	warmupOwners  map[taskID][]string

	endpointEpoch int32  // bumped when the endpoint-to-partitions map changes (memory only)
	shutdownBy    string // a member that asked the application to shut down (memory only)
	settings      StreamsSettings
}

func newStreamsState() *streamsState {
	return &streamsState{
		modernGroup:    newModernGroup[tasks, *stmember](kindStreams, streamsRecordTypes, streamsRules{}),
		validatedEpoch: -1, endpointEpoch: -1,
		activeOwner: map[taskID]string{}, standbyOwners: map[taskID][]string{}, warmupOwners: map[taskID][]string{},
		assignmentConfigs: []StreamsKeyValue{},
	}
}

// streamsRules are the streams protocol's answers to the modern-group skeleton.
type streamsRules struct{}

func (streamsRules) sessionTimeout(g *group) time.Duration {
	return g.st.settings.filled().SessionTimeout
}

func (streamsRules) fenceLocked(g *group, m *stmember, recs *[]Record) {
	g.fenceStreamsMemberLocked(m, recs)
}

func (streamsRules) targetValue(t tasks) []byte {
	v := tasksRecordForm(t)
	return appendStreamsTargetMemberValue(nil, &v)
}

func (streamsRules) currentValue(m *stmember) []byte {
	v := StreamsCurrentAssignmentValue{
		MemberEpoch: m.epoch, PreviousMemberEpoch: m.prevEpoch, State: int8(m.state),
		Assigned: tasksRecordForm(m.assigned), Pending: tasksRecordForm(m.pending),
	}
	return appendStreamsCurrentAssignmentValue(nil, &v)
}

func (streamsRules) newMember(id string) *stmember {
	m := newStmember(id)
	m.topologyEpoch = -1
	return m
}

func (streamsRules) replacement(old *stmember, id string) *stmember {
	n := newStmember(id)
	n.instanceID, n.rackID, n.clientID, n.clientHost = old.instanceID, old.rackID, old.clientID, old.clientHost
	n.rebalanceTimeout, n.topologyEpoch, n.processID = old.rebalanceTimeout, old.topologyEpoch, old.processID
	n.endpoint, n.clientTags = old.endpoint, old.clientTags
	n.assigned = old.assigned.clone()
	return n
}

func (streamsRules) none() tasks { return newTasks() }

func (streamsRules) setAssignmentLocked(g *group, m *stmember, epoch, prev int32, state memberState, assigned, pending tasks) {
	g.setStreamsAssignmentLocked(m, epoch, prev, state, assigned, pending)
}

func (streamsRules) claimLocked(g *group, m *stmember) { g.st.claim(m) }

func (streamsRules) dropLocked(g *group, m *stmember) { g.dropStreamsMemberLocked(m) }

func (streamsRules) memberRecord(g *group, m *stmember) Record { return g.streamsMemberRecord(m) }

// stateName is the group state StreamsGroupDescribe and ListGroups report (Kafka's
// StreamsGroupState): a modern group's (Empty, Assigning, Reconciling, Stable), or
// NotReady while it has members and no topology validated against the topics.
func (st *streamsState) stateName() string {
	if len(st.members) > 0 && (st.topology == nil || st.topology.Epoch != st.validatedEpoch) {
		return "NotReady"
	}
	return st.modernGroup.stateName()
}

// streamsStateIn reports whether a ListGroups state filter holds state name (Kafka
// lists NotReady as not_ready).
func streamsStateIn(filter []string, name string) bool {
	return containsFold(filter, name) || (name == "NotReady" && containsFold(filter, "not_ready"))
}

// validateStreamsHeartbeat checks a request's shape as Kafka's GroupCoordinatorService
// does before it reaches the group.
func validateStreamsHeartbeat(req *kmsg.StreamsGroupHeartbeatRequest) (int16, string) {
	bad := func(msg string) (int16, string) { return kerr.InvalidRequest.Code, msg }
	switch {
	case req.MemberID == "":
		return bad("MemberId can't be empty.")
	case req.Group == "":
		return bad("GroupId can't be empty.")
	case req.InstanceID != nil && *req.InstanceID == "":
		return bad("InstanceId can't be empty.")
	case req.RackID != nil && *req.RackID == "":
		return bad("RackId can't be empty.")
	}
	switch e := req.MemberEpoch; {
	case e == 0:
		if req.RebalanceTimeoutMillis == -1 {
			return bad("RebalanceTimeoutMs must be provided in first request.")
		}
		if len(req.ActiveTasks) > 0 || len(req.StandbyTasks) > 0 || len(req.WarmupTasks) > 0 {
			return bad("ActiveTasks, StandbyTasks and WarmupTasks must be empty when (re-)joining.")
		}
		if req.Topology == nil {
			return bad("Topology must be non-null when (re-)joining.")
		}
	case e == staticLeaveEpoch:
		if req.InstanceID == nil {
			return bad("InstanceId can't be null.")
		}
	case e < staticLeaveEpoch:
		return bad(fmt.Sprintf("MemberEpoch is %d, but must be greater than or equal to -2.", e))
	}
	if (req.ActiveTasks != nil || req.StandbyTasks != nil || req.WarmupTasks != nil) &&
		(req.ActiveTasks == nil || req.StandbyTasks == nil || req.WarmupTasks == nil) {
		return bad("If one task-type is non-null, all must be non-null.")
	}
	if req.MemberEpoch != 0 && req.Topology != nil {
		return bad("Topology can only be provided when (re-)joining.")
	}
	if req.Topology != nil {
		if code, msg := validateTopology(topologyFromRequest(req.Topology)); code != 0 {
			return code, msg
		}
	}
	return 0, ""
}

// ownedTasks is the tasks a request says the member owns; nil when it does not say.
func ownedTasks(req *kmsg.StreamsGroupHeartbeatRequest) *tasks {
	if req.ActiveTasks == nil || req.StandbyTasks == nil || req.WarmupTasks == nil {
		return nil
	}
	set := func(ts []kmsg.TaskIDs) taskSet {
		s := taskSet{}
		for _, t := range ts {
			for _, p := range t.Partitions {
				s.add(t.SubtopologyID, p)
			}
		}
		return s
	}
	return &tasks{active: set(req.ActiveTasks), standby: set(req.StandbyTasks), warmup: set(req.WarmupTasks)}
}

// StreamsGroupHeartbeat handles StreamsGroupHeartbeat (v0-v1, KIP-1071): a member joins
// (epoch 0, with the topology), heartbeats (its epoch, the tasks it owns when they
// changed), leaves (-1) or, when static, leaves for now (-2). settings are the group's
// resolved settings. cb is called once, after the records of the change are durable
// in __consumer_offsets (at once for an error), with the answer and, when the answer
// reports MISSING_INTERNAL_TOPICS, the internal topics the broker is to create
// (partition count decided, replication factor -1 for the broker's default, configs).
func (c *Coordinator) StreamsGroupHeartbeat(req *kmsg.StreamsGroupHeartbeatRequest, clientID, clientHost string, settings StreamsSettings,
	cb func(*kmsg.StreamsGroupHeartbeatResponse, []StreamsTopicInfo)) {
	fail := func(code int16, msg string) {
		r := kmsg.NewPtrStreamsGroupHeartbeatResponse()
		r.Version, r.ErrorCode, r.ErrorMessage = req.Version, code, errorMessage(code, msg)
		cb(r, nil)
	}
	if code, msg := validateStreamsHeartbeat(req); code != 0 {
		fail(code, msg)
		return
	}
	type answer struct {
		r      *kmsg.StreamsGroupHeartbeatResponse
		create []StreamsTopicInfo
	}
	serveHeartbeat(c, kindStreams, req.Group, req.MemberEpoch == 0, fail,
		func(g *group, recs *[]Record) (answer, int16, string) {
			r, create, code, msg := g.streamsHeartbeatLocked(req, clientID, clientHost, settings.filled(), recs)
			return answer{r, create}, code, msg
		},
		func(a answer) {
			a.r.Version = req.Version
			cb(a.r, a.create)
		})
}

func (g *group) streamsHeartbeatLocked(req *kmsg.StreamsGroupHeartbeatRequest, clientID, clientHost string,
	settings StreamsSettings, recs *[]Record) (*kmsg.StreamsGroupHeartbeatResponse, []StreamsTopicInfo, int16, string) {
	if code, msg := g.heartbeatKindLocked(kindStreams, req.MemberEpoch == 0, g.classicEmptyLocked(), func() { g.convertToStreamsLocked(recs) }); code != 0 {
		return nil, nil, code, msg
	}
	st := g.st
	st.settings = settings
	if req.MemberEpoch == leaveEpoch || req.MemberEpoch == staticLeaveEpoch {
		r, code, msg := g.streamsLeaveLocked(req, recs)
		return r, nil, code, msg
	}
	owned := ownedTasks(req)
	if code, msg := g.checkOwnedTasksLocked(owned); code != 0 {
		return nil, nil, code, msg
	}
	newTopology, code, msg := g.streamsTopologyOfLocked(req)
	if code != 0 {
		return nil, nil, code, msg
	}
	m, created, code, msg := g.streamsMemberLocked(req, recs)
	if code != 0 {
		return nil, nil, code, msg
	}
	before := m.assigned.clone()

	// 1. The member's metadata: a record when it changed; the group epoch moves when
	// the member joined or its process, rack, client tags or topology epoch changed.
	changed, relevant := m.update(req, clientID, clientHost)
	if changed || created {
		*recs = append(*recs, g.streamsMemberRecord(m))
	}
	// 2. The topology; 3. its configuration against the topics; the group epoch.
	g.refreshStreamsLocked(m, newTopology, created || relevant, recs)
	// 4. A new target assignment when the group epoch moved past the assignment's.
	if st.epoch > st.assignmentEpoch {
		g.computeStreamsTargetLocked(recs)
	}
	// 5. The member's current assignment, towards its target.
	if code, msg := g.reconcileStreamsLocked(m, owned, recs); code != 0 {
		return nil, nil, code, msg
	}
	st.armSessionLocked(g, m)
	if req.ShutdownApplication && st.shutdownBy == "" {
		g.c.logger.Info("streams group member asks the application to shut down", "group", g.id, "member", m.id)
		st.shutdownBy = m.id
	}
	return g.streamsAnswerLocked(req, m, before), g.streamsTopicsToCreateLocked(), 0, ""
}

// streamsTopologyOfLocked decides what a joining member's topology does: the group's
// first, or one of a newer epoch (returned: the group takes it); the same, or one of an
// older epoch (nil: the group keeps its own, the member is stale); another of the same
// epoch (STREAMS_INVALID_TOPOLOGY_EPOCH). Decided before any change, so that a refusal
// changes nothing.
func (g *group) streamsTopologyOfLocked(req *kmsg.StreamsGroupHeartbeatRequest) (*StreamsTopologyValue, int16, string) {
	cur := g.st.topology
	if req.Topology == nil {
		if cur == nil {
			return nil, kerr.InvalidRequest.Code, "The group has no topology: the member must rejoin with one."
		}
		return nil, 0, ""
	}
	tv := topologyFromRequest(req.Topology)
	switch {
	case cur == nil || tv.Epoch > cur.Epoch:
		return tv, 0, ""
	case tv.Epoch == cur.Epoch && !topologyEqual(cur, tv):
		return nil, kerr.StreamsInvalidTopologyEpoch.Code, fmt.Sprintf("The topology of epoch %d differs from the group's topology of the same epoch.", tv.Epoch)
	}
	return nil, 0, ""
}

// refreshStreamsLocked installs a new topology (when set), configures the topology
// against the topics image when either moved, and bumps the group epoch (a Metadata
// record) when bump is set, the topology changed, the topics' metadata hash changed,
// the topology's validity changed, or the standby count changed.
func (g *group) refreshStreamsLocked(m *stmember, newTopology *StreamsTopologyValue, bump bool, recs *[]Record) {
	st := g.st
	topologyChanged := newTopology != nil
	if topologyChanged {
		if st.topology != nil {
			g.c.logger.Info("streams group topology updated", "group", g.id, "member", m.id, "epoch", newTopology.Epoch, "was", st.topology.Epoch)
		}
		st.topology, bump = newTopology, true
		*recs = append(*recs, g.streamsTopologyRecord())
		g.syncStreamsSubscriptionsLocked()
	}
	im := g.c.topics.load()
	if topologyChanged || st.configured == nil || st.configuredAt != im.version {
		if h := topologyMetadataHash(st.topology, im); h != st.metadataHash {
			st.metadataHash, bump = h, true
		}
		st.configured, st.configuredAt = configureTopology(st.topology, im), im.version
	}
	validated := int32(-1)
	if st.configured.ready() {
		validated = st.topology.Epoch
	}
	if validated != st.validatedEpoch {
		bump = true
	}
	configs := []StreamsKeyValue{{"num.standby.replicas", strconv.Itoa(st.settings.NumStandbyReplicas)}}
	if !bump && !slices.Equal(configs, st.assignmentConfigs) {
		g.c.logger.Info("streams group assignment configs changed", "group", g.id, "configs", configs)
		bump = true
	}
	if bump {
		st.epoch++
		st.validatedEpoch, st.assignmentConfigs = validated, configs
		*recs = append(*recs, g.streamsEpochRecord())
	}
}

// streamsAnswerLocked is the answer of a heartbeat that m made.
func (g *group) streamsAnswerLocked(req *kmsg.StreamsGroupHeartbeatRequest, m *stmember, before tasks) *kmsg.StreamsGroupHeartbeatResponse {
	st := g.st
	s := st.settings
	r := kmsg.NewPtrStreamsGroupHeartbeatResponse()
	r.MemberID, r.MemberEpoch = m.id, m.epoch
	r.HeartbeatIntervalMillis = int32(s.HeartbeatInterval / time.Millisecond)
	r.AcceptableRecoveryLag = s.AcceptableRecoveryLag
	r.AcceptableRecoveryLagLegacy = int32(min(s.AcceptableRecoveryLag, math.MaxInt32))
	r.TaskOffsetIntervalMillis = int32(s.TaskOffsetInterval / time.Millisecond)
	if req.MemberEpoch == 0 || !before.equal(m.assigned) {
		r.ActiveTasks = heartbeatTaskIDs(m.assigned.active)
		r.StandbyTasks = heartbeatTaskIDs(m.assigned.standby)
		r.WarmupTasks = heartbeatTaskIDs(m.assigned.warmup)
	}
	if req.EndpointInformationEpoch != st.endpointEpoch {
		r.PartitionsByUserEndpoint = g.endpointsToPartitionsLocked()
	}
	r.EndpointInformationEpoch = st.endpointEpoch
	status := func(code int8, detail string) {
		r.Status = append(r.Status, kmsg.StreamsGroupHeartbeatResponseStatus{StatusCode: code, StatusDetail: detail})
	}
	if m.topologyEpoch < st.topology.Epoch {
		status(streamsStatusStaleTopology, fmt.Sprintf("The member's topology epoch %d is behind the group's topology epoch %d.", m.topologyEpoch, st.topology.Epoch))
	}
	if ct := st.configured; ct != nil && !ct.ready() {
		status(ct.status, ct.detail)
	}
	if st.shutdownBy != "" {
		status(streamsStatusShutdownApplication, fmt.Sprintf("Streams group member %s encountered a fatal error and requested a shutdown for the entire application.", st.shutdownBy))
	}
	return r
}

// streamsTopicsToCreateLocked is the internal topics the group misses, for the broker
// to create.
func (g *group) streamsTopicsToCreateLocked() []StreamsTopicInfo {
	if ct := g.st.configured; ct != nil && ct.status == streamsStatusMissingInternalTopics {
		return slices.Clone(ct.missing)
	}
	return nil
}

func heartbeatTaskIDs(s taskSet) []kmsg.TaskIDs {
	out := []kmsg.TaskIDs{}
	for _, sub := range s.subtopologies() {
		t := kmsg.NewTaskIDs()
		t.SubtopologyID, t.Partitions = sub, slices.Clone(s[sub])
		out = append(out, t)
	}
	return out
}

// checkOwnedTasksLocked refuses owned tasks the group's ready topology does not have
// (Kafka's throwIfRequestContainsInvalidTasks).
func (g *group) checkOwnedTasksLocked(owned *tasks) (int16, string) {
	ct := g.st.configured
	if owned == nil || !ct.ready() {
		return 0, ""
	}
	for _, s := range owned.roles() {
		for _, sub := range s.subtopologies() {
			cs := ct.subs[sub]
			if cs == nil {
				return kerr.InvalidRequest.Code, fmt.Sprintf("Subtopology %s does not exist in the topology.", sub)
			}
			for _, p := range s[sub] {
				if p < 0 || p >= cs.tasks {
					return kerr.InvalidRequest.Code, fmt.Sprintf("Task %d for subtopology %s is invalid. Number of tasks for this subtopology: %d", p, sub, cs.tasks)
				}
			}
		}
	}
	return 0, ""
}

// streamsMemberLocked finds or creates the member a join or heartbeat names. A static
// member back under its own member id after leaving for now reconciles from epoch 0.
func (g *group) streamsMemberLocked(req *kmsg.StreamsGroupHeartbeatRequest, recs *[]Record) (m *stmember, created bool, code int16, msg string) {
	st := g.st
	m, created, code, msg = st.memberLocked(g, memberRequest[tasks]{
		id: req.MemberID, instanceID: req.InstanceID, epoch: req.MemberEpoch, maxSize: st.settings.MaxSize,
		ownsSubset: func(assigned tasks) bool {
			owned := ownedTasks(req)
			return owned != nil && assigned.contains(*owned)
		},
	}, recs)
	switch {
	case code != 0:
	case created:
		g.syncStreamsSubscriptionsLocked()
	case req.MemberEpoch == 0 && m.epoch == staticLeaveEpoch:
		g.setStreamsAssignmentLocked(m, 0, m.epoch, msStable, m.assigned, newTasks())
	}
	return m, created, code, msg
}

// update applies the request's non-null fields to m. changed: anything of the member's
// metadata changed (a MemberMetadata record is due); relevant: what the assignment
// depends on changed (process id, rack id, client tags, topology epoch: KIP-1071's
// reasons to bump the group epoch).
func (m *stmember) update(req *kmsg.StreamsGroupHeartbeatRequest, clientID, clientHost string) (changed, relevant bool) {
	changed, relevant = m.updateClient(req.InstanceID, req.RackID, req.RebalanceTimeoutMillis, clientID, clientHost)
	if req.Topology != nil && req.Topology.Epoch != m.topologyEpoch {
		m.topologyEpoch, changed, relevant = req.Topology.Epoch, true, true
	}
	if req.ProcessID != nil && *req.ProcessID != m.processID {
		m.processID, changed, relevant = *req.ProcessID, true, true
	}
	if req.ClientTags != nil {
		tags := make([]StreamsKeyValue, 0, len(req.ClientTags))
		for _, t := range req.ClientTags {
			tags = append(tags, StreamsKeyValue{t.Key, t.Value})
		}
		sort.Slice(tags, func(i, j int) bool { return tags[i].Key < tags[j].Key })
		if !slices.Equal(tags, m.clientTags) {
			m.clientTags, changed, relevant = tags, true, true
		}
	}
	if e := req.UserEndpoint; e != nil && (m.endpoint == nil || m.endpoint.Host != e.Host || m.endpoint.Port != e.Port) {
		m.endpoint, changed = &StreamsEndpoint{Host: e.Host, Port: e.Port}, true
	}
	return changed, relevant
}

// streamsLeaveLocked handles epochs -1 (leave) and -2 (a static member leaves for now).
func (g *group) streamsLeaveLocked(req *kmsg.StreamsGroupHeartbeatRequest, recs *[]Record) (*kmsg.StreamsGroupHeartbeatResponse, int16, string) {
	st := g.st
	m, code, msg := st.leavingLocked(g, req.MemberID, req.InstanceID)
	if code != 0 {
		return nil, code, msg
	}
	if req.ShutdownApplication && st.shutdownBy == "" {
		st.shutdownBy = m.id
	}
	r := kmsg.NewPtrStreamsGroupHeartbeatResponse()
	r.MemberID, r.MemberEpoch = m.id, req.MemberEpoch
	st.leaveLocked(g, m, req.MemberEpoch, recs)
	return r, 0, ""
}

// fenceStreamsMemberLocked removes m (it left, its session expired, it did not revoke
// in time): its records are deleted and the group epoch bumped, so that the next
// heartbeat computes a new target.
func (g *group) fenceStreamsMemberLocked(m *stmember, recs *[]Record) {
	st := g.st
	*recs = append(*recs, st.memberTombstones(g, m.id)...)
	g.dropStreamsMemberLocked(m)
	st.epoch++
	*recs = append(*recs, g.streamsEpochRecord())
}

// dropStreamsMemberLocked forgets m: timers, tasks, target, instance id.
func (g *group) dropStreamsMemberLocked(m *stmember) {
	st := g.st
	st.release(m)
	if m.endpoint != nil {
		st.endpointEpoch++
	}
	st.forget(m)
	if len(st.members) == 0 {
		st.shutdownBy = "" // a shutdown request lasts until the group is empty
	}
	g.syncStreamsSubscriptionsLocked()
}

// convertToStreamsLocked turns an empty classic group (one that only holds committed
// offsets, or whose members all left) into an empty streams group.
func (g *group) convertToStreamsLocked(recs *[]Record) {
	g.convertFromClassicLocked(kindStreams, recs)
	g.st = newStreamsState()
	g.transition(stateStable)
	g.syncStreamsSubscriptionsLocked()
}

// syncStreamsSubscriptionsLocked keeps g.subscriptions, the topics the group consumes
// (OffsetDelete answers GROUP_SUBSCRIBED_TO_TOPIC for them), at the source topics of
// its topology while it has members, none once it has none (Kafka's
// StreamsGroup.isSubscribedToTopic).
func (g *group) syncStreamsSubscriptionsLocked() {
	st := g.st
	subs := map[string]struct{}{}
	if len(st.members) > 0 && st.topology != nil {
		for _, s := range st.topology.Subtopologies {
			for _, n := range s.SourceTopics {
				subs[n] = struct{}{}
			}
			for _, r := range s.RepartitionSourceTopics {
				subs[r.Name] = struct{}{}
			}
		}
	}
	g.subscriptions = subs
}

// endpointsToPartitionsLocked is the PartitionsByUserEndpoint of a heartbeat answer
// (Interactive Queries): for each member with a user endpoint, the partitions of its
// active and standby tasks, of every source and repartition source topic of the task's
// subtopology that has the task's partition.
func (g *group) endpointsToPartitionsLocked() []kmsg.StreamsGroupHeartbeatResponsePartitionsByUserEndpoint {
	st := g.st
	out := []kmsg.StreamsGroupHeartbeatResponsePartitionsByUserEndpoint{}
	var subs map[string]*configuredSub
	if st.configured != nil {
		subs = st.configured.subs
	}
	im := g.c.topics.load()
	partitionsOf := func(s taskSet) map[string][]int32 {
		byTopic := map[string][]int32{}
		s.each(func(t taskID) {
			cs := subs[t.sub]
			if cs == nil {
				return
			}
			add := func(topic string, n int32) {
				if t.p < n {
					byTopic[topic] = append(byTopic[topic], t.p)
				}
			}
			for _, src := range cs.sources {
				add(src, im.byName[src].Partitions)
			}
			for r, n := range cs.repartitionSources {
				if ti, ok := im.byName[r]; ok {
					n = ti.Partitions
				}
				add(r, n)
			}
		})
		return byTopic
	}
	ids := make([]string, 0, len(st.members))
	for id, m := range st.members {
		if m.endpoint != nil {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	for _, id := range ids {
		m := st.members[id]
		e := kmsg.NewStreamsGroupHeartbeatResponsePartitionsByUserEndpoint()
		e.UserEndpoint.Host, e.UserEndpoint.Port = m.endpoint.Host, m.endpoint.Port
		e.ActivePartitions = []kmsg.StreamsGroupHeartbeatResponsePartitionsByUserEndpointActivePartition{}
		e.StandbyPartitions = []kmsg.StreamsGroupHeartbeatResponsePartitionsByUserEndpointStandbyPartition{}
		active, standby := partitionsOf(m.assigned.active), partitionsOf(m.assigned.standby)
		for _, topic := range sortedKeys(active) {
			ps := active[topic]
			slices.Sort(ps)
			e.ActivePartitions = append(e.ActivePartitions, kmsg.StreamsGroupHeartbeatResponsePartitionsByUserEndpointActivePartition{Topic: topic, Partitions: slices.Compact(ps)})
		}
		for _, topic := range sortedKeys(standby) {
			ps := standby[topic]
			slices.Sort(ps)
			e.StandbyPartitions = append(e.StandbyPartitions, kmsg.StreamsGroupHeartbeatResponsePartitionsByUserEndpointStandbyPartition{Topic: topic, Partitions: slices.Compact(ps)})
		}
		out = append(out, e)
	}
	return out
}
