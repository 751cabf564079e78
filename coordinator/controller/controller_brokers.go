package controller

import (
	"encoding/binary"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/metadata"
)

// brokerRegistrationLocked is BrokerRegistration (62): a broker joins, or a new
// incarnation of it replaces the old. The cluster id must be this cluster's
// (INCONSISTENT_CLUSTER_ID); a broker id whose registration has a live session and
// another incarnation id is refused (DUPLICATE_BROKER_REGISTRATION); a registration
// without listeners, with a listener twice or a bad port, or with a malformed feature
// range is INVALID_REQUEST; one whose features do not include a finalized level is
// UNSUPPORTED_VERSION (RegistrationFeatureCheck, Kafka's rule). The features are kept
// in the registration record. The
// broker registers fenced with epoch max(MaxBrokerEpoch, committed offset) + 1;
// a re-registration also leaves the old incarnation's ISRs and leaderships
// (RegisterBrokerRecords), and, unless it names the registered epoch as its
// PreviousBrokerEpoch (v3+: a clean shutdown, or the same process after a lost
// session), with ELR on its eligible leader replicas. Answered with the epoch once
// committed.
func (c *Controller) brokerRegistrationLocked(r *kmsg.BrokerRegistrationRequest, conn uint64) *op {
	fail := func(code *kerr.Error) *op {
		resp := r.ResponseKind().(*kmsg.BrokerRegistrationResponse)
		resp.SetVersion(r.GetVersion())
		resp.ErrorCode, resp.BrokerEpoch = code.Code, -1
		return &op{resp: resp}
	}
	if c.cfg.ClusterID != "" && r.ClusterID != c.cfg.ClusterID {
		c.log.Warn("controller: registration refused: another cluster id", "broker", r.BrokerID, "cluster id", r.ClusterID, "ours", c.cfg.ClusterID)
		return fail(kerr.InconsistentClusterID)
	}
	if r.BrokerID < 0 || len(r.Listeners) == 0 {
		return fail(kerr.InvalidRequest)
	}
	eps := make([]metadata.Endpoint, 0, len(r.Listeners))
	for _, l := range r.Listeners {
		if l.Name == "" || l.Host == "" || l.Port == 0 {
			return fail(kerr.InvalidRequest)
		}
		for _, e := range eps {
			if e.Name == l.Name {
				return fail(kerr.InvalidRequest)
			}
		}
		eps = append(eps, metadata.Endpoint{Name: l.Name, Host: l.Host, Port: int32(l.Port), SecurityProtocol: l.SecurityProtocol})
	}
	features, ok := registrationFeatures(r)
	if !ok {
		return fail(kerr.InvalidRequest)
	}
	im := c.mu.pending
	if why := RegistrationFeatureCheck(im, features); why != "" {
		c.log.Warn("controller: registration refused: "+why, "broker", r.BrokerID, "incarnation", metadata.UUID(r.IncarnationID))
		return fail(kerr.UnsupportedVersion)
	}
	now := c.clock.Now()
	if cur, ok := im.Broker(r.BrokerID); ok && cur.IncarnationID != metadata.UUID(r.IncarnationID) && c.liveSessionLocked(cur, now) &&
		Predecessor(r) != cur.IncarnationID {
		c.log.Warn("controller: registration refused: the broker id is registered with a live session",
			"broker", r.BrokerID, "incarnation", metadata.UUID(r.IncarnationID), "registered incarnation", cur.IncarnationID)
		return fail(kerr.DuplicateBrokerRegistration)
	}
	committed, _ := c.q.Committed()
	epoch := int64(max(uint64(im.MaxBrokerEpoch()), committed)) + 1
	reg := &metadata.RegisterBrokerRecord{ID: r.BrokerID, IncarnationID: metadata.UUID(r.IncarnationID), Epoch: epoch,
		Endpoints: eps, Fenced: true, Features: features}
	if !im.FeaturesRecorded() {
		// A log without feature levels is one a build before them may still read (a
		// rolling upgrade not yet finalized): its registrations keep their old bytes,
		// and the controller learns the ranges from the registration and heartbeats.
		reg.Features = nil
	}
	if r.Rack != nil {
		reg.Rack = metadata.StringPtr(*r.Rack)
	}
	clean := false
	cur, restarted := im.Broker(r.BrokerID)
	if restarted {
		// Kafka's isCleanShutdown: the registering process names the registered epoch
		// as the one it follows (the epoch a clean shutdown recorded in its logs, or
		// its own when it registers again after losing its session).
		clean = r.GetVersion() >= 3 && r.PreviousBrokerEpoch > 0 && r.PreviousBrokerEpoch == cur.Epoch
		if !clean && im.ELREnabled() {
			c.log.Info("controller: registration after an unclean shutdown: the broker leaves the ISRs and the eligible leader replicas",
				"broker", r.BrokerID, "registered epoch", cur.Epoch, "previous epoch", r.PreviousBrokerEpoch)
		}
	}
	recs := RegisterBrokerRecords(im, reg, c.policyFunc(im), clean)
	if len(recs) == 0 {
		return fail(kerr.InvalidRequest)
	}
	s := &session{epoch: epoch, expires: now.Add(c.cfg.SessionTimeout), lastSeen: now, required: noOffset, shutdownOffset: noOffset,
		features: features, featuresKnown: true, heard: true, restarted: restarted}
	c.attachLocked(s, conn, now)
	c.mu.sessions[r.BrokerID] = s
	c.log.Info("controller: registering broker", "broker", r.BrokerID, "epoch", epoch, "incarnation", reg.IncarnationID)
	return &op{recs: recs, finish: func(offset uint64) kmsg.Response {
		s.required = offset
		resp := r.ResponseKind().(*kmsg.BrokerRegistrationResponse)
		resp.SetVersion(r.GetVersion())
		resp.BrokerEpoch = epoch
		return resp
	}}
}

// PredecessorTag is Samsa's tagged field of BrokerRegistration (tags Kafka does not
// define are ignored by Kafka's controllers): the 16-byte incarnation id of the
// process the registering one succeeds on the same directories (which only one
// process holds at a time). A registration naming the registered incarnation as its
// predecessor replaces it at once, its session live or not: the predecessor's
// process has ended. A copy of the directories started elsewhere names the same
// predecessor, but only one of them finds it still registered.
const PredecessorTag = 10000

// Predecessor returns the incarnation id r's PredecessorTag names (zero: none).
func Predecessor(r *kmsg.BrokerRegistrationRequest) metadata.UUID {
	var id metadata.UUID
	r.UnknownTags.Each(func(k uint32, v []byte) {
		if k == PredecessorTag && len(v) == len(id) {
			copy(id[:], v)
		}
	})
	return id
}

// SetPredecessor sets r's PredecessorTag to id (zero: unset).
func SetPredecessor(r *kmsg.BrokerRegistrationRequest, id metadata.UUID) {
	if id != (metadata.UUID{}) {
		r.UnknownTags.Set(PredecessorTag, slices.Clone(id[:]))
	}
}

// FeaturesTag is Samsa's tagged field of BrokerHeartbeat: the ranges of feature
// levels the broker supports, as its registration lists them. A registration written
// to a log without feature levels does not carry them (a build before them must read
// it), so a controller that did not take the registration itself learns them from
// the heartbeats, and checks UpdateFeatures against them. Kafka's controllers ignore
// the tag. Encoding: per feature, a 2-byte name length, the name, min and max as
// 2-byte big-endian levels.
const FeaturesTag = 10001

// SetHeartbeatFeatures sets r's FeaturesTag to features.
func SetHeartbeatFeatures(r *kmsg.BrokerHeartbeatRequest, features map[string]metadata.VersionRange) {
	var b []byte
	for _, name := range slices.Sorted(maps.Keys(features)) {
		v := features[name]
		b = binary.BigEndian.AppendUint16(b, uint16(len(name)))
		b = append(b, name...)
		b = binary.BigEndian.AppendUint16(b, uint16(v.Min))
		b = binary.BigEndian.AppendUint16(b, uint16(v.Max))
	}
	r.UnknownTags.Set(FeaturesTag, b)
}

// HeartbeatFeatures returns the features r's FeaturesTag lists; false when it has
// none or it is malformed.
func HeartbeatFeatures(r *kmsg.BrokerHeartbeatRequest) ([]metadata.BrokerFeature, bool) {
	var out []metadata.BrokerFeature
	found, ok := false, true
	r.UnknownTags.Each(func(k uint32, b []byte) {
		if k != FeaturesTag {
			return
		}
		found = true
		for len(b) > 0 && ok {
			if len(b) < 2 || len(b) < 2+int(binary.BigEndian.Uint16(b))+4 {
				ok = false
				return
			}
			n := int(binary.BigEndian.Uint16(b))
			f := metadata.BrokerFeature{Name: string(b[2 : 2+n]), Min: int16(binary.BigEndian.Uint16(b[2+n:])), Max: int16(binary.BigEndian.Uint16(b[4+n:]))}
			if f.Name == "" || f.Min < 0 || f.Max < f.Min {
				ok = false
				return
			}
			out = append(out, f)
			b = b[6+n:]
		}
	})
	return out, found && ok
}

// liveFeaturesLocked returns what this controller learned of the brokers whose
// registration in im lists no features: the ranges each sent with its registration
// or heartbeats of its current epoch, and which have sent neither yet.
func (c *Controller) liveFeaturesLocked(im *metadata.Image) *LiveFeatures {
	out := &LiveFeatures{Sent: map[int32][]metadata.BrokerFeature{}, NotYet: map[int32]bool{}}
	for _, b := range im.Brokers() {
		if len(b.Features) > 0 {
			continue
		}
		switch s := c.mu.sessions[b.ID]; {
		case s == nil || s.epoch != b.Epoch || !s.heard:
			out.NotYet[b.ID] = true
		case s.featuresKnown:
			out.Sent[b.ID] = s.features
		}
	}
	return out
}

// liveSessionLocked reports whether broker b is unfenced with a live session: not
// expired, and attached (liveness rules, package doc) — or detached since this
// controller became active for less than CloseGrace. A session whose heartbeat
// connection is known closed (the process was killed, or stopped after a controlled
// shutdown that did not complete) is not live: its new incarnation registers at
// once.
func (c *Controller) liveSessionLocked(b metadata.BrokerImage, now time.Time) bool {
	s := c.mu.sessions[b.ID]
	if b.Fenced || s == nil || s.epoch != b.Epoch || now.After(s.expires) {
		return false
	}
	if s.detached.IsZero() {
		return true
	}
	return !s.closed && !now.After(s.detached.Add(c.closeGrace))
}

// brokerHeartbeatLocked is BrokerHeartbeat (63): it refreshes the broker's session
// and moves it along Kafka's broker states:
//
//	fenced ──caught up──▶ unfenced ──WantShutDown──▶ controlled shutdown ──leads nothing,
//	  ▲  │                  │                          │   active brokers caught up──▶ fenced,
//	  │  └─WantShutDown──▶ ShouldShutDown              │                                ShouldShutDown
//	  └────── WantFence ────┴──────── WantFence ───────┘
//
// "Caught up" is its reported metadata offset reaching its registration's. A
// broker asking to shut down that leads nothing and is in no ISR is fenced and told
// ShouldShutDown in the same answer. The heartbeat ties the session to the
// connection it came on (liveness rules, package doc). A
// broker this controller fenced for an expired session stays fenced until it
// registers again (a new epoch: its old incarnation's requests are refused). An
// unregistered broker is BROKER_ID_NOT_REGISTERED, another epoch
// STALE_BROKER_EPOCH. Answered once the records (if any) commit.
func (c *Controller) brokerHeartbeatLocked(r *kmsg.BrokerHeartbeatRequest, conn uint64) *op {
	resp := r.ResponseKind().(*kmsg.BrokerHeartbeatResponse)
	resp.SetVersion(r.GetVersion())
	resp.IsFenced = true
	im := c.mu.pending
	b, ok := im.Broker(r.BrokerID)
	if !ok {
		resp.ErrorCode = kerr.BrokerIDNotRegistered.Code
		return &op{resp: resp}
	}
	if b.Epoch != r.BrokerEpoch {
		resp.ErrorCode = kerr.StaleBrokerEpoch.Code
		return &op{resp: resp}
	}
	now := c.clock.Now()
	s := c.mu.sessions[b.ID]
	if s == nil || s.epoch != b.Epoch {
		s = &session{epoch: b.Epoch, required: c.mu.activatedAt, shutdownOffset: c.mu.activatedAt}
		c.mu.sessions[b.ID] = s
	}
	s.expires, s.lastSeen = now.Add(c.cfg.SessionTimeout), now
	if f, ok := HeartbeatFeatures(r); ok {
		s.features, s.featuresKnown = f, true
	}
	s.heard = true
	c.attachLocked(s, conn, now)
	if r.CurrentMetadataOffset > 0 {
		s.offset = max(s.offset, uint64(r.CurrentMetadataOffset))
	}
	caughtUp := s.required != noOffset && s.offset >= s.required
	resp.IsCaughtUp = caughtUp
	policy := c.policyFunc(im)
	var recs []metadata.Record
	fencedAfter, shouldShutdown := b.Fenced, false
	markShutdown := false
	switch {
	case b.Fenced:
		switch {
		case r.WantShutdown:
			shouldShutdown = true
		case r.WantFence:
		case caughtUp && !s.lost:
			recs, fencedAfter = UnfenceBrokerRecords(im, b.ID, policy), false
			s.unfencedAt = c.clock.Now()
			c.log.Info("controller: broker caught up: unfencing it", "broker", b.ID, "epoch", b.Epoch, "offset", s.offset)
		}
	case b.InControlledShutdown:
		switch {
		case r.WantFence:
			recs, fencedAfter = FenceBrokerRecords(im, b.ID, policy), true
		case c.shutdownCompleteLocked(im, b.ID, s):
			recs, fencedAfter, shouldShutdown = FenceBrokerRecords(im, b.ID, policy), true, true
			c.log.Info("controller: controlled shutdown complete", "broker", b.ID)
		}
	default:
		switch {
		case r.WantFence:
			recs, fencedAfter = FenceBrokerRecords(im, b.ID, policy), true
			c.log.Warn("controller: broker asked to be fenced: moving its leaderships, taking it out of the ISRs", "broker", b.ID, "epoch", b.Epoch, "partition changes", max(len(recs)-1, 0))
		case r.WantShutdown:
			recs, markShutdown = ControlledShutdownRecords(im, b.ID, policy), true
			s.shutdownOffset = noOffset
			if len(recs) == 1 {
				// It leads nothing and is in no ISR: no broker has anything to
				// learn before it stops. Done at once.
				recs, markShutdown = FenceBrokerRecords(im, b.ID, policy), false
				fencedAfter, shouldShutdown = true, true
				c.log.Info("controller: controlled shutdown complete (the broker leads nothing and is in no ISR)", "broker", b.ID)
				break
			}
			c.log.Info("controller: broker in controlled shutdown: moving its leaderships", "broker", b.ID, "partition changes", len(recs)-1)
		}
	}
	resp.IsFenced, resp.ShouldShutdown = fencedAfter, shouldShutdown
	if len(recs) == 0 {
		return &op{resp: resp}
	}
	return &op{recs: recs, finish: func(offset uint64) kmsg.Response {
		if markShutdown {
			s.shutdownOffset = offset
		}
		return resp
	}}
}

// shutdownCompleteLocked reports whether broker id, in controlled shutdown, may stop:
// it leads nothing and every active broker has applied its shutdown records (so the
// new leaders know they lead).
func (c *Controller) shutdownCompleteLocked(im *metadata.Image, id int32, s *session) bool {
	if s.shutdownOffset == noOffset || LeadsAny(im, id) {
		return false
	}
	for _, b := range im.Brokers() {
		if b.ID == id || b.Fenced || b.InControlledShutdown {
			continue
		}
		o := c.mu.sessions[b.ID]
		if o == nil || o.offset < s.shutdownOffset {
			return false
		}
	}
	return true
}

// allocateProducerIDsLocked is AllocateProducerIds (67): a block of 1,000 producer
// ids from the next free one. STALE_BROKER_EPOCH for an unknown broker or epoch.
func (c *Controller) allocateProducerIDsLocked(r *kmsg.AllocateProducerIDsRequest) *op {
	resp := r.ResponseKind().(*kmsg.AllocateProducerIDsResponse)
	resp.SetVersion(r.GetVersion())
	im := c.mu.pending
	if b, ok := im.Broker(r.BrokerID); !ok || b.Epoch != r.BrokerEpoch {
		resp.ErrorCode = kerr.StaleBrokerEpoch.Code
		return &op{resp: resp}
	}
	start := im.NextProducerID()
	if start > math.MaxInt64-producerIDBlock {
		resp.ErrorCode = kerr.UnknownServerError.Code
		return &op{resp: resp}
	}
	rec := &metadata.ProducerIDsRecord{BrokerID: r.BrokerID, BrokerEpoch: r.BrokerEpoch, NextProducerID: start + producerIDBlock}
	return &op{recs: []metadata.Record{rec}, finish: func(uint64) kmsg.Response {
		resp.ProducerIDStart, resp.ProducerIDLen = start, producerIDBlock
		return resp
	}}
}

// MetadataTopic is the name of the metadata log as DescribeQuorum and the metadata
// fetch name it.
const MetadataTopic = "__cluster_metadata"

// describeQuorumLocked is DescribeQuorum (55) from the voter's Status: the leader,
// its term as the epoch, the high watermark (commit index + 1), each voter's log end
// and contact times with its directory id, and as observers the controllers being
// added (raft learners, with their directory ids) and the brokers (the metadata
// offset their last heartbeat reported); v2's Nodes are the voters' and learners'
// endpoints.
func (c *Controller) describeQuorumLocked(r *kmsg.DescribeQuorumRequest) *op {
	resp := r.ResponseKind().(*kmsg.DescribeQuorumResponse)
	resp.SetVersion(r.GetVersion())
	st := c.q.Status()
	ms := func(t time.Time) int64 {
		if t.IsZero() {
			return -1
		}
		return t.UnixMilli()
	}
	for _, t := range r.Topics {
		rt := kmsg.NewDescribeQuorumResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewDescribeQuorumResponseTopicPartition()
			rp.Partition = p.Partition
			if t.Topic != MetadataTopic || p.Partition != 0 {
				rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				rt.Partitions = append(rt.Partitions, rp)
				continue
			}
			rp.LeaderID, rp.LeaderEpoch, rp.HighWatermark = st.Leader, int32(min(st.Term, math.MaxInt32)), int64(st.CommitIndex+1)
			state := func(v VoterStatus) kmsg.DescribeQuorumResponseTopicPartitionReplicaState {
				rs := kmsg.NewDescribeQuorumResponseTopicPartitionReplicaState()
				rs.ReplicaID, rs.ReplicaDirectoryID, rs.LogEndOffset = v.ID, v.DirectoryID, int64(v.MatchIndex+1)
				rs.LastFetchTimestamp, rs.LastCaughtUpTimestamp = ms(v.LastContact), ms(v.LastCaughtUp)
				return rs
			}
			for _, v := range st.Voters {
				rs := state(v)
				if v.ID == st.NodeID {
					rs.LogEndOffset = int64(st.LastIndex + 1)
				}
				rp.CurrentVoters = append(rp.CurrentVoters, rs)
			}
			for _, v := range st.Learners {
				rp.Observers = append(rp.Observers, state(v))
			}
			ids := make([]int32, 0, len(c.mu.sessions))
			for id := range c.mu.sessions {
				ids = append(ids, id)
			}
			sortInt32s(ids)
			for _, id := range ids {
				s := c.mu.sessions[id]
				rs := kmsg.NewDescribeQuorumResponseTopicPartitionReplicaState()
				rs.ReplicaID, rs.LogEndOffset, rs.LastFetchTimestamp, rs.LastCaughtUpTimestamp = id, int64(s.offset+1), ms(s.lastSeen), -1
				rp.Observers = append(rp.Observers, rs)
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if r.GetVersion() >= 2 {
		resp.Nodes = quorumNodes(st, c.cfg.VoterListeners)
	}
	return &op{resp: resp}
}

// quorumNodes are DescribeQuorum v2's Nodes: the endpoints the metadata log records
// of each voter and learner (a dynamic quorum), else the configured ones
// (controller.quorum.voters), by id.
func quorumNodes(st QuorumStatus, static map[int32][]kmsg.DescribeQuorumResponseNodeListener) []kmsg.DescribeQuorumResponseNode {
	byID := map[int32][]kmsg.DescribeQuorumResponseNodeListener{}
	for _, v := range append(slices.Clone(st.Voters), st.Learners...) {
		for _, e := range v.Endpoints {
			l := kmsg.NewDescribeQuorumResponseNodeListener()
			l.Name, l.Host, l.Port = e.Name, e.Host, e.Port
			byID[v.ID] = append(byID[v.ID], l)
		}
	}
	if len(byID) == 0 {
		byID = static
	}
	ids := make([]int32, 0, len(byID))
	for id := range byID {
		ids = append(ids, id)
	}
	sortInt32s(ids)
	var out []kmsg.DescribeQuorumResponseNode
	for _, id := range ids {
		n := kmsg.NewDescribeQuorumResponseNode()
		n.NodeID, n.Listeners = id, byID[id]
		out = append(out, n)
	}
	return out
}
