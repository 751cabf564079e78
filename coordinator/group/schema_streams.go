package group

import (
	"encoding/binary"
	"slices"
)

// The records of streams groups (KIP-1071) in __consumer_offsets, in the layouts of
// Apache Kafka 4.2's group coordinator (group-coordinator/src/main/resources/common/
// message/StreamsGroup*.json). Keys are int16 type | string group [| string member]:
//
//	type key                                       value (version 0, flexible)
//	---- ----------------------------------------- ---------------------------------------------
//	  17 StreamsGroupMetadataKey group             StreamsGroupMetadataValue
//	  18 StreamsGroupPartitionMetadataKey group    (Kafka 4.0's; no longer written, ignored)
//	  19 StreamsGroupMemberMetadataKey group member StreamsGroupMemberMetadataValue
//	  20 StreamsGroupTargetAssignmentMetadataKey g StreamsGroupTargetAssignmentMetadataValue: epoch
//	  21 StreamsGroupTargetAssignmentMemberKey g m StreamsGroupTargetAssignmentMemberValue
//	  22 StreamsGroupCurrentMemberAssignmentKey g m StreamsGroupCurrentMemberAssignmentValue
//	  23 StreamsGroupTopologyKey group             StreamsGroupTopologyValue
//
// Values (compact strings and arrays, a tagged-field section after every struct):
//
//	StreamsGroupMetadataValue: int32 epoch | int64 metadata_hash |
//	  [assignment_configs: key | value | tags] | tags (tag 0: int32 validated_topology_epoch,
//	  default -1, written only when not -1)
//	StreamsGroupMemberMetadataValue: nullable instance_id | nullable rack_id | client_id |
//	  client_host | int32 rebalance_timeout_ms | int32 topology_epoch | process_id |
//	  nullable struct user_endpoint (int8 -1: null, 1: host | uint16 port | tags) |
//	  [client_tags: key | value | tags] | tags
//	TaskIds: subtopology_id | [int32 partitions] | tags
//	StreamsGroupTargetAssignmentMemberValue: [active TaskIds] | [standby] | [warmup] | tags
//	StreamsGroupCurrentMemberAssignmentValue: int32 member_epoch | int32 previous_member_epoch |
//	  int8 state | [active] | [standby] | [warmup] | [active pending revocation] |
//	  [standby pending revocation] | [warmup pending revocation] | tags
//	StreamsGroupTopologyValue: int32 epoch | [subtopology: id | [source_topics] |
//	  [source_topic_regex] | [state_changelog_topics TopicInfo] | [repartition_sink_topics] |
//	  [repartition_source_topics TopicInfo] | [copartition_groups: [int16 source_topics] |
//	  [int16 source_topic_regex] | [int16 repartition_source_topics] | tags] | tags] | tags
//	TopicInfo: name | int32 partitions | int16 replication_factor | [configs: key | value |
//	  tags] | tags
//
// Tagged fields a later Kafka adds are skipped on read; records of types Kafka added
// after 4.2 (24 and 25, the resolved topic ids of a target assignment) are unknown
// versions to DecodeKey and skipped by the replay.

// Record types (key versions) of streams groups.
const (
	recStreamsGroupMetadata     = 17
	recStreamsPartitionMetadata = 18
	recStreamsMemberMetadata    = 19
	recStreamsTargetMetadata    = 20
	recStreamsTargetMember      = 21
	recStreamsCurrentAssignment = 22
	recStreamsTopology          = 23
)

// Key kinds of streams groups' records.
const (
	// KeyStreamsGroup is a StreamsGroupMetadataKey (type 17).
	KeyStreamsGroup KeyKind = recStreamsGroupMetadata
	// KeyStreamsPartitionMetadata is a StreamsGroupPartitionMetadataKey (type 18).
	KeyStreamsPartitionMetadata KeyKind = recStreamsPartitionMetadata
	// KeyStreamsMember is a StreamsGroupMemberMetadataKey (type 19).
	KeyStreamsMember KeyKind = recStreamsMemberMetadata
	// KeyStreamsTargetMetadata is a StreamsGroupTargetAssignmentMetadataKey (type 20).
	KeyStreamsTargetMetadata KeyKind = recStreamsTargetMetadata
	// KeyStreamsTargetMember is a StreamsGroupTargetAssignmentMemberKey (type 21).
	KeyStreamsTargetMember KeyKind = recStreamsTargetMember
	// KeyStreamsCurrentAssignment is a StreamsGroupCurrentMemberAssignmentKey (type 22).
	KeyStreamsCurrentAssignment KeyKind = recStreamsCurrentAssignment
	// KeyStreamsTopology is a StreamsGroupTopologyKey (type 23).
	KeyStreamsTopology KeyKind = recStreamsTopology
)

// isStreamsRecord reports whether t is a streams-group record type.
func isStreamsRecord(t int16) bool {
	return t >= recStreamsGroupMetadata && t <= recStreamsTopology
}

// StreamsKeyValue is a key-value pair of a streams record (assignment configs, client
// tags, topic configs).
type StreamsKeyValue struct{ Key, Value string }

// StreamsMetadataValue is a StreamsGroupMetadataValue. ValidatedTopologyEpoch is -1
// when the topology has not been validated against the cluster's topics.
type StreamsMetadataValue struct {
	Epoch                  int32
	MetadataHash           int64
	ValidatedTopologyEpoch int32
	AssignmentConfigs      []StreamsKeyValue
}

// StreamsEndpoint is a member's user endpoint (Interactive Queries).
type StreamsEndpoint struct {
	Host string
	Port uint16
}

// StreamsMemberValue is a StreamsGroupMemberMetadataValue.
type StreamsMemberValue struct {
	InstanceID         *string
	RackID             *string
	ClientID           string
	ClientHost         string
	RebalanceTimeoutMs int32
	TopologyEpoch      int32
	ProcessID          string
	UserEndpoint       *StreamsEndpoint
	ClientTags         []StreamsKeyValue
}

// StreamsTaskIDs is one subtopology's partitions (tasks) in an assignment record.
type StreamsTaskIDs struct {
	SubtopologyID string
	Partitions    []int32
}

// StreamsTasksValue is a member's active, standby and warm-up tasks: a
// StreamsGroupTargetAssignmentMemberValue, or half of a current assignment.
type StreamsTasksValue struct {
	Active, Standby, Warmup []StreamsTaskIDs
}

// StreamsCurrentAssignmentValue is a StreamsGroupCurrentMemberAssignmentValue.
type StreamsCurrentAssignmentValue struct {
	MemberEpoch         int32
	PreviousMemberEpoch int32
	State               int8
	Assigned            StreamsTasksValue
	Pending             StreamsTasksValue // tasks pending revocation
}

// StreamsTopicInfo is an internal topic of a topology: its name, partition count (0:
// decided by the coordinator; always 0 for changelogs), replication factor (0: the
// broker's default) and topic configs.
type StreamsTopicInfo struct {
	Name              string
	Partitions        int32
	ReplicationFactor int16
	Configs           []StreamsKeyValue
}

// StreamsCopartitionGroup lists source topics that must be co-partitioned, as indexes
// into their subtopology's SourceTopics, SourceTopicRegex and RepartitionSourceTopics.
type StreamsCopartitionGroup struct {
	SourceTopics, SourceTopicRegex, RepartitionSourceTopics []int16
}

// StreamsSubtopologyValue is one subtopology of a StreamsGroupTopologyValue.
type StreamsSubtopologyValue struct {
	ID                      string
	SourceTopics            []string
	SourceTopicRegex        []string
	StateChangelogTopics    []StreamsTopicInfo
	RepartitionSinkTopics   []string
	RepartitionSourceTopics []StreamsTopicInfo
	CopartitionGroups       []StreamsCopartitionGroup
}

// StreamsTopologyValue is a StreamsGroupTopologyValue.
type StreamsTopologyValue struct {
	Epoch         int32
	Subtopologies []StreamsSubtopologyValue
}

// --- encoders ---

func appendKeyValues(dst []byte, kvs []StreamsKeyValue) []byte {
	dst = appendCompactArrayLen(dst, len(kvs))
	for _, kv := range kvs {
		dst = appendCompactString(dst, kv.Key)
		dst = appendCompactString(dst, kv.Value)
		dst = append(dst, 0)
	}
	return dst
}

func appendInt16s(dst []byte, vs []int16) []byte {
	dst = appendCompactArrayLen(dst, len(vs))
	for _, v := range vs {
		dst = binary.BigEndian.AppendUint16(dst, uint16(v))
	}
	return dst
}

func appendTaskIDs(dst []byte, ts []StreamsTaskIDs) []byte {
	dst = appendCompactArrayLen(dst, len(ts))
	for _, t := range ts {
		dst = appendCompactString(dst, t.SubtopologyID)
		dst = appendCompactArrayLen(dst, len(t.Partitions))
		for _, p := range t.Partitions {
			dst = binary.BigEndian.AppendUint32(dst, uint32(p))
		}
		dst = append(dst, 0)
	}
	return dst
}

func appendTasksValue(dst []byte, v *StreamsTasksValue) []byte {
	dst = appendTaskIDs(dst, v.Active)
	dst = appendTaskIDs(dst, v.Standby)
	return appendTaskIDs(dst, v.Warmup)
}

func appendStreamsMetadataValue(dst []byte, v *StreamsMetadataValue) []byte {
	dst = appendValueHeader(dst)
	dst = binary.BigEndian.AppendUint32(dst, uint32(v.Epoch))
	dst = binary.BigEndian.AppendUint64(dst, uint64(v.MetadataHash))
	dst = appendKeyValues(dst, v.AssignmentConfigs)
	if v.ValidatedTopologyEpoch == -1 {
		return append(dst, 0)
	}
	dst = append(dst, 1, 0, 4) // one tagged field: tag 0, 4 bytes
	return binary.BigEndian.AppendUint32(dst, uint32(v.ValidatedTopologyEpoch))
}

func appendStreamsMemberValue(dst []byte, v *StreamsMemberValue) []byte {
	dst = appendValueHeader(dst)
	dst = appendCompactNullableString(dst, v.InstanceID)
	dst = appendCompactNullableString(dst, v.RackID)
	dst = appendCompactString(dst, v.ClientID)
	dst = appendCompactString(dst, v.ClientHost)
	dst = binary.BigEndian.AppendUint32(dst, uint32(v.RebalanceTimeoutMs))
	dst = binary.BigEndian.AppendUint32(dst, uint32(v.TopologyEpoch))
	dst = appendCompactString(dst, v.ProcessID)
	if v.UserEndpoint == nil {
		dst = append(dst, 0xff)
	} else {
		dst = append(dst, 1)
		dst = appendCompactString(dst, v.UserEndpoint.Host)
		dst = binary.BigEndian.AppendUint16(dst, v.UserEndpoint.Port)
		dst = append(dst, 0)
	}
	dst = appendKeyValues(dst, v.ClientTags)
	return append(dst, 0)
}

func appendStreamsTargetMemberValue(dst []byte, v *StreamsTasksValue) []byte {
	dst = appendValueHeader(dst)
	dst = appendTasksValue(dst, v)
	return append(dst, 0)
}

func appendStreamsCurrentAssignmentValue(dst []byte, v *StreamsCurrentAssignmentValue) []byte {
	dst = appendValueHeader(dst)
	dst = binary.BigEndian.AppendUint32(dst, uint32(v.MemberEpoch))
	dst = binary.BigEndian.AppendUint32(dst, uint32(v.PreviousMemberEpoch))
	dst = append(dst, byte(v.State))
	dst = appendTasksValue(dst, &v.Assigned)
	dst = appendTasksValue(dst, &v.Pending)
	return append(dst, 0)
}

func appendStreamsTopicInfos(dst []byte, ts []StreamsTopicInfo) []byte {
	dst = appendCompactArrayLen(dst, len(ts))
	for _, t := range ts {
		dst = appendCompactString(dst, t.Name)
		dst = binary.BigEndian.AppendUint32(dst, uint32(t.Partitions))
		dst = binary.BigEndian.AppendUint16(dst, uint16(t.ReplicationFactor))
		dst = appendKeyValues(dst, t.Configs)
		dst = append(dst, 0)
	}
	return dst
}

func appendStreamsTopologyValue(dst []byte, v *StreamsTopologyValue) []byte {
	dst = appendValueHeader(dst)
	dst = binary.BigEndian.AppendUint32(dst, uint32(v.Epoch))
	dst = appendCompactArrayLen(dst, len(v.Subtopologies))
	for i := range v.Subtopologies {
		s := &v.Subtopologies[i]
		dst = appendCompactString(dst, s.ID)
		dst = appendCompactStrings(dst, s.SourceTopics)
		dst = appendCompactStrings(dst, s.SourceTopicRegex)
		dst = appendStreamsTopicInfos(dst, s.StateChangelogTopics)
		dst = appendCompactStrings(dst, s.RepartitionSinkTopics)
		dst = appendStreamsTopicInfos(dst, s.RepartitionSourceTopics)
		dst = appendCompactArrayLen(dst, len(s.CopartitionGroups))
		for _, g := range s.CopartitionGroups {
			dst = appendInt16s(dst, g.SourceTopics)
			dst = appendInt16s(dst, g.SourceTopicRegex)
			dst = appendInt16s(dst, g.RepartitionSourceTopics)
			dst = append(dst, 0)
		}
		dst = append(dst, 0)
	}
	return append(dst, 0)
}

// --- decoders ---

func (r *reader) keyValues() []StreamsKeyValue {
	n := r.compactArrayLen(1 + 1 + 1)
	out := make([]StreamsKeyValue, 0, n)
	for i := 0; i < n && r.err == nil; i++ {
		var kv StreamsKeyValue
		kv.Key = r.compactString()
		kv.Value = r.compactString()
		r.skipTags()
		out = append(out, kv)
	}
	return out
}

func (r *reader) int16s() []int16 {
	n := r.compactArrayLen(2)
	out := make([]int16, 0, n)
	for i := 0; i < n && r.err == nil; i++ {
		out = append(out, r.int16())
	}
	return out
}

func (r *reader) taskIDs() []StreamsTaskIDs {
	n := r.compactArrayLen(1 + 1 + 1)
	out := make([]StreamsTaskIDs, 0, n)
	for i := 0; i < n && r.err == nil; i++ {
		var t StreamsTaskIDs
		t.SubtopologyID = r.compactString()
		m := r.compactArrayLen(4)
		t.Partitions = make([]int32, 0, m)
		for j := 0; j < m && r.err == nil; j++ {
			t.Partitions = append(t.Partitions, r.int32())
		}
		r.skipTags()
		out = append(out, t)
	}
	return out
}

func (r *reader) tasksValue() StreamsTasksValue {
	var v StreamsTasksValue
	v.Active = r.taskIDs()
	v.Standby = r.taskIDs()
	v.Warmup = r.taskIDs()
	return v
}

func (r *reader) streamsTopicInfos() []StreamsTopicInfo {
	n := r.compactArrayLen(1 + 4 + 2 + 1 + 1)
	out := make([]StreamsTopicInfo, 0, n)
	for i := 0; i < n && r.err == nil; i++ {
		var t StreamsTopicInfo
		t.Name = r.compactString()
		t.Partitions = r.int32()
		t.ReplicationFactor = r.int16()
		t.Configs = r.keyValues()
		r.skipTags()
		out = append(out, t)
	}
	return out
}

// tags reads a tagged-field section, handing each field's tag and bytes to fn.
func (r *reader) tags(fn func(tag uint64, b []byte)) {
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		r.fail("tagged fields")
		return
	}
	for i := uint64(0); i < n && r.err == nil; i++ {
		tag := r.uvarint()
		size := r.uvarint()
		if size > uint64(len(r.b)) {
			r.fail("tagged field")
			return
		}
		if b := r.take(int(size), "tagged field"); r.err == nil {
			fn(tag, b)
		}
	}
}

// DecodeStreamsMetadataValue decodes a StreamsGroupMetadataValue.
func DecodeStreamsMetadataValue(b []byte) (StreamsMetadataValue, error) {
	v := StreamsMetadataValue{ValidatedTopologyEpoch: -1}
	r, err := valueReader(b, "streams group metadata")
	if err != nil {
		return v, err
	}
	v.Epoch = r.int32()
	v.MetadataHash = r.int64()
	v.AssignmentConfigs = r.keyValues()
	r.tags(func(tag uint64, b []byte) {
		if tag == 0 && len(b) == 4 {
			v.ValidatedTopologyEpoch = int32(binary.BigEndian.Uint32(b))
		}
	})
	return v, r.done()
}

// DecodeStreamsMemberValue decodes a StreamsGroupMemberMetadataValue.
func DecodeStreamsMemberValue(b []byte) (StreamsMemberValue, error) {
	var v StreamsMemberValue
	r, err := valueReader(b, "streams member metadata")
	if err != nil {
		return v, err
	}
	v.InstanceID = r.compactNullableString()
	v.RackID = r.compactNullableString()
	v.ClientID = r.compactString()
	v.ClientHost = r.compactString()
	v.RebalanceTimeoutMs = r.int32()
	v.TopologyEpoch = r.int32()
	v.ProcessID = r.compactString()
	if r.int8() >= 0 && r.err == nil {
		ep := &StreamsEndpoint{Host: r.compactString()}
		if p := r.take(2, "port"); p != nil {
			ep.Port = binary.BigEndian.Uint16(p)
		}
		r.skipTags()
		v.UserEndpoint = ep
	}
	v.ClientTags = r.keyValues()
	r.skipTags()
	return v, r.done()
}

// DecodeStreamsTargetMemberValue decodes a StreamsGroupTargetAssignmentMemberValue.
func DecodeStreamsTargetMemberValue(b []byte) (StreamsTasksValue, error) {
	r, err := valueReader(b, "streams target assignment member")
	if err != nil {
		return StreamsTasksValue{}, err
	}
	v := r.tasksValue()
	r.skipTags()
	return v, r.done()
}

// DecodeStreamsCurrentAssignmentValue decodes a StreamsGroupCurrentMemberAssignmentValue.
func DecodeStreamsCurrentAssignmentValue(b []byte) (StreamsCurrentAssignmentValue, error) {
	var v StreamsCurrentAssignmentValue
	r, err := valueReader(b, "streams current member assignment")
	if err != nil {
		return v, err
	}
	v.MemberEpoch = r.int32()
	v.PreviousMemberEpoch = r.int32()
	v.State = r.int8()
	v.Assigned = r.tasksValue()
	v.Pending = r.tasksValue()
	r.skipTags()
	return v, r.done()
}

// DecodeStreamsTopologyValue decodes a StreamsGroupTopologyValue.
func DecodeStreamsTopologyValue(b []byte) (StreamsTopologyValue, error) {
	var v StreamsTopologyValue
	r, err := valueReader(b, "streams topology")
	if err != nil {
		return v, err
	}
	v.Epoch = r.int32()
	n := r.compactArrayLen(1 + 6*1 + 1)
	v.Subtopologies = make([]StreamsSubtopologyValue, 0, n)
	for i := 0; i < n && r.err == nil; i++ {
		var s StreamsSubtopologyValue
		s.ID = r.compactString()
		s.SourceTopics = r.compactStrings()
		s.SourceTopicRegex = r.compactStrings()
		s.StateChangelogTopics = r.streamsTopicInfos()
		s.RepartitionSinkTopics = r.compactStrings()
		s.RepartitionSourceTopics = r.streamsTopicInfos()
		m := r.compactArrayLen(1 + 1 + 1 + 1)
		s.CopartitionGroups = make([]StreamsCopartitionGroup, 0, m)
		for j := 0; j < m && r.err == nil; j++ {
			var g StreamsCopartitionGroup
			g.SourceTopics = r.int16s()
			g.SourceTopicRegex = r.int16s()
			g.RepartitionSourceTopics = r.int16s()
			r.skipTags()
			s.CopartitionGroups = append(s.CopartitionGroups, g)
		}
		r.skipTags()
		v.Subtopologies = append(v.Subtopologies, s)
	}
	r.skipTags()
	return v, r.done()
}

// taskIDsRecordForm is a task set in its record form, subtopologies sorted.
func taskIDsRecordForm(s taskSet) []StreamsTaskIDs {
	out := make([]StreamsTaskIDs, 0, len(s))
	for _, sub := range s.subtopologies() {
		out = append(out, StreamsTaskIDs{SubtopologyID: sub, Partitions: slices.Clone(s[sub])})
	}
	return out
}

func tasksRecordForm(t tasks) StreamsTasksValue {
	return StreamsTasksValue{Active: taskIDsRecordForm(t.active), Standby: taskIDsRecordForm(t.standby), Warmup: taskIDsRecordForm(t.warmup)}
}

func taskSetFromRecord(ts []StreamsTaskIDs) taskSet {
	s := taskSet{}
	for _, t := range ts {
		for _, p := range t.Partitions {
			s.add(t.SubtopologyID, p)
		}
	}
	return s
}

func tasksFromRecord(v StreamsTasksValue) tasks {
	return tasks{active: taskSetFromRecord(v.Active), standby: taskSetFromRecord(v.Standby), warmup: taskSetFromRecord(v.Warmup)}
}
