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

func (g *group) streamsTargetMetadataRecord() Record {
	return g.rec(recStreamsTargetMetadata, "", appendEpochValue(nil, g.st.assignmentEpoch))
}

func (g *group) streamsTargetMemberRecord(id string, t tasks) Record {
	v := tasksRecordForm(t)
	return g.rec(recStreamsTargetMember, id, appendStreamsTargetMemberValue(nil, &v))
}

func (g *group) streamsMemberRecord(m *stmember) Record {
	v := StreamsMemberValue{
		InstanceID: m.instanceID, RackID: m.rackID, ClientID: m.clientID, ClientHost: m.clientHost,
		RebalanceTimeoutMs: int32(m.rebalanceTimeout / time.Millisecond), TopologyEpoch: m.topologyEpoch,
		ProcessID: m.processID, UserEndpoint: m.endpoint, ClientTags: m.clientTags,
	}
	return g.rec(recStreamsMemberMetadata, m.id, appendStreamsMemberValue(nil, &v))
}

func (g *group) streamsCurrentAssignmentRecord(m *stmember) Record {
	v := StreamsCurrentAssignmentValue{
		MemberEpoch: m.epoch, PreviousMemberEpoch: m.prevEpoch, State: int8(m.state),
		Assigned: tasksRecordForm(m.assigned), Pending: tasksRecordForm(m.pending),
	}
	return g.rec(recStreamsCurrentAssignment, m.id, appendStreamsCurrentAssignmentValue(nil, &v))
}

// streamsMemberTombstones deletes a member's three records, in Kafka's order.
func (g *group) streamsMemberTombstones(id string) []Record {
	return []Record{
		g.rec(recStreamsCurrentAssignment, id, nil),
		g.rec(recStreamsTargetMember, id, nil),
		g.rec(recStreamsMemberMetadata, id, nil),
	}
}

// streamsTombstonesLocked deletes every record of the streams group (not its offsets),
// in the order of Kafka's StreamsGroup.createGroupTombstoneRecords.
func (g *group) streamsTombstonesLocked() []Record {
	st := g.st
	ids := make([]string, 0, len(st.members))
	for id := range st.members {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var recs []Record
	for _, id := range ids {
		recs = append(recs, g.rec(recStreamsCurrentAssignment, id, nil))
	}
	for _, id := range ids {
		recs = append(recs, g.rec(recStreamsTargetMember, id, nil))
	}
	recs = append(recs, g.rec(recStreamsTargetMetadata, "", nil))
	for _, id := range ids {
		recs = append(recs, g.rec(recStreamsMemberMetadata, id, nil))
	}
	recs = append(recs, g.rec(recStreamsGroupMetadata, "", nil))
	return append(recs, g.rec(recStreamsTopology, "", nil))
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
		m := &stmember{
			id: id, instanceID: v.InstanceID, rackID: v.RackID, clientID: v.ClientID, clientHost: v.ClientHost,
			rebalanceTimeout: millis(v.RebalanceTimeoutMs), topologyEpoch: v.TopologyEpoch, processID: v.ProcessID,
			endpoint: v.UserEndpoint, clientTags: append([]StreamsKeyValue(nil), v.ClientTags...),
			state: msStable, assigned: newTasks(), pending: newTasks(),
		}
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
