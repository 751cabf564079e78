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
	seq         int // replay position of the group's last StreamsGroupMetadata record
	live        bool
	meta        StreamsMetadataValue
	topology    *StreamsTopologyValue
	members     map[string]StreamsMemberValue
	targetEpoch int32
	targets     map[string]StreamsTasksValue
	current     map[string]StreamsCurrentAssignmentValue
}

func newLoadedStreams() *loadedStreams {
	return &loadedStreams{
		members: map[string]StreamsMemberValue{},
		targets: map[string]StreamsTasksValue{},
		current: map[string]StreamsCurrentAssignmentValue{},
	}
}

// apply folds one streams-group record into l; false when the value does not decode
// (the caller counts it as skipped).
func (l *loadedStreams) apply(k Key, value []byte, seq int) bool {
	del := value == nil
	var err error
	switch k.Kind {
	case KeyStreamsGroup:
		if del {
			*l = *newLoadedStreams()
			l.seq = seq
			return true
		}
		l.meta, err = DecodeStreamsMetadataValue(value)
		l.live, l.seq = err == nil, seq
	case KeyStreamsTopology:
		l.topology = nil
		if !del {
			var v StreamsTopologyValue
			if v, err = DecodeStreamsTopologyValue(value); err == nil {
				l.topology = &v
			}
		}
	case KeyStreamsMember:
		if del {
			delete(l.members, k.Member)
			return true
		}
		var v StreamsMemberValue
		if v, err = DecodeStreamsMemberValue(value); err == nil {
			l.members[k.Member] = v
		}
	case KeyStreamsTargetMetadata:
		l.targetEpoch = 0
		if !del {
			l.targetEpoch, err = DecodeEpochValue(value)
		}
	case KeyStreamsTargetMember:
		if del {
			delete(l.targets, k.Member)
			return true
		}
		var v StreamsTasksValue
		if v, err = DecodeStreamsTargetMemberValue(value); err == nil {
			l.targets[k.Member] = v
		}
	case KeyStreamsCurrentAssignment:
		if del {
			delete(l.current, k.Member)
			return true
		}
		var v StreamsCurrentAssignmentValue
		if v, err = DecodeStreamsCurrentAssignmentValue(value); err == nil {
			l.current[k.Member] = v
		}
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
	for id, v := range l.members {
		m := newStmember(id)
		m.instanceID, m.rackID, m.clientID, m.clientHost = v.InstanceID, v.RackID, v.ClientID, v.ClientHost
		m.rebalanceTimeout, m.topologyEpoch, m.processID = millis(v.RebalanceTimeoutMs), v.TopologyEpoch, v.ProcessID
		m.endpoint, m.clientTags = v.UserEndpoint, append([]StreamsKeyValue(nil), v.ClientTags...)
		sort.Slice(m.clientTags, func(i, j int) bool { return m.clientTags[i].Key < m.clientTags[j].Key })
		if cur, ok := l.current[id]; ok {
			m.epoch, m.prevEpoch = cur.MemberEpoch, cur.PreviousMemberEpoch
			switch memberState(cur.State) {
			case msStable, msUnrevoked, msUnreleased:
				m.state = memberState(cur.State)
			default:
				m.state = msUnknown
			}
			m.assigned, m.pending = tasksFromRecord(cur.Assigned), tasksFromRecord(cur.Pending)
		}
		st.members[id] = m
		if m.instanceID != nil {
			st.static[*m.instanceID] = id
		}
		st.claim(m)
	}
	for id, v := range l.targets {
		if st.members[id] != nil {
			st.target[id] = tasksFromRecord(v)
		}
	}
	g.state = stateStable
	g.syncStreamsSubscriptionsLocked()
}
