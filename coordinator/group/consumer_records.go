package group

import (
	"sort"
	"time"
)

// Records of consumer groups: what the state machine writes, and the replay that
// rebuilds a group from them when its partition loads.

func (g *group) memberMetadataRecord(m *cmember) Record {
	v := ConsumerMemberValue{
		InstanceID: m.instanceID, RackID: m.rackID, ClientID: m.clientID, ClientHost: m.clientHost,
		SubscribedTopicNames: m.names, SubscribedTopicRegex: m.regex,
		RebalanceTimeoutMs: int32(m.rebalanceTimeout / time.Millisecond), ServerAssignor: m.assignor,
	}
	if v.SubscribedTopicNames == nil {
		v.SubscribedTopicNames = []string{}
	}
	return g.rec(recConsumerMemberMetadata, m.id, appendConsumerMemberValue(nil, &v))
}

// tombstonesLocked deletes every record of the consumer group (not its offsets), in
// the order of Kafka's ConsumerGroup.createGroupTombstoneRecords.
func (cg *consumerState) tombstonesLocked(g *group) []Record {
	recs := cg.membersTombstones(g)
	for _, re := range sortedKeys(cg.regexes) {
		recs = append(recs, g.rec(recConsumerRegularExpression, re, nil))
	}
	recs = append(recs, g.rec(recConsumerPartitionMetadata, "", nil))
	return append(recs, g.rec(recConsumerGroupMetadata, "", nil))
}

// classicEmptyLocked reports whether g is a classic group without members, which a
// member of another protocol may take over (offline migration).
func (g *group) classicEmptyLocked() bool {
	return g.kind == kindClassic && g.state == stateEmpty && len(g.members) == 0 && len(g.pending) == 0
}

// convertToConsumerLocked turns an empty classic group into an empty consumer group:
// the classic metadata record is deleted, committed offsets stay.
func (g *group) convertToConsumerLocked(recs *[]Record) {
	if g.generation > 0 || g.protocolType != "" {
		*recs = append(*recs, g.groupTombstone())
		g.c.logger.Info("empty classic group becomes a consumer group", "group", g.id)
	}
	g.stopTimersLocked()
	g.kind = kindConsumer
	g.cg = newConsumerState()
	g.protocolType, g.protocol, g.leader, g.generation = "consumer", "", "", 0
	g.subscriptions = nil
}

// convertToClassicLocked turns an empty consumer group into an empty classic group: its
// consumer-protocol records are deleted, committed offsets stay.
func (g *group) convertToClassicLocked(recs *[]Record) {
	*recs = append(*recs, g.cg.tombstonesLocked(g)...)
	g.c.logger.Info("empty consumer group becomes a classic group", "group", g.id)
	g.cg.stopTimers()
	g.kind = kindClassic
	g.cg = nil
	g.protocolType, g.protocol, g.leader, g.generation = "", "", "", 0
	g.transition(stateEmpty)
}

// loadedConsumer gathers one consumer group's records during a replay.
type loadedConsumer struct {
	seq         int // replay position of the group's last ConsumerGroupMetadata record
	epoch       int32
	live        bool
	subMeta     []PartitionMetadataTopic
	members     map[string]ConsumerMemberValue
	targetEpoch int32
	targets     map[string][]TopicPartitions
	current     map[string]CurrentAssignmentValue
	regexes     map[string]RegexValue
}

func newLoadedConsumer() *loadedConsumer {
	return &loadedConsumer{
		members: map[string]ConsumerMemberValue{},
		targets: map[string][]TopicPartitions{},
		current: map[string]CurrentAssignmentValue{},
		regexes: map[string]RegexValue{},
	}
}

// applyConsumerRecord folds one consumer-group record into l; false when the value does
// not decode (the caller counts it as skipped).
func (l *loadedConsumer) apply(k Key, value []byte, seq int) bool {
	del := value == nil
	var err error
	switch k.Kind {
	case KeyConsumerGroup:
		if del {
			*l = *newLoadedConsumer()
			l.seq = seq
			return true
		}
		l.epoch, err = DecodeEpochValue(value)
		l.live, l.seq = err == nil, seq
	case KeyConsumerPartitionMetadata:
		l.subMeta = nil
		if !del {
			l.subMeta, err = DecodePartitionMetadataValue(value)
		}
	case KeyConsumerMember:
		if del {
			delete(l.members, k.Member)
			return true
		}
		var v ConsumerMemberValue
		if v, err = DecodeConsumerMemberValue(value); err == nil {
			l.members[k.Member] = v
		}
	case KeyConsumerTargetMetadata:
		l.targetEpoch = 0
		if !del {
			l.targetEpoch, err = DecodeEpochValue(value)
		}
	case KeyConsumerTargetMember:
		if del {
			delete(l.targets, k.Member)
			return true
		}
		var v []TopicPartitions
		if v, err = DecodeTargetMemberValue(value); err == nil {
			l.targets[k.Member] = v
		}
	case KeyConsumerCurrentAssignment:
		if del {
			delete(l.current, k.Member)
			return true
		}
		var v CurrentAssignmentValue
		if v, err = DecodeCurrentAssignmentValue(value, false); err == nil {
			l.current[k.Member] = v
		}
	case KeyConsumerRegex:
		if del {
			delete(l.regexes, k.Regex)
			return true
		}
		var v RegexValue
		if v, err = DecodeRegexValue(value); err == nil {
			l.regexes[k.Regex] = v
		}
	}
	return err == nil
}

// restoreConsumer makes g a consumer group from l (members without a current
// assignment record start at epoch 0 with nothing).
func (g *group) restoreConsumer(l *loadedConsumer) {
	g.kind = kindConsumer
	g.protocolType = "consumer"
	cg := newConsumerState()
	g.cg = cg
	cg.epoch, cg.assignmentEpoch = l.epoch, l.targetEpoch
	for _, t := range l.subMeta {
		cg.subMeta[t.TopicName] = t
	}
	for re, v := range l.regexes {
		topics := append([]string(nil), v.Topics...)
		sort.Strings(topics)
		cg.regexes[re] = &regexResolution{topics: topics, version: v.Version, timestamp: v.Timestamp}
	}
	for id, v := range l.members {
		m := newCmember(id)
		m.instanceID, m.rackID, m.clientID, m.clientHost = v.InstanceID, v.RackID, v.ClientID, v.ClientHost
		m.names, m.regex = append([]string(nil), v.SubscribedTopicNames...), v.SubscribedTopicRegex
		m.assignor, m.rebalanceTimeout = v.ServerAssignor, millis(v.RebalanceTimeoutMs)
		sort.Strings(m.names)
		if cur, ok := l.current[id]; ok {
			m.epoch, m.prevEpoch = cur.MemberEpoch, cur.PreviousMemberEpoch
			switch memberState(cur.State) {
			case msStable, msUnrevoked, msUnreleased:
				m.state = memberState(cur.State)
			default:
				m.state = msUnknown
			}
			m.assigned = assignmentFromRecord(cur.Assigned)
			m.pending = assignmentFromRecord(cur.Pending)
		}
		cg.members[id] = m
		if m.instanceID != nil {
			cg.static[*m.instanceID] = id
		}
		cg.claim(m)
	}
	for id, tps := range l.targets {
		if cg.members[id] != nil {
			cg.target[id] = assignmentFromRecord(tps)
		}
	}
	if len(cg.members) == 0 {
		g.state = stateEmpty
	}
}
