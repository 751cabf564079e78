package group

import (
	"sort"
	"time"
)

// Records of streams groups: what the state machine writes, and the replay that
// rebuilds a group from them when its partition loads (schema_streams.go draws them).

func (g *group) streamsEpochRecord() Record {
	st := g.st
	v := StreamsMetadataValue{Epoch: st.epoch, MetadataHash: st.metadataHash, ValidatedTopologyEpoch: st.validatedEpoch, AssignmentConfigs: st.assignmentConfigs}
	return g.rec(recStreamsGroupMetadata, "", appendStreamsMetadataValue(nil, &v))
}

func (g *group) streamsTopologyRecord() Record {
	return g.rec(recStreamsTopology, "", appendStreamsTopologyValue(nil, g.st.topology))
}

func (g *group) streamsMemberRecord(m *stmember) Record {
	v := StreamsMemberValue{
		InstanceID: m.instanceID, RackID: m.rackID, ClientID: m.clientID, ClientHost: m.clientHost,
		RebalanceTimeoutMs: int32(m.rebalanceTimeout / time.Millisecond), TopologyEpoch: m.topologyEpoch,
		ProcessID: m.processID, UserEndpoint: m.endpoint, ClientTags: m.clientTags,
	}
	return g.rec(recStreamsMemberMetadata, m.id, appendStreamsMemberValue(nil, &v))
}

// tombstonesLocked deletes every record of the streams group (not its offsets), in the
// order of Kafka's StreamsGroup.createGroupTombstoneRecords.
func (st *streamsState) tombstonesLocked(g *group) []Record {
	recs := st.membersTombstones(g)
	return append(recs, g.rec(recStreamsGroupMetadata, "", nil), g.rec(recStreamsTopology, "", nil))
}

// loadedStreams gathers one streams group's records during a replay.
type loadedStreams struct {
	loadedModern[StreamsMemberValue, StreamsTasksValue, StreamsCurrentAssignmentValue]
	meta     StreamsMetadataValue
	topology *StreamsTopologyValue
}

func newLoadedStreams() *loadedStreams {
	return &loadedStreams{loadedModern: newLoadedModern[StreamsMemberValue, StreamsTasksValue, StreamsCurrentAssignmentValue]()}
}

// apply folds one streams-group record into l; false when the value does not decode
// (the caller counts it as skipped).
func (l *loadedStreams) apply(k Key, value []byte, seq int) bool {
	var err error
	switch k.Kind {
	case KeyStreamsGroup:
		if value == nil {
			*l = *newLoadedStreams()
			l.seq = seq
			return true
		}
		l.meta, err = DecodeStreamsMetadataValue(value)
		l.live, l.seq = err == nil, seq
	case KeyStreamsTopology:
		l.topology = nil
		if value != nil {
			var v StreamsTopologyValue
			if v, err = DecodeStreamsTopologyValue(value); err == nil {
				l.topology = &v
			}
		}
	case KeyStreamsMember:
		err = applyKeyed(l.members, k.Member, value, DecodeStreamsMemberValue)
	case KeyStreamsTargetMetadata:
		l.targetEpoch, err = decodeValue(value, DecodeEpochValue)
	case KeyStreamsTargetMember:
		err = applyKeyed(l.targets, k.Member, value, DecodeStreamsTargetMemberValue)
	case KeyStreamsCurrentAssignment:
		err = applyKeyed(l.current, k.Member, value, DecodeStreamsCurrentAssignmentValue)
	case KeyStreamsPartitionMetadata:
		// Kafka 4.0's partition metadata, replaced by the metadata hash: ignored.
	}
	return err == nil
}

// restoreStreams makes g a streams group from l (members without a current assignment
// record start at epoch 0 with nothing). The topology is configured again at the next
// heartbeat; with the same topics it hashes the same and the group epoch stays.
func (g *group) restoreStreams(l *loadedStreams) {
	g.kind = kindStreams
	g.protocolType = "streams"
	st := newStreamsState()
	g.st = st
	st.epoch, st.assignmentEpoch = l.meta.Epoch, l.targetEpoch
	st.metadataHash, st.validatedEpoch = l.meta.MetadataHash, l.meta.ValidatedTopologyEpoch
	st.assignmentConfigs = append([]StreamsKeyValue{}, l.meta.AssignmentConfigs...)
	st.topology = l.topology
	restoreMembers(&st.modernGroup, &l.loadedModern, func(id string, v StreamsMemberValue) *stmember {
		m := newStmember(id)
		m.instanceID, m.rackID, m.clientID, m.clientHost = v.InstanceID, v.RackID, v.ClientID, v.ClientHost
		m.rebalanceTimeout, m.topologyEpoch, m.processID = millis(v.RebalanceTimeoutMs), v.TopologyEpoch, v.ProcessID
		m.endpoint, m.clientTags = v.UserEndpoint, append([]StreamsKeyValue(nil), v.ClientTags...)
		sort.Slice(m.clientTags, func(i, j int) bool { return m.clientTags[i].Key < m.clientTags[j].Key })
		return m
	}, func(m *stmember, cur StreamsCurrentAssignmentValue) {
		m.epoch, m.prevEpoch, m.state = cur.MemberEpoch, cur.PreviousMemberEpoch, restoredState(cur.State)
		m.assigned, m.pending = tasksFromRecord(cur.Assigned), tasksFromRecord(cur.Pending)
	}, tasksFromRecord)
	for _, m := range st.members {
		st.claim(m)
	}
	g.state = stateStable
	g.syncStreamsSubscriptionsLocked()
}
