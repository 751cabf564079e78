package group

import (
	"encoding/binary"
	"fmt"
	"slices"
)

// The records of the consumer protocol (KIP-848) and of share groups (KIP-932) in
// __consumer_offsets. A key starts with an int16 record type (Kafka's "key version"):
//
//	type key                                         value (version 0, flexible)
//	---- ------------------------------------------- ------------------------------------------
//	   3 ConsumerGroupMetadataKey  group             ConsumerGroupMetadataValue: epoch
//	   4 ConsumerGroupPartitionMetadataKey group     ConsumerGroupPartitionMetadataValue: topics
//	   5 ConsumerGroupMemberMetadataKey group member ConsumerGroupMemberMetadataValue
//	   6 ConsumerGroupTargetAssignmentMetadataKey g  ConsumerGroupTargetAssignmentMetadataValue
//	   7 ConsumerGroupTargetAssignmentMemberKey g m  ConsumerGroupTargetAssignmentMemberValue
//	   8 ConsumerGroupCurrentMemberAssignmentKey g m ConsumerGroupCurrentMemberAssignmentValue
//	   9 ShareGroupPartitionMetadataKey group        (same layout as 4)
//	  10 ShareGroupMemberMetadataKey group member    ShareGroupMemberMetadataValue
//	  11 ShareGroupMetadataKey group                 ShareGroupMetadataValue: epoch
//	  12 ShareGroupTargetAssignmentMetadataKey group (same layout as 6)
//	  13 ShareGroupTargetAssignmentMemberKey g m     (same layout as 7)
//	  14 ShareGroupCurrentMemberAssignmentKey g m    ShareGroupCurrentMemberAssignmentValue
//	  15 ShareGroupStatePartitionMetadataKey group   ShareGroupStatePartitionMetadataValue (share_state_meta.go)
//	  16 ConsumerGroupRegularExpressionKey g regex   ConsumerGroupRegularExpressionValue
//
// Keys are not flexible (int16 type | string group [| string member or regex]). Values
// are int16 version 0 followed by the flexible encoding: compact strings and arrays
// (uvarint length+1), uuid = 16 raw bytes, a tagged-field section after every struct.
//
//	ConsumerGroupMemberMetadataValue: nullable instance_id | nullable rack_id |
//	  client_id | client_host | [subscribed_topic_names] | nullable subscribed_topic_regex |
//	  int32 rebalance_timeout_ms | nullable server_assignor | tags (tag 0: classic member
//	  metadata, skipped)
//	ConsumerGroupPartitionMetadataValue: [topic_id uuid | topic_name | int32 num_partitions |
//	  [int32 partition | [racks]] | tags] | tags
//	Target assignment member value: [topic_id uuid | [int32 partitions] | tags] | tags
//	ConsumerGroupCurrentMemberAssignmentValue: int32 member_epoch | int32 previous_member_epoch |
//	  int8 state | [assigned topic partitions] | [partitions pending revocation] | tags
//	ShareGroupCurrentMemberAssignmentValue: int32 member_epoch | int32 previous_member_epoch |
//	  int8 state | [assigned topic partitions] | tags
//	ShareGroupMemberMetadataValue: nullable rack_id | client_id | client_host |
//	  [subscribed_topic_names] | tags
//	ConsumerGroupRegularExpressionValue: [topics] | int64 version | int64 timestamp | tags
//
// These are the layouts of Apache Kafka 4.0's group coordinator
// (group-coordinator/src/main/resources/common/message), so kafka-dump-log and Kafka's
// own coordinator read what Samsa writes; fields Kafka added later as tagged fields
// are skipped on read.

// Record types (key versions) of __consumer_offsets.
const (
	recConsumerGroupMetadata        = 3
	recConsumerPartitionMetadata    = 4
	recConsumerMemberMetadata       = 5
	recConsumerTargetMetadata       = 6
	recConsumerTargetMember         = 7
	recConsumerCurrentAssignment    = 8
	recSharePartitionMetadata       = 9
	recShareMemberMetadata          = 10
	recShareGroupMetadata           = 11
	recShareTargetMetadata          = 12
	recShareTargetMember            = 13
	recShareCurrentAssignment       = 14
	recShareStatePartitionMetadata  = 15
	recConsumerRegularExpression    = 16
	minTopicPartitionsBytes         = 16 + 1 + 1
	minPartitionMetadataTopicBytes  = 16 + 1 + 4 + 1 + 1
	maxRecordArrayElementsPerBuffer = 1 << 20
)

// More key kinds: the records of consumer and share groups.
const (
	// KeyConsumerGroup is a ConsumerGroupMetadataKey (type 3).
	KeyConsumerGroup KeyKind = iota + 3
	// KeyConsumerPartitionMetadata is a ConsumerGroupPartitionMetadataKey (type 4).
	KeyConsumerPartitionMetadata
	// KeyConsumerMember is a ConsumerGroupMemberMetadataKey (type 5).
	KeyConsumerMember
	// KeyConsumerTargetMetadata is a ConsumerGroupTargetAssignmentMetadataKey (type 6).
	KeyConsumerTargetMetadata
	// KeyConsumerTargetMember is a ConsumerGroupTargetAssignmentMemberKey (type 7).
	KeyConsumerTargetMember
	// KeyConsumerCurrentAssignment is a ConsumerGroupCurrentMemberAssignmentKey (type 8).
	KeyConsumerCurrentAssignment
	// KeySharePartitionMetadata is a ShareGroupPartitionMetadataKey (type 9).
	KeySharePartitionMetadata
	// KeyShareMember is a ShareGroupMemberMetadataKey (type 10).
	KeyShareMember
	// KeyShareGroup is a ShareGroupMetadataKey (type 11).
	KeyShareGroup
	// KeyShareTargetMetadata is a ShareGroupTargetAssignmentMetadataKey (type 12).
	KeyShareTargetMetadata
	// KeyShareTargetMember is a ShareGroupTargetAssignmentMemberKey (type 13).
	KeyShareTargetMember
	// KeyShareCurrentAssignment is a ShareGroupCurrentMemberAssignmentKey (type 14).
	KeyShareCurrentAssignment
	// KeyShareStatePartitionMetadata is a ShareGroupStatePartitionMetadataKey (type 15).
	KeyShareStatePartitionMetadata
	// KeyConsumerRegex is a ConsumerGroupRegularExpressionKey (type 16).
	KeyConsumerRegex
)

// keyHasMember reports whether keys of type t carry a member id after the group.
func keyHasMember(t int16) bool {
	switch t {
	case recConsumerMemberMetadata, recConsumerTargetMember, recConsumerCurrentAssignment,
		recShareMemberMetadata, recShareTargetMember, recShareCurrentAssignment,
		recStreamsMemberMetadata, recStreamsTargetMember, recStreamsCurrentAssignment:
		return true
	}
	return false
}

// appendGroupTypedKey appends a key of record type t for group (and member when the type
// has one; regex for type 16).
func appendGroupTypedKey(dst []byte, t int16, group, second string) []byte {
	dst = binary.BigEndian.AppendUint16(dst, uint16(t))
	dst = appendString(dst, group)
	if keyHasMember(t) || t == recConsumerRegularExpression {
		dst = appendString(dst, second)
	}
	return dst
}

// decodeTypedKey reads the rest of a key of type 3..23 (after the type).
func decodeTypedKey(r *reader, k *Key) {
	k.Kind = KeyKind(k.Version)
	k.Group = r.string()
	switch {
	case keyHasMember(k.Version):
		k.Member = r.string()
	case k.Version == recConsumerRegularExpression:
		k.Regex = r.string()
	}
}

// TopicPartitions is one topic's partitions in an assignment record.
type TopicPartitions struct {
	TopicID    [16]byte
	Partitions []int32
}

// ConsumerMemberValue is a ConsumerGroupMemberMetadataValue (and, with only RackID,
// ClientID, ClientHost and SubscribedTopicNames, a ShareGroupMemberMetadataValue).
type ConsumerMemberValue struct {
	InstanceID           *string
	RackID               *string
	ClientID             string
	ClientHost           string
	SubscribedTopicNames []string
	SubscribedTopicRegex *string
	RebalanceTimeoutMs   int32
	ServerAssignor       *string
}

// PartitionMetadataTopic is one topic of a ConsumerGroupPartitionMetadataValue. Racks
// are not tracked (Kafka 4.0 no longer reads them); an empty list is written.
type PartitionMetadataTopic struct {
	TopicID       [16]byte
	TopicName     string
	NumPartitions int32
}

// CurrentAssignmentValue is a ConsumerGroupCurrentMemberAssignmentValue (Pending is
// absent from the share group's form).
type CurrentAssignmentValue struct {
	MemberEpoch         int32
	PreviousMemberEpoch int32
	State               int8
	Assigned            []TopicPartitions
	Pending             []TopicPartitions
}

// RegexValue is a ConsumerGroupRegularExpressionValue: the topics a regex resolved to
// at a metadata version.
type RegexValue struct {
	Topics    []string
	Version   int64
	Timestamp int64
}

func appendValueHeader(dst []byte) []byte { return binary.BigEndian.AppendUint16(dst, 0) }

func appendCompactArrayLen(dst []byte, n int) []byte {
	return binary.AppendUvarint(dst, uint64(n)+1)
}

func appendCompactStrings(dst []byte, ss []string) []byte {
	dst = appendCompactArrayLen(dst, len(ss))
	for _, s := range ss {
		dst = appendCompactString(dst, s)
	}
	return dst
}

func appendTopicPartitions(dst []byte, tps []TopicPartitions) []byte {
	dst = appendCompactArrayLen(dst, len(tps))
	for _, tp := range tps {
		dst = append(dst, tp.TopicID[:]...)
		dst = appendCompactArrayLen(dst, len(tp.Partitions))
		for _, p := range tp.Partitions {
			dst = binary.BigEndian.AppendUint32(dst, uint32(p))
		}
		dst = append(dst, 0) // tags
	}
	return dst
}

// appendEpochValue appends a value holding one int32 (ConsumerGroupMetadataValue,
// ShareGroupMetadataValue, the target assignment metadata values).
func appendEpochValue(dst []byte, epoch int32) []byte {
	dst = appendValueHeader(dst)
	dst = binary.BigEndian.AppendUint32(dst, uint32(epoch))
	return append(dst, 0)
}

func appendConsumerMemberValue(dst []byte, v *ConsumerMemberValue) []byte {
	dst = appendValueHeader(dst)
	dst = appendCompactNullableString(dst, v.InstanceID)
	dst = appendCompactNullableString(dst, v.RackID)
	dst = appendCompactString(dst, v.ClientID)
	dst = appendCompactString(dst, v.ClientHost)
	dst = appendCompactStrings(dst, v.SubscribedTopicNames)
	dst = appendCompactNullableString(dst, v.SubscribedTopicRegex)
	dst = binary.BigEndian.AppendUint32(dst, uint32(v.RebalanceTimeoutMs))
	dst = appendCompactNullableString(dst, v.ServerAssignor)
	return append(dst, 0)
}

func appendShareMemberValue(dst []byte, v *ConsumerMemberValue) []byte {
	dst = appendValueHeader(dst)
	dst = appendCompactNullableString(dst, v.RackID)
	dst = appendCompactString(dst, v.ClientID)
	dst = appendCompactString(dst, v.ClientHost)
	dst = appendCompactStrings(dst, v.SubscribedTopicNames)
	return append(dst, 0)
}

func appendPartitionMetadataValue(dst []byte, ts []PartitionMetadataTopic) []byte {
	dst = appendValueHeader(dst)
	dst = appendCompactArrayLen(dst, len(ts))
	for _, t := range ts {
		dst = append(dst, t.TopicID[:]...)
		dst = appendCompactString(dst, t.TopicName)
		dst = binary.BigEndian.AppendUint32(dst, uint32(t.NumPartitions))
		dst = appendCompactArrayLen(dst, 0) // partition racks: unused since Kafka 4.0
		dst = append(dst, 0)
	}
	return append(dst, 0)
}

func appendTargetMemberValue(dst []byte, tps []TopicPartitions) []byte {
	dst = appendValueHeader(dst)
	dst = appendTopicPartitions(dst, tps)
	return append(dst, 0)
}

func appendCurrentAssignmentValue(dst []byte, v *CurrentAssignmentValue, share bool) []byte {
	dst = appendValueHeader(dst)
	dst = binary.BigEndian.AppendUint32(dst, uint32(v.MemberEpoch))
	dst = binary.BigEndian.AppendUint32(dst, uint32(v.PreviousMemberEpoch))
	dst = append(dst, byte(v.State))
	dst = appendTopicPartitions(dst, v.Assigned)
	if !share {
		dst = appendTopicPartitions(dst, v.Pending)
	}
	return append(dst, 0)
}

func appendRegexValue(dst []byte, v *RegexValue) []byte {
	dst = appendValueHeader(dst)
	dst = appendCompactStrings(dst, v.Topics)
	dst = binary.BigEndian.AppendUint64(dst, uint64(v.Version))
	dst = binary.BigEndian.AppendUint64(dst, uint64(v.Timestamp))
	return append(dst, 0)
}

// --- decoders ---

// valueReader checks the version of a version-0 flexible value and returns the reader.
func valueReader(b []byte, what string) (*reader, error) {
	r := &reader{b: b}
	v := r.int16()
	if r.err != nil {
		return nil, r.err
	}
	if v != 0 {
		return nil, fmt.Errorf("%w: %s value version %d", ErrUnknownVersion, what, v)
	}
	return r, nil
}

// compactArrayLen reads a compact array length and bounds it by the bytes left, each
// element taking at least min bytes. Null (-1) reads as 0.
func (r *reader) compactArrayLen(min int) int {
	n := r.compactLen()
	if r.err != nil || n <= 0 {
		return 0
	}
	if n > len(r.b)/min || n > maxRecordArrayElementsPerBuffer {
		r.fail("array length")
		return 0
	}
	return n
}

func (r *reader) compactStrings() []string {
	n := r.compactArrayLen(1)
	out := make([]string, 0, n)
	for i := 0; i < n && r.err == nil; i++ {
		out = append(out, r.compactString())
	}
	return out
}

func (r *reader) uuid() (id [16]byte) {
	copy(id[:], r.take(16, "uuid"))
	return id
}

func (r *reader) int8() int8 {
	b := r.take(1, "int8")
	if b == nil {
		return 0
	}
	return int8(b[0])
}

func (r *reader) topicPartitions() []TopicPartitions {
	n := r.compactArrayLen(minTopicPartitionsBytes)
	out := make([]TopicPartitions, 0, n)
	for i := 0; i < n && r.err == nil; i++ {
		var tp TopicPartitions
		tp.TopicID = r.uuid()
		m := r.compactArrayLen(4)
		tp.Partitions = make([]int32, 0, m)
		for j := 0; j < m && r.err == nil; j++ {
			tp.Partitions = append(tp.Partitions, r.int32())
		}
		r.skipTags()
		out = append(out, tp)
	}
	return out
}

// DecodeEpochValue decodes a value holding one int32: ConsumerGroupMetadataValue,
// ShareGroupMetadataValue and the target assignment metadata values.
func DecodeEpochValue(b []byte) (int32, error) {
	r, err := valueReader(b, "epoch")
	if err != nil {
		return 0, err
	}
	e := r.int32()
	r.skipTags()
	return e, r.done()
}

// DecodeConsumerMemberValue decodes a ConsumerGroupMemberMetadataValue.
func DecodeConsumerMemberValue(b []byte) (ConsumerMemberValue, error) {
	var v ConsumerMemberValue
	r, err := valueReader(b, "consumer member metadata")
	if err != nil {
		return v, err
	}
	v.InstanceID = r.compactNullableString()
	v.RackID = r.compactNullableString()
	v.ClientID = r.compactString()
	v.ClientHost = r.compactString()
	v.SubscribedTopicNames = r.compactStrings()
	v.SubscribedTopicRegex = r.compactNullableString()
	v.RebalanceTimeoutMs = r.int32()
	v.ServerAssignor = r.compactNullableString()
	r.skipTags()
	return v, r.done()
}

// DecodeShareMemberValue decodes a ShareGroupMemberMetadataValue.
func DecodeShareMemberValue(b []byte) (ConsumerMemberValue, error) {
	var v ConsumerMemberValue
	r, err := valueReader(b, "share member metadata")
	if err != nil {
		return v, err
	}
	v.RackID = r.compactNullableString()
	v.ClientID = r.compactString()
	v.ClientHost = r.compactString()
	v.SubscribedTopicNames = r.compactStrings()
	r.skipTags()
	return v, r.done()
}

// DecodePartitionMetadataValue decodes a Consumer/ShareGroupPartitionMetadataValue.
func DecodePartitionMetadataValue(b []byte) ([]PartitionMetadataTopic, error) {
	r, err := valueReader(b, "partition metadata")
	if err != nil {
		return nil, err
	}
	n := r.compactArrayLen(minPartitionMetadataTopicBytes)
	out := make([]PartitionMetadataTopic, 0, n)
	for i := 0; i < n && r.err == nil; i++ {
		var t PartitionMetadataTopic
		t.TopicID = r.uuid()
		t.TopicName = r.compactString()
		t.NumPartitions = r.int32()
		m := r.compactArrayLen(4 + 1 + 1)
		for j := 0; j < m && r.err == nil; j++ {
			r.int32()
			r.compactStrings()
			r.skipTags()
		}
		r.skipTags()
		out = append(out, t)
	}
	r.skipTags()
	return out, r.done()
}

// DecodeTargetMemberValue decodes a Consumer/ShareGroupTargetAssignmentMemberValue.
func DecodeTargetMemberValue(b []byte) ([]TopicPartitions, error) {
	r, err := valueReader(b, "target assignment member")
	if err != nil {
		return nil, err
	}
	tps := r.topicPartitions()
	r.skipTags()
	return tps, r.done()
}

// DecodeCurrentAssignmentValue decodes a ConsumerGroupCurrentMemberAssignmentValue, or
// with share set a ShareGroupCurrentMemberAssignmentValue.
func DecodeCurrentAssignmentValue(b []byte, share bool) (CurrentAssignmentValue, error) {
	var v CurrentAssignmentValue
	r, err := valueReader(b, "current member assignment")
	if err != nil {
		return v, err
	}
	v.MemberEpoch = r.int32()
	v.PreviousMemberEpoch = r.int32()
	v.State = r.int8()
	v.Assigned = r.topicPartitions()
	if !share {
		v.Pending = r.topicPartitions()
	}
	r.skipTags()
	return v, r.done()
}

// DecodeRegexValue decodes a ConsumerGroupRegularExpressionValue.
func DecodeRegexValue(b []byte) (RegexValue, error) {
	var v RegexValue
	r, err := valueReader(b, "regular expression")
	if err != nil {
		return v, err
	}
	v.Topics = r.compactStrings()
	v.Version = r.int64()
	v.Timestamp = r.int64()
	r.skipTags()
	return v, r.done()
}

// assignmentRecordForm turns an assignment into its record form, topics in id order.
func assignmentRecordForm(a assignment) []TopicPartitions {
	out := make([]TopicPartitions, 0, len(a))
	for id, ps := range a {
		out = append(out, TopicPartitions{TopicID: id, Partitions: slices.Clone(ps)})
	}
	slices.SortFunc(out, func(x, y TopicPartitions) int { return compareUUID(x.TopicID, y.TopicID) })
	return out
}

// assignmentFromRecord is the inverse of assignmentRecordForm (partitions sorted,
// duplicates dropped).
func assignmentFromRecord(tps []TopicPartitions) assignment {
	a := assignment{}
	for _, tp := range tps {
		for _, p := range tp.Partitions {
			a.add(tp.TopicID, p)
		}
	}
	return a
}
