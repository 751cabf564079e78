package group

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// OffsetCommit handles OffsetCommit (v0+). Topics are named (a v10+ handler resolves
// topic ids to names first and copies the ids into the answer); a topic whose id is
// set but is not the id of the topic of that name in the coordinator's topics (it was
// deleted and re-created since the handler resolved it) answers UNKNOWN_TOPIC_ID. cb is
// called once, after the records are durable. A commit with generation -1 and no member
// id is a "simple" commit, allowed only while the group has no members; it creates the
// group if needed. A commit with a generation to a group that does not exist is
// ILLEGAL_GENERATION, GROUP_ID_NOT_FOUND from v9 on (Kafka's OffsetMetadataManager).
func (c *Coordinator) OffsetCommit(req *kmsg.OffsetCommitRequest, cb func(*kmsg.OffsetCommitResponse)) {
	r := kmsg.NewPtrOffsetCommitResponse()
	r.Version = req.Version
	r.Topics = make([]kmsg.OffsetCommitResponseTopic, len(req.Topics))
	for i, t := range req.Topics {
		rt := &r.Topics[i]
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		rt.Partitions = make([]kmsg.OffsetCommitResponseTopicPartition, len(t.Partitions))
		for j, p := range t.Partitions {
			rt.Partitions[j].Partition = p.Partition
		}
	}
	all := func(code int16) *kmsg.OffsetCommitResponse {
		for i := range r.Topics {
			for j := range r.Topics[i].Partitions {
				r.Topics[i].Partitions[j].ErrorCode = code
			}
		}
		return r
	}
	generation, memberID := req.Generation, req.MemberID
	if req.Version == 0 {
		generation, memberID = -1, ""
	}
	g, code := c.lookup(req.Group, false)
	if code != 0 {
		cb(all(code))
		return
	}
	if g == nil {
		if generation >= 0 {
			// The group is gone: this member's generation is stale.
			if req.Version >= 9 {
				cb(all(kerr.GroupIDNotFound.Code))
				return
			}
			cb(all(kerr.IllegalGeneration.Code))
			return
		}
		if g, code = c.lookup(req.Group, true); code != 0 {
			cb(all(code))
			return
		}
	}
	g.with(func(fx *effects) {
		var code int16
		var perPart func(topic string, partition int32) int16
		switch {
		case g.state == stateDead:
			code = kerr.CoordinatorNotAvailable.Code
		case g.kind == kindConsumer:
			code, perPart = g.validateConsumerCommitLocked(req.Version, generation, memberID)
		case g.kind == kindShare:
			code = kerr.GroupIDNotFound.Code // share groups keep no committed offsets
		case g.kind == kindStreams:
			code = g.validateStreamsCommitLocked(req.Version, generation, memberID, req.InstanceID, false)
		default:
			code = g.validateCommitLocked(generation, memberID, req.InstanceID)
			if code == 0 && g.state == stateCompletingRebalance {
				code = kerr.RebalanceInProgress.Code
			}
		}
		if code != 0 {
			fx.add(func() { cb(all(code)) })
			return
		}
		if m := g.members[memberID]; m != nil && g.kind == kindClassic {
			g.armSessionLocked(m, m.sessionTimeout)
		}
		g.storeOffsetsLocked(fx, req, r, perPart, cb)
	})
}

// validateConsumerCommitLocked checks a commit to a consumer group. With a negative
// epoch it is the commit of an admin or of a consumer that assigns itself its
// partitions (whatever member id it sends, as Kafka's ConsumerGroup decides it),
// allowed while the group has no members. A member commits with OffsetCommit v9+ and its member epoch, or an earlier
// one: KIP-1251's rule (Kafka 4.3), under which a commit whose epoch is ahead of the
// member's is STALE_MEMBER_EPOCH, and so is, per partition, a commit older than the
// epoch at which the member was given that partition. (Kafka 4.0 required the member's
// current epoch exactly; clients that commit while their heartbeat is in flight then
// fail spuriously.)
func (g *group) validateConsumerCommitLocked(version int16, epoch int32, memberID string) (int16, func(string, int32) int16) {
	cg := g.cg
	if epoch < 0 && len(cg.members) == 0 {
		return 0, nil
	}
	if memberID == "" && epoch < 0 {
		return kerr.UnknownMemberID.Code, nil
	}
	m := cg.members[memberID]
	switch {
	case m == nil:
		return kerr.UnknownMemberID.Code, nil
	case version < 9:
		return kerr.UnsupportedVersion.Code, nil
	case epoch > m.epoch:
		return kerr.StaleMemberEpoch.Code, nil
	}
	im := g.c.topics.load()
	return 0, func(topic string, p int32) int16 {
		t, ok := im.byName[topic]
		if !ok {
			return 0
		}
		if at, ok := m.assignedAt[tpKey{t.ID, p}]; ok && epoch < at {
			return kerr.StaleMemberEpoch.Code
		}
		return 0
	}
}

// validateCommitLocked checks a commit to a classic group (Kafka's ClassicGroup): with
// a negative generation to an empty group it is the commit of an admin or of a consumer
// that assigns itself its partitions, whatever member id it sends; else the member and
// its generation are checked.
func (g *group) validateCommitLocked(generation int32, memberID string, instanceID *string) int16 {
	if g.state == stateDead {
		return kerr.CoordinatorNotAvailable.Code
	}
	if generation < 0 && g.state == stateEmpty {
		return 0
	}
	if generation >= 0 || memberID != "" || instanceID != nil {
		if code := g.validateMember(memberID, instanceID); code != 0 {
			return code
		}
		if generation != g.generation {
			return kerr.IllegalGeneration.Code
		}
		return 0
	}
	if g.state != stateEmpty {
		return kerr.UnknownMemberID.Code // only members commit while the group has some
	}
	return 0
}

// staleTopicID reports whether id, the topic id a request named topic by (zero when
// it named it by name), is not the id of the topic of that name in the coordinator's
// topics: the topic was deleted and re-created since the request's handler resolved
// the id. A name the coordinator's topics lack is not stale (they may lag the image).
func (c *Coordinator) staleTopicID(topic string, id [16]byte) bool {
	if id == ([16]byte{}) {
		return false
	}
	t, ok := c.topics.load().byName[topic]
	return ok && t.ID != ([16]byte{}) && t.ID != id
}

func (g *group) storeOffsetsLocked(fx *effects, req *kmsg.OffsetCommitRequest, r *kmsg.OffsetCommitResponse, perPart func(string, int32) int16, cb func(*kmsg.OffsetCommitResponse)) {
	now := g.c.clock.Now().UnixMilli()
	type pending struct {
		tp     topicPartition
		v      OffsetValue
		code   *int16
		delSeq uint64
	}
	var ps []pending
	var recs []Record
	for i, t := range req.Topics {
		for j, p := range t.Partitions {
			code := &r.Topics[i].Partitions[j].ErrorCode
			md := ""
			if p.Metadata != nil {
				md = *p.Metadata
			}
			if len(md) > g.c.cfg.MaxOffsetMetadata {
				*code = kerr.OffsetMetadataTooLarge.Code
				continue
			}
			if g.c.staleTopicID(t.Topic, t.TopicID) {
				*code = kerr.UnknownTopicID.Code
				continue
			}
			if perPart != nil {
				if c := perPart(t.Topic, p.Partition); c != 0 {
					*code = c
					continue
				}
			}
			v := OffsetValue{Version: 3, Offset: p.Offset, LeaderEpoch: -1, Metadata: md, CommitTimestamp: now, ExpireTimestamp: -1}
			if req.Version >= 6 {
				v.LeaderEpoch = p.LeaderEpoch
			}
			if req.Version == 1 && p.Timestamp != -1 {
				v.CommitTimestamp = p.Timestamp
			}
			if req.Version >= 2 && req.Version <= 4 && req.RetentionTimeMillis != -1 {
				v.Version = 1
				v.LeaderEpoch = -1
				v.ExpireTimestamp = v.CommitTimestamp + req.RetentionTimeMillis
			}
			tp := topicPartition{t.Topic, p.Partition}
			ps = append(ps, pending{tp, v, code, g.deleted[tp]})
			recs = append(recs, Record{
				Timestamp: now,
				Key:       AppendOffsetKey(nil, g.id, tp.topic, tp.partition),
				Value:     AppendOffsetValue(nil, v),
			})
		}
	}
	if len(recs) == 0 {
		fx.add(func() { cb(r) })
		return
	}
	for _, p := range ps {
		g.pendingCommits[p.tp]++
	}
	g.appendLocked(fx, recs, func(err error) {
		g.with(func(fx *effects) {
			code := appendErrorCode(err, true)
			for _, p := range ps {
				*p.code = code
				// an OffsetDelete that ran meanwhile wrote its tombstone after this
				// record: the offset stays deleted
				if code == 0 && g.state != stateDead && g.deleted[p.tp] == p.delSeq {
					g.offsets[p.tp] = p.v
				}
				if g.pendingCommits[p.tp]--; g.pendingCommits[p.tp] <= 0 {
					delete(g.pendingCommits, p.tp)
					delete(g.deleted, p.tp)
				}
			}
			fx.add(func() { cb(r) })
		})
	})
}

// OffsetFetch handles OffsetFetch: v0-v7 for one group, v8+ for a batch of groups.
// A nil topic list (v2+) fetches every committed offset of the group. Partitions
// without a committed offset answer offset -1. It answers at once from memory.
func (c *Coordinator) OffsetFetch(req *kmsg.OffsetFetchRequest) *kmsg.OffsetFetchResponse {
	r := kmsg.NewPtrOffsetFetchResponse()
	r.Version = req.Version
	defer c.markUnstableOffsets(req, r) // RequireStable (txn_offsets.go)
	if req.Version >= 8 {
		r.Groups = make([]kmsg.OffsetFetchResponseGroup, len(req.Groups))
		for i, rg := range req.Groups {
			out := &r.Groups[i]
			out.Group = rg.Group
			want := make([]fetchTopic, 0, len(rg.Topics))
			for _, t := range rg.Topics {
				want = append(want, fetchTopic{t.Topic, t.Partitions})
			}
			code, got := c.fetchOffsets(rg.Group, want, rg.Topics == nil, rg.MemberID, rg.MemberEpoch)
			out.ErrorCode = code
			for _, t := range got {
				ot := kmsg.OffsetFetchResponseGroupTopic{Topic: t.topic}
				for _, p := range t.parts {
					ot.Partitions = append(ot.Partitions, kmsg.OffsetFetchResponseGroupTopicPartition{
						Partition: p.partition, Offset: p.v.Offset, LeaderEpoch: p.v.LeaderEpoch, Metadata: p.md,
					})
				}
				out.Topics = append(out.Topics, ot)
			}
		}
		return r
	}
	want := make([]fetchTopic, 0, len(req.Topics))
	for _, t := range req.Topics {
		want = append(want, fetchTopic{t.Topic, t.Partitions})
	}
	code, got := c.fetchOffsets(req.Group, want, req.Topics == nil && req.Version >= 2, nil, -1)
	if req.Version >= 2 {
		r.ErrorCode = code
	}
	for _, t := range got {
		ot := kmsg.OffsetFetchResponseTopic{Topic: t.topic}
		for _, p := range t.parts {
			ot.Partitions = append(ot.Partitions, kmsg.OffsetFetchResponseTopicPartition{
				Partition: p.partition, Offset: p.v.Offset, LeaderEpoch: p.v.LeaderEpoch, Metadata: p.md, ErrorCode: code,
			})
		}
		r.Topics = append(r.Topics, ot)
	}
	return r
}

type fetchTopic struct {
	topic      string
	partitions []int32
}

type fetchedPartition struct {
	partition int32
	v         OffsetValue
	md        *string
}

type fetchedTopic struct {
	topic string
	parts []fetchedPartition
}

// fetchOffsets returns the group's committed offsets for want (or all of them),
// with the group-level error code; requested partitions are echoed even on error.
// memberID and memberEpoch (OffsetFetch v9+; nil before) are checked against a consumer
// group's member: UNKNOWN_MEMBER_ID, or STALE_MEMBER_EPOCH unless the epoch is the
// member's; an empty member id with a negative epoch is an admin's fetch.
func (c *Coordinator) fetchOffsets(id string, want []fetchTopic, all bool, memberID *string, memberEpoch int32) (int16, []fetchedTopic) {
	none := OffsetValue{Offset: -1, LeaderEpoch: -1}
	echo := func(code int16) (int16, []fetchedTopic) {
		out := make([]fetchedTopic, 0, len(want))
		for _, t := range want {
			ft := fetchedTopic{topic: t.topic}
			for _, p := range t.partitions {
				empty := ""
				ft.parts = append(ft.parts, fetchedPartition{p, none, &empty})
			}
			out = append(out, ft)
		}
		return code, out
	}
	g, code := c.lookup(id, false)
	if code != 0 {
		return echo(code)
	}
	if g == nil {
		return echo(0)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.state == stateDead {
		return echo(0)
	}
	switch g.kind {
	case kindConsumer:
		if code := g.cg.fetchMemberCode(memberID, memberEpoch); code != 0 {
			return echo(code)
		}
	case kindStreams:
		if code := g.validateStreamsFetchLocked(memberID, memberEpoch); code != 0 {
			return echo(code)
		}
	}
	if all {
		byTopic := map[string]int{}
		var out []fetchedTopic
		for tp, v := range g.offsets {
			i, ok := byTopic[tp.topic]
			if !ok {
				i = len(out)
				byTopic[tp.topic] = i
				out = append(out, fetchedTopic{topic: tp.topic})
			}
			md := v.Metadata
			out[i].parts = append(out[i].parts, fetchedPartition{tp.partition, v, &md})
		}
		return 0, out
	}
	out := make([]fetchedTopic, 0, len(want))
	for _, t := range want {
		ft := fetchedTopic{topic: t.topic}
		for _, p := range t.partitions {
			v, ok := g.offsets[topicPartition{t.topic, p}]
			if !ok {
				v = none
			}
			md := v.Metadata
			ft.parts = append(ft.parts, fetchedPartition{p, v, &md})
		}
		out = append(out, ft)
	}
	return 0, out
}

// OffsetDelete handles OffsetDelete (v0+, KIP-496): offsets of topics the group does
// not consume are deleted (tombstones written); cb is called once they are durable.
func (c *Coordinator) OffsetDelete(req *kmsg.OffsetDeleteRequest, cb func(*kmsg.OffsetDeleteResponse)) {
	r := kmsg.NewPtrOffsetDeleteResponse()
	r.Version = req.Version
	g, code := c.lookup(req.Group, false)
	if code != 0 {
		r.ErrorCode = code
		cb(r)
		return
	}
	if g == nil {
		r.ErrorCode = kerr.GroupIDNotFound.Code
		cb(r)
		return
	}
	g.with(func(fx *effects) {
		switch {
		case g.state == stateDead, g.kind == kindShare:
			r.ErrorCode = kerr.GroupIDNotFound.Code
		case g.kind == kindClassic && g.state != stateEmpty && g.protocolType != "consumer":
			r.ErrorCode = kerr.NonEmptyGroup.Code
		}
		if r.ErrorCode != 0 {
			fx.add(func() { cb(r) })
			return
		}
		var recs []Record
		r.Topics = make([]kmsg.OffsetDeleteResponseTopic, len(req.Topics))
		for i, t := range req.Topics {
			r.Topics[i].Topic = t.Topic
			subscribed := g.state != stateEmpty && g.subscribedTo(t.Topic)
			if g.kind == kindConsumer {
				_, subscribed = g.subscribedNamesLocked()[t.Topic]
			}
			for _, p := range t.Partitions {
				rp := kmsg.OffsetDeleteResponseTopicPartition{Partition: p.Partition}
				tp := topicPartition{t.Topic, p.Partition}
				if subscribed {
					rp.ErrorCode = kerr.GroupSubscribedToTopic.Code
				} else if _, ok := g.offsets[tp]; ok || g.pendingCommits[tp] > 0 {
					delete(g.offsets, tp)
					if g.pendingCommits[tp] > 0 {
						g.deleted[tp]++
					}
					recs = append(recs, g.offsetTombstone(tp))
				}
				r.Topics[i].Partitions = append(r.Topics[i].Partitions, rp)
			}
		}
		if len(recs) == 0 {
			fx.add(func() { cb(r) })
			return
		}
		g.appendLocked(fx, recs, func(err error) {
			if code := appendErrorCode(err, false); code != 0 {
				r.ErrorCode = code
			}
			cb(r)
		})
	})
}

// ExpireOffsets runs one offset-retention pass (it also runs every
// RetentionCheckInterval on the clock). Offsets of an Empty group expire
// OffsetRetention after the group became empty; a Stable consumer group's offsets of
// topics it no longer subscribes to, and a simple group's offsets, expire
// OffsetRetention after their commit; an explicit expire timestamp (OffsetCommit
// v2-v4 retention) wins. An Empty group left with no offsets is deleted.
func (c *Coordinator) ExpireOffsets() {
	c.mu.Lock()
	gs := make([]*group, 0, len(c.mu.groups))
	for _, g := range c.mu.groups {
		gs = append(gs, g)
	}
	c.mu.Unlock()
	now := c.clock.Now().UnixMilli()
	retention := c.cfg.OffsetRetention.Milliseconds()
	for _, g := range gs {
		g.with(func(fx *effects) {
			if g.state == stateDead {
				return
			}
			if g.kind == kindShare {
				return // share groups keep no committed offsets
			}
			var base func(OffsetValue) int64
			var keep map[string]struct{}
			switch {
			case g.kind == kindConsumer:
				// Offsets of topics no member subscribes to expire a retention period
				// after their commit (Kafka's rule for consumer groups).
				base = func(v OffsetValue) int64 { return v.CommitTimestamp }
				keep = g.subscribedNamesLocked()
			case g.kind == kindStreams:
				base, keep = g.streamsOffsetExpiryLocked()
			case g.protocolType != "" && g.state == stateEmpty:
				base = func(v OffsetValue) int64 {
					if g.hasStateTime {
						return g.stateTime.UnixMilli()
					}
					return v.CommitTimestamp
				}
			case g.protocolType == "consumer" && g.state == stateStable && g.subscriptions != nil:
				base = func(v OffsetValue) int64 { return v.CommitTimestamp }
				keep = g.subscriptions
			case g.protocolType == "":
				base = func(v OffsetValue) int64 { return v.CommitTimestamp }
			}
			var recs []Record
			if base != nil {
				for tp, v := range g.offsets {
					if _, ok := keep[tp.topic]; ok || g.pendingCommits[tp] > 0 {
						continue
					}
					expired := now-base(v) >= retention
					if v.ExpireTimestamp >= 0 {
						expired = now >= v.ExpireTimestamp
					}
					if expired {
						delete(g.offsets, tp)
						recs = append(recs, g.offsetTombstone(tp))
					}
				}
			}
			if g.kind == kindStreams {
				g.dropExpiredStreamsLocked(&recs)
			}
			noMembers := g.kind != kindConsumer || len(g.cg.members) == 0
			if g.state == stateEmpty && noMembers && len(g.offsets) == 0 && len(g.pendingCommits) == 0 && len(g.pending) == 0 {
				if g.kind == kindConsumer {
					recs = append(recs, g.cg.tombstonesLocked(g)...)
				} else if g.generation > 0 {
					recs = append(recs, g.groupTombstone())
				}
				g.transition(stateDead)
				g.stopTimersLocked()
				g.c.dropGroupLocked(g)
			}
			if len(recs) > 0 {
				g.c.logger.Info("expired offsets", "group", g.id, "records", len(recs))
				g.appendLocked(fx, recs, func(err error) {
					if err != nil {
						g.c.logger.Warn("offset expiry write failed", "group", g.id, "err", err)
					}
				})
			}
		})
	}
}
