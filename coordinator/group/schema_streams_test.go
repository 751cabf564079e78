package group

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
)

// Golden bytes written by hand from Kafka 4.2's StreamsGroup*.json schemas.
func TestStreamsRecordGolden(t *testing.T) {
	for _, c := range []struct {
		name string
		got  []byte
		want []byte
	}{
		{"metadata key", appendGroupTypedKey(nil, recStreamsGroupMetadata, "g", ""), []byte{0, 17, 0, 1, 'g'}},
		{"member key", appendGroupTypedKey(nil, recStreamsMemberMetadata, "g", "m"), []byte{0, 19, 0, 1, 'g', 0, 1, 'm'}},
		{"current assignment key", appendGroupTypedKey(nil, recStreamsCurrentAssignment, "g", "m"), []byte{0, 22, 0, 1, 'g', 0, 1, 'm'}},
		{"topology key", appendGroupTypedKey(nil, recStreamsTopology, "g", "ignored"), []byte{0, 23, 0, 1, 'g'}},
		{"metadata value", appendStreamsMetadataValue(nil, &StreamsMetadataValue{Epoch: 5, MetadataHash: 7, ValidatedTopologyEpoch: 2,
			AssignmentConfigs: []StreamsKeyValue{{"a", "b"}}}),
			[]byte{0, 0, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0, 7, 2, 2, 'a', 2, 'b', 0, 1, 0, 4, 0, 0, 0, 2}},
		{"metadata value, topology not validated", appendStreamsMetadataValue(nil, &StreamsMetadataValue{Epoch: 1, ValidatedTopologyEpoch: -1}),
			[]byte{0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0}},
		{"member value", appendStreamsMemberValue(nil, &StreamsMemberValue{ClientID: "c", ClientHost: "h", RebalanceTimeoutMs: 1000,
			ProcessID: "p", UserEndpoint: &StreamsEndpoint{Host: "x", Port: 80}}),
			[]byte{0, 0, 0, 0, 2, 'c', 2, 'h', 0, 0, 3, 0xe8, 0, 0, 0, 0, 2, 'p', 1, 2, 'x', 0, 80, 0, 1, 0}},
		{"member value without endpoint", appendStreamsMemberValue(nil, &StreamsMemberValue{InstanceID: strp("i"), ProcessID: "p",
			ClientTags: []StreamsKeyValue{{"k", "v"}}}),
			[]byte{0, 0, 2, 'i', 0, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 2, 'p', 0xff, 2, 2, 'k', 2, 'v', 0, 0}},
		{"target epoch", appendEpochValue(nil, 9), []byte{0, 0, 0, 0, 0, 9, 0}},
		{"current assignment value", appendStreamsCurrentAssignmentValue(nil, &StreamsCurrentAssignmentValue{MemberEpoch: 3, PreviousMemberEpoch: 2, State: 1,
			Assigned: StreamsTasksValue{Active: []StreamsTaskIDs{{SubtopologyID: "0", Partitions: []int32{1}}}}}),
			[]byte{0, 0, 0, 0, 0, 3, 0, 0, 0, 2, 1, 2, 2, '0', 2, 0, 0, 0, 1, 0, 1, 1, 1, 1, 1, 0}},
		{"topology value", appendStreamsTopologyValue(nil, &StreamsTopologyValue{Subtopologies: []StreamsSubtopologyValue{{
			ID: "0", SourceTopics: []string{"in"}, StateChangelogTopics: []StreamsTopicInfo{{Name: "c"}},
			CopartitionGroups: []StreamsCopartitionGroup{{SourceTopics: []int16{0}}}}}}),
			[]byte{0, 0, 0, 0, 0, 0, 2, 2, '0', 2, 3, 'i', 'n', 1, 2, 2, 'c', 0, 0, 0, 0, 0, 0, 1, 0, 1, 1, 2, 2, 0, 0, 1, 1, 0, 0, 0}},
	} {
		if !bytes.Equal(c.got, c.want) {
			t.Errorf("%s:\n got %v\nwant %v", c.name, c.got, c.want)
		}
	}
}

func TestStreamsRecordRoundTrip(t *testing.T) {
	mv := StreamsMetadataValue{Epoch: 4, MetadataHash: -3, ValidatedTopologyEpoch: 1, AssignmentConfigs: []StreamsKeyValue{{"num.standby.replicas", "1"}}}
	if got, err := DecodeStreamsMetadataValue(appendStreamsMetadataValue(nil, &mv)); err != nil || !reflect.DeepEqual(got, mv) {
		t.Fatalf("metadata: %+v %v", got, err)
	}
	member := StreamsMemberValue{InstanceID: strp("i"), RackID: strp("r"), ClientID: "c", ClientHost: "/h", RebalanceTimeoutMs: 30000,
		TopologyEpoch: 2, ProcessID: "p", UserEndpoint: &StreamsEndpoint{Host: "h", Port: 65535}, ClientTags: []StreamsKeyValue{{"zone", "a"}}}
	if got, err := DecodeStreamsMemberValue(appendStreamsMemberValue(nil, &member)); err != nil || !reflect.DeepEqual(got, member) {
		t.Fatalf("member: %+v %v", got, err)
	}
	tv := StreamsTasksValue{Active: []StreamsTaskIDs{{SubtopologyID: "0", Partitions: []int32{0, 2}}},
		Standby: []StreamsTaskIDs{{SubtopologyID: "1", Partitions: []int32{1}}}, Warmup: []StreamsTaskIDs{}}
	if got, err := DecodeStreamsTargetMemberValue(appendStreamsTargetMemberValue(nil, &tv)); err != nil || !reflect.DeepEqual(got, tv) {
		t.Fatalf("target: %+v %v", got, err)
	}
	cv := StreamsCurrentAssignmentValue{MemberEpoch: 5, PreviousMemberEpoch: 4, State: 2, Assigned: tv,
		Pending: StreamsTasksValue{Active: []StreamsTaskIDs{}, Standby: []StreamsTaskIDs{}, Warmup: []StreamsTaskIDs{{SubtopologyID: "0", Partitions: []int32{3}}}}}
	if got, err := DecodeStreamsCurrentAssignmentValue(appendStreamsCurrentAssignmentValue(nil, &cv)); err != nil || !reflect.DeepEqual(got, cv) {
		t.Fatalf("current: %+v %v", got, err)
	}
	topo := StreamsTopologyValue{Epoch: 3, Subtopologies: []StreamsSubtopologyValue{{
		ID: "0", SourceTopics: []string{"a", "b"}, SourceTopicRegex: []string{},
		StateChangelogTopics:    []StreamsTopicInfo{{Name: "c", ReplicationFactor: 3, Configs: []StreamsKeyValue{{"cleanup.policy", "compact"}}}},
		RepartitionSinkTopics:   []string{"r"},
		RepartitionSourceTopics: []StreamsTopicInfo{{Name: "s", Partitions: 4, Configs: []StreamsKeyValue{}}},
		CopartitionGroups:       []StreamsCopartitionGroup{{SourceTopics: []int16{0, 1}, SourceTopicRegex: []int16{}, RepartitionSourceTopics: []int16{0}}},
	}}}
	if got, err := DecodeStreamsTopologyValue(appendStreamsTopologyValue(nil, &topo)); err != nil || !reflect.DeepEqual(got, topo) {
		t.Fatalf("topology: %+v %v", got, err)
	}
	for _, typ := range []int16{17, 18, 19, 20, 21, 22, 23} {
		k, err := DecodeKey(appendGroupTypedKey(nil, typ, "grp", "mem"))
		if err != nil || int(k.Kind) != int(typ) || k.Group != "grp" || (keyHasMember(typ) && k.Member != "mem") {
			t.Fatalf("key %d: %+v %v", typ, k, err)
		}
	}
	if _, err := DecodeKey(appendGroupTypedKey(nil, 24, "grp", "")); !errors.Is(err, ErrUnknownVersion) {
		t.Fatalf("key 24: %v", err)
	}
}

// A later Kafka's tagged fields are skipped; a value version other than 0 is refused.
func TestStreamsRecordTagsAndVersions(t *testing.T) {
	v := appendStreamsTargetMemberValue(nil, &StreamsTasksValue{})
	v = append(v[:len(v)-1], 1, 5, 2, 'x', 'y') // one unknown tagged field
	if _, err := DecodeStreamsTargetMemberValue(v); err != nil {
		t.Fatalf("unknown tag: %v", err)
	}
	if _, err := DecodeStreamsTopologyValue([]byte{0, 1, 0, 0, 0, 0, 1, 0}); !errors.Is(err, ErrUnknownVersion) {
		t.Fatalf("version 1: %v", err)
	}
	if _, err := DecodeStreamsMemberValue([]byte{0, 0, 0}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("short: %v", err)
	}
}

func FuzzDecodeStreamsRecords(f *testing.F) {
	f.Add(appendStreamsMetadataValue(nil, &StreamsMetadataValue{Epoch: 1, ValidatedTopologyEpoch: 0, AssignmentConfigs: []StreamsKeyValue{{"a", "b"}}}))
	f.Add(appendStreamsMemberValue(nil, &StreamsMemberValue{ProcessID: "p", UserEndpoint: &StreamsEndpoint{Host: "h", Port: 1}}))
	f.Add(appendStreamsCurrentAssignmentValue(nil, &StreamsCurrentAssignmentValue{Assigned: StreamsTasksValue{Active: []StreamsTaskIDs{{SubtopologyID: "0", Partitions: []int32{1}}}}}))
	f.Add(appendStreamsTopologyValue(nil, &StreamsTopologyValue{Subtopologies: []StreamsSubtopologyValue{{ID: "0", SourceTopics: []string{"a"},
		CopartitionGroups: []StreamsCopartitionGroup{{SourceTopics: []int16{0}}}}}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = DecodeStreamsMetadataValue(b)
		_, _ = DecodeStreamsMemberValue(b)
		_, _ = DecodeStreamsTargetMemberValue(b)
		_, _ = DecodeStreamsCurrentAssignmentValue(b)
		_, _ = DecodeStreamsTopologyValue(b)
	})
}
