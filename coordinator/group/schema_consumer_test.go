package group

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
)

// Golden bytes written by hand from Kafka's schemas (group-coordinator's
// ConsumerGroup*.json): a record Kafka's tools decode must come out byte for byte.
func TestConsumerRecordGolden(t *testing.T) {
	id := [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	for _, c := range []struct {
		name string
		got  []byte
		want []byte
	}{
		{"member key", appendGroupTypedKey(nil, recConsumerMemberMetadata, "g", "m"), []byte{0, 5, 0, 1, 'g', 0, 1, 'm'}},
		{"regex key", appendGroupTypedKey(nil, recConsumerRegularExpression, "g", "a.*"), []byte{0, 16, 0, 1, 'g', 0, 3, 'a', '.', '*'}},
		{"group key", appendGroupTypedKey(nil, recConsumerGroupMetadata, "g", "ignored"), []byte{0, 3, 0, 1, 'g'}},
		{"epoch value", appendEpochValue(nil, 5), []byte{0, 0, 0, 0, 0, 5, 0}},
		{"member value", appendConsumerMemberValue(nil, &ConsumerMemberValue{
			RackID: strp("r"), ClientID: "c", ClientHost: "/h", SubscribedTopicNames: []string{"t"},
			RebalanceTimeoutMs: 30000, ServerAssignor: strp("uniform"),
		}), append([]byte{0, 0, 0, 2, 'r', 2, 'c', 3, '/', 'h', 2, 2, 't', 0, 0, 0, 0x75, 0x30, 8}, append([]byte("uniform"), 0)...)},
		{"current assignment", appendCurrentAssignmentValue(nil, &CurrentAssignmentValue{
			MemberEpoch: 3, PreviousMemberEpoch: 2, State: 1,
			Assigned: []TopicPartitions{{TopicID: id, Partitions: []int32{0, 1}}},
		}, false), append(append([]byte{0, 0, 0, 0, 0, 3, 0, 0, 0, 2, 1, 2}, id[:]...), 3, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1, 0)},
		{"partition metadata", appendPartitionMetadataValue(nil, []PartitionMetadataTopic{{TopicID: id, TopicName: "t", NumPartitions: 4}}),
			append(append([]byte{0, 0, 2}, id[:]...), 2, 't', 0, 0, 0, 4, 1, 0, 0)},
		{"regex value", appendRegexValue(nil, &RegexValue{Topics: []string{"ab"}, Version: 7, Timestamp: 9}),
			[]byte{0, 0, 2, 3, 'a', 'b', 0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0, 9, 0}},
	} {
		if !bytes.Equal(c.got, c.want) {
			t.Errorf("%s:\n got %v\nwant %v", c.name, c.got, c.want)
		}
	}
}

func TestConsumerRecordRoundTrip(t *testing.T) {
	id := [16]byte{9: 9}
	mv := ConsumerMemberValue{InstanceID: strp("i"), ClientID: "c", ClientHost: "h", SubscribedTopicNames: []string{"a", "b"},
		SubscribedTopicRegex: strp("x.*"), RebalanceTimeoutMs: -1}
	if got, err := DecodeConsumerMemberValue(appendConsumerMemberValue(nil, &mv)); err != nil || !reflect.DeepEqual(got, mv) {
		t.Fatalf("member: %+v %v", got, err)
	}
	sv := ConsumerMemberValue{RackID: strp("r"), ClientID: "c", ClientHost: "h", SubscribedTopicNames: []string{"a"}}
	if got, err := DecodeShareMemberValue(appendShareMemberValue(nil, &sv)); err != nil || !reflect.DeepEqual(got, sv) {
		t.Fatalf("share member: %+v %v", got, err)
	}
	cv := CurrentAssignmentValue{MemberEpoch: 4, PreviousMemberEpoch: 3, State: 2,
		Assigned: []TopicPartitions{{TopicID: id, Partitions: []int32{1}}}, Pending: []TopicPartitions{{TopicID: id, Partitions: []int32{2, 3}}}}
	if got, err := DecodeCurrentAssignmentValue(appendCurrentAssignmentValue(nil, &cv, false), false); err != nil || !reflect.DeepEqual(got, cv) {
		t.Fatalf("current: %+v %v", got, err)
	}
	cv.Pending = nil
	got, err := DecodeCurrentAssignmentValue(appendCurrentAssignmentValue(nil, &cv, true), true)
	if err != nil || got.MemberEpoch != 4 || len(got.Assigned) != 1 || len(got.Pending) != 0 {
		t.Fatalf("share current: %+v %v", got, err)
	}
	tps := []TopicPartitions{{TopicID: id, Partitions: []int32{0, 5}}}
	if got, err := DecodeTargetMemberValue(appendTargetMemberValue(nil, tps)); err != nil || !reflect.DeepEqual(got, tps) {
		t.Fatalf("target: %+v %v", got, err)
	}
	rv := RegexValue{Topics: []string{"x1"}, Version: 3, Timestamp: 4}
	if got, err := DecodeRegexValue(appendRegexValue(nil, &rv)); err != nil || !reflect.DeepEqual(got, rv) {
		t.Fatalf("regex: %+v %v", got, err)
	}
	for _, k := range []int16{3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16} {
		key, err := DecodeKey(appendGroupTypedKey(nil, k, "grp", "sub"))
		if err != nil || key.Version != k || key.Group != "grp" {
			t.Fatalf("key %d: %+v %v", k, key, err)
		}
		if keyHasMember(k) && key.Member != "sub" || k == 16 && key.Regex != "sub" {
			t.Fatalf("key %d second field: %+v", k, key)
		}
	}
}

// A newer Kafka adds tagged fields (ConsumerGroupMemberMetadataValue's classic member
// metadata, tag 0) and newer value versions: tags are skipped, versions refused.
func TestConsumerRecordTagsAndVersions(t *testing.T) {
	mv := ConsumerMemberValue{ClientID: "c", ClientHost: "h", SubscribedTopicNames: []string{}, RebalanceTimeoutMs: 1}
	b := appendConsumerMemberValue(nil, &mv)
	b = append(b[:len(b)-1], 1, 0, 3, 0xaa, 0xbb, 0xcc) // one tagged field: tag 0, 3 bytes
	if got, err := DecodeConsumerMemberValue(b); err != nil || got.ClientID != "c" {
		t.Fatalf("tagged: %+v %v", got, err)
	}
	v1 := appendEpochValue(nil, 1)
	v1[1] = 1
	if _, err := DecodeEpochValue(v1); !errors.Is(err, ErrUnknownVersion) {
		t.Fatalf("version 1: %v", err)
	}
	if _, err := DecodeCurrentAssignmentValue([]byte{0, 0, 0, 0}, false); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("short: %v", err)
	}
}

// FuzzDecodeConsumerRecords: the decoders of the consumer and share records never panic
// and never allocate what a length claims beyond the bytes there are.
func FuzzDecodeConsumerRecords(f *testing.F) {
	id := [16]byte{1}
	f.Add(appendConsumerMemberValue(nil, &ConsumerMemberValue{ClientID: "c", SubscribedTopicNames: []string{"t"}}))
	f.Add(appendCurrentAssignmentValue(nil, &CurrentAssignmentValue{Assigned: []TopicPartitions{{TopicID: id, Partitions: []int32{1}}}}, false))
	f.Add(appendPartitionMetadataValue(nil, []PartitionMetadataTopic{{TopicID: id, TopicName: "t", NumPartitions: 1}}))
	f.Add(appendRegexValue(nil, &RegexValue{Topics: []string{"a"}}))
	f.Add([]byte{0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = DecodeKey(b)
		_, _ = DecodeEpochValue(b)
		_, _ = DecodeConsumerMemberValue(b)
		_, _ = DecodeShareMemberValue(b)
		_, _ = DecodePartitionMetadataValue(b)
		_, _ = DecodeTargetMemberValue(b)
		_, _ = DecodeCurrentAssignmentValue(b, false)
		_, _ = DecodeCurrentAssignmentValue(b, true)
		_, _ = DecodeRegexValue(b)
	})
}
