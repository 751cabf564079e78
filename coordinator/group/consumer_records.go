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

// convertToConsumerLocked turns an empty classic group into an empty consumer group.
func (g *group) convertToConsumerLocked(recs *[]Record) {
	g.convertFromClassicLocked(kindConsumer, recs)
	g.cg = newConsumerState()
}

// loadedConsumer gathers one consumer group's records during a replay.
type loadedConsumer struct {
	loadedModern[ConsumerMemberValue, []TopicPartitions, CurrentAssignmentValue]
	epoch   int32
	subMeta []PartitionMetadataTopic
	regexes map[string]RegexValue
}

func newLoadedConsumer() *loadedConsumer {
	return &loadedConsumer{
		loadedModern: newLoadedModern[ConsumerMemberValue, []TopicPartitions, CurrentAssignmentValue](),
		regexes:      map[string]RegexValue{},
	}
}

// apply folds one consumer-group record into l; false when the value does not decode
// (the caller counts it as skipped).
func (l *loadedConsumer) apply(k Key, value []byte, seq int) bool {
	var err error
	switch k.Kind {
	case KeyConsumerGroup:
		if value == nil {
			*l = *newLoadedConsumer()
			l.seq = seq
			return true
		}
		l.epoch, err = DecodeEpochValue(value)
		l.live, l.seq = err == nil, seq
	case KeyConsumerPartitionMetadata:
		l.subMeta, err = decodeValue(value, DecodePartitionMetadataValue)
	case KeyConsumerMember:
		err = applyKeyed(l.members, k.Member, value, DecodeConsumerMemberValue)
	case KeyConsumerTargetMetadata:
		l.targetEpoch, err = decodeValue(value, DecodeEpochValue)
	case KeyConsumerTargetMember:
		err = applyKeyed(l.targets, k.Member, value, DecodeTargetMemberValue)
	case KeyConsumerCurrentAssignment:
		err = applyKeyed(l.current, k.Member, value, func(b []byte) (CurrentAssignmentValue, error) { return DecodeCurrentAssignmentValue(b, false) })
	case KeyConsumerRegex:
		err = applyKeyed(l.regexes, k.Regex, value, DecodeRegexValue)
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
	cg.subscribedTopics = newSubscribedTopics(l.subMeta)
	for re, v := range l.regexes {
		topics := append([]string(nil), v.Topics...)
		sort.Strings(topics)
		cg.regexes[re] = &regexResolution{topics: topics, version: v.Version, timestamp: v.Timestamp}
	}
	restoreMembers(&cg.modernGroup, &l.loadedModern, func(id string, v ConsumerMemberValue) *cmember {
		m := newCmember(id)
		m.instanceID, m.rackID, m.clientID, m.clientHost = v.InstanceID, v.RackID, v.ClientID, v.ClientHost
		m.names, m.regex = append([]string(nil), v.SubscribedTopicNames...), v.SubscribedTopicRegex
		m.assignor, m.rebalanceTimeout = v.ServerAssignor, millis(v.RebalanceTimeoutMs)
		sort.Strings(m.names)
		return m
	}, func(m *cmember, cur CurrentAssignmentValue) {
		m.epoch, m.prevEpoch, m.state = cur.MemberEpoch, cur.PreviousMemberEpoch, restoredState(cur.State)
		m.assigned, m.pending = assignmentFromRecord(cur.Assigned), assignmentFromRecord(cur.Pending)
	}, assignmentFromRecord)
	for _, m := range cg.members {
		cg.claim(m)
	}
}
