package group

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Errors returned by the record decoders. Corruption is its own class: a caller
// checks errors.Is(err, ErrCorrupt) and skips or reports the record.
var (
	// ErrCorrupt means a key, value or batch is malformed (short, bad length, bad CRC).
	ErrCorrupt = errors.New("group: corrupt record")
	// ErrUnknownVersion means a key or value carries a schema version this package
	// does not read (for example the record types a Kafka release after 4.2 added).
	ErrUnknownVersion = errors.New("group: unknown record schema version")
)

// KeyKind tells what a __consumer_offsets key addresses.
type KeyKind int8

const (
	// KeyOffset is an OffsetCommitKey (key versions 0 and 1).
	KeyOffset KeyKind = iota + 1
	// KeyGroup is a GroupMetadataKey (key version 2).
	KeyGroup
)

// Key is a decoded __consumer_offsets key. Topic and Partition are set for KeyOffset,
// Member for the member records of consumer, share and streams groups, Regex for
// KeyConsumerRegex.
type Key struct {
	Kind      KeyKind
	Version   int16
	Group     string
	Topic     string
	Partition int32
	Member    string
	Regex     string
}

// OffsetValue is an OffsetCommitValue. LeaderEpoch is -1 when unknown (and in
// versions before 3); ExpireTimestamp is -1 unless Version is 1 and the commit
// carried an explicit retention.
type OffsetValue struct {
	Version         int16
	Offset          int64
	LeaderEpoch     int32
	Metadata        string
	CommitTimestamp int64
	ExpireTimestamp int64
}

// GroupValue is a GroupMetadataValue: a group's membership at the end of a rebalance
// (or the empty group when its last member left).
type GroupValue struct {
	Version               int16
	ProtocolType          string
	Generation            int32
	Protocol              *string
	Leader                *string
	CurrentStateTimestamp int64 // -1 before version 2
	Members               []MemberValue
}

// MemberValue is one member inside a GroupValue.
type MemberValue struct {
	MemberID         string
	InstanceID       *string // v3+
	ClientID         string
	ClientHost       string
	RebalanceTimeout int32 // v1+; v0 uses the session timeout
	SessionTimeout   int32
	Subscription     []byte
	Assignment       []byte
}

// AppendOffsetKey appends an OffsetCommitKey (version 1) for (group, topic, partition).
func AppendOffsetKey(dst []byte, group, topic string, partition int32) []byte {
	dst = binary.BigEndian.AppendUint16(dst, 1)
	dst = appendString(dst, group)
	dst = appendString(dst, topic)
	return binary.BigEndian.AppendUint32(dst, uint32(partition))
}

// AppendGroupKey appends a GroupMetadataKey (version 2) for group.
func AppendGroupKey(dst []byte, group string) []byte {
	dst = binary.BigEndian.AppendUint16(dst, 2)
	return appendString(dst, group)
}

// DecodeKey decodes a __consumer_offsets key. Keys of versions (record types) above 23
// return ErrUnknownVersion with the version set in the returned Key.
func DecodeKey(b []byte) (Key, error) {
	r := reader{b: b}
	var k Key
	k.Version = r.int16()
	if r.err != nil {
		return k, r.err
	}
	switch k.Version {
	case 0, 1:
		k.Kind = KeyOffset
		k.Group = r.string()
		k.Topic = r.string()
		k.Partition = r.int32()
	case 2:
		k.Kind = KeyGroup
		k.Group = r.string()
	case recConsumerGroupMetadata, recConsumerPartitionMetadata, recConsumerMemberMetadata,
		recConsumerTargetMetadata, recConsumerTargetMember, recConsumerCurrentAssignment,
		recSharePartitionMetadata, recShareMemberMetadata, recShareGroupMetadata,
		recShareTargetMetadata, recShareTargetMember, recShareCurrentAssignment,
		recShareStatePartitionMetadata, recConsumerRegularExpression:
		decodeTypedKey(&r, &k)
	case recStreamsGroupMetadata, recStreamsPartitionMetadata, recStreamsMemberMetadata,
		recStreamsTargetMetadata, recStreamsTargetMember, recStreamsCurrentAssignment,
		recStreamsTopology:
		decodeTypedKey(&r, &k)
	default:
		return k, fmt.Errorf("%w: key version %d", ErrUnknownVersion, k.Version)
	}
	return k, r.done()
}

// AppendOffsetValue appends v in the schema version v.Version (0..4).
func AppendOffsetValue(dst []byte, v OffsetValue) []byte {
	dst = binary.BigEndian.AppendUint16(dst, uint16(v.Version))
	dst = binary.BigEndian.AppendUint64(dst, uint64(v.Offset))
	flexible := v.Version >= 4
	if v.Version >= 3 {
		dst = binary.BigEndian.AppendUint32(dst, uint32(v.LeaderEpoch))
	}
	if flexible {
		dst = appendCompactString(dst, v.Metadata)
	} else {
		dst = appendString(dst, v.Metadata)
	}
	dst = binary.BigEndian.AppendUint64(dst, uint64(v.CommitTimestamp))
	if v.Version == 1 {
		dst = binary.BigEndian.AppendUint64(dst, uint64(v.ExpireTimestamp))
	}
	if flexible {
		dst = append(dst, 0) // no tagged fields
	}
	return dst
}

// DecodeOffsetValue decodes an OffsetCommitValue of any version 0..4.
func DecodeOffsetValue(b []byte) (OffsetValue, error) {
	r := reader{b: b}
	v := OffsetValue{LeaderEpoch: -1, ExpireTimestamp: -1}
	v.Version = r.int16()
	if r.err != nil {
		return v, r.err
	}
	if v.Version < 0 || v.Version > 4 {
		return v, fmt.Errorf("%w: offset value version %d", ErrUnknownVersion, v.Version)
	}
	flexible := v.Version >= 4
	v.Offset = r.int64()
	if v.Version >= 3 {
		v.LeaderEpoch = r.int32()
	}
	if flexible {
		v.Metadata = r.compactString()
	} else {
		v.Metadata = r.string()
	}
	v.CommitTimestamp = r.int64()
	if v.Version == 1 {
		v.ExpireTimestamp = r.int64()
	}
	if flexible {
		r.skipTags()
	}
	return v, r.done()
}

// AppendGroupValue appends v in the schema version v.Version (0..4).
func AppendGroupValue(dst []byte, v GroupValue) []byte {
	flexible := v.Version >= 4
	str := appendString
	nstr := appendNullableString
	byts := appendBytes
	if flexible {
		str, nstr, byts = appendCompactString, appendCompactNullableString, appendCompactBytes
	}
	dst = binary.BigEndian.AppendUint16(dst, uint16(v.Version))
	dst = str(dst, v.ProtocolType)
	dst = binary.BigEndian.AppendUint32(dst, uint32(v.Generation))
	dst = nstr(dst, v.Protocol)
	dst = nstr(dst, v.Leader)
	if v.Version >= 2 {
		dst = binary.BigEndian.AppendUint64(dst, uint64(v.CurrentStateTimestamp))
	}
	if flexible {
		dst = binary.AppendUvarint(dst, uint64(len(v.Members))+1)
	} else {
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(v.Members)))
	}
	for i := range v.Members {
		m := &v.Members[i]
		dst = str(dst, m.MemberID)
		if v.Version >= 3 {
			dst = nstr(dst, m.InstanceID)
		}
		dst = str(dst, m.ClientID)
		dst = str(dst, m.ClientHost)
		if v.Version >= 1 {
			dst = binary.BigEndian.AppendUint32(dst, uint32(m.RebalanceTimeout))
		}
		dst = binary.BigEndian.AppendUint32(dst, uint32(m.SessionTimeout))
		dst = byts(dst, m.Subscription)
		dst = byts(dst, m.Assignment)
		if flexible {
			dst = append(dst, 0)
		}
	}
	if flexible {
		dst = append(dst, 0)
	}
	return dst
}

// minMemberBytes is the smallest encoding of one member (v0, classic): three empty
// strings, a session timeout and two empty byte arrays. It bounds the member count a
// decoder believes before allocating.
const minMemberBytes = 2 + 2 + 2 + 4 + 4 + 4

// DecodeGroupValue decodes a GroupMetadataValue of any version 0..4.
func DecodeGroupValue(b []byte) (GroupValue, error) {
	r := reader{b: b}
	v := GroupValue{CurrentStateTimestamp: -1}
	v.Version = r.int16()
	if r.err != nil {
		return v, r.err
	}
	if v.Version < 0 || v.Version > 4 {
		return v, fmt.Errorf("%w: group value version %d", ErrUnknownVersion, v.Version)
	}
	flexible := v.Version >= 4
	str, nstr, byts := r.string, r.nullableString, r.bytes
	if flexible {
		str, nstr, byts = r.compactString, r.compactNullableString, r.compactBytes
	}
	v.ProtocolType = str()
	v.Generation = r.int32()
	v.Protocol = nstr()
	v.Leader = nstr()
	if v.Version >= 2 {
		v.CurrentStateTimestamp = r.int64()
	}
	var n int
	if flexible {
		n = r.compactLen()
	} else {
		n = int(r.int32())
	}
	if r.err != nil {
		return v, r.err
	}
	if n < 0 || n > len(r.b)/4 { // every member takes at least 4 bytes in any version
		return v, fmt.Errorf("%w: group value: %d members in %d bytes", ErrCorrupt, n, len(r.b))
	}
	if n > 0 {
		v.Members = make([]MemberValue, 0, min(n, len(r.b)/minMemberBytes+1))
	}
	for i := 0; i < n && r.err == nil; i++ {
		var m MemberValue
		m.MemberID = str()
		if v.Version >= 3 {
			m.InstanceID = nstr()
		}
		m.ClientID = str()
		m.ClientHost = str()
		if v.Version >= 1 {
			m.RebalanceTimeout = r.int32()
		}
		m.SessionTimeout = r.int32()
		if v.Version == 0 {
			m.RebalanceTimeout = m.SessionTimeout
		}
		m.Subscription = byts()
		m.Assignment = byts()
		if flexible {
			r.skipTags()
		}
		v.Members = append(v.Members, m)
	}
	if flexible {
		r.skipTags()
	}
	return v, r.done()
}

// --- primitive encoders ---

func appendString(dst []byte, s string) []byte {
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(s)))
	return append(dst, s...)
}

func appendNullableString(dst []byte, s *string) []byte {
	if s == nil {
		return binary.BigEndian.AppendUint16(dst, 0xffff)
	}
	return appendString(dst, *s)
}

func appendBytes(dst, b []byte) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(b)))
	return append(dst, b...)
}

func appendCompactString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s))+1)
	return append(dst, s...)
}

func appendCompactNullableString(dst []byte, s *string) []byte {
	if s == nil {
		return append(dst, 0)
	}
	return appendCompactString(dst, *s)
}

func appendCompactBytes(dst, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b))+1)
	return append(dst, b...)
}

// reader decodes big-endian Kafka primitives from b. The first error sticks; every
// length is checked against the bytes left before anything is sliced or allocated.
type reader struct {
	b   []byte
	err error
}

func (r *reader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: short or invalid %s", ErrCorrupt, what)
	}
	r.b = nil
}

func (r *reader) take(n int, what string) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > len(r.b) {
		r.fail(what)
		return nil
	}
	out := r.b[:n:n]
	r.b = r.b[n:]
	return out
}

func (r *reader) int16() int16 {
	b := r.take(2, "int16")
	if b == nil {
		return 0
	}
	return int16(binary.BigEndian.Uint16(b))
}

func (r *reader) int32() int32 {
	b := r.take(4, "int32")
	if b == nil {
		return 0
	}
	return int32(binary.BigEndian.Uint32(b))
}

func (r *reader) int64() int64 {
	b := r.take(8, "int64")
	if b == nil {
		return 0
	}
	return int64(binary.BigEndian.Uint64(b))
}

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail("uvarint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) string() string {
	n := r.int16()
	if n < 0 {
		r.fail("string length")
		return ""
	}
	return string(r.take(int(n), "string"))
}

func (r *reader) nullableString() *string {
	n := r.int16()
	if r.err != nil || n == -1 {
		return nil
	}
	if n < 0 {
		r.fail("string length")
		return nil
	}
	s := string(r.take(int(n), "string"))
	return &s
}

func (r *reader) bytes() []byte {
	n := r.int32()
	if r.err != nil || n == -1 {
		return nil
	}
	b := r.take(int(n), "bytes")
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}

// compactLen reads a compact length (uvarint n+1); -1 means null.
func (r *reader) compactLen() int {
	u := r.uvarint()
	if r.err != nil {
		return 0
	}
	if u > uint64(len(r.b))+1 {
		r.fail("compact length")
		return 0
	}
	return int(u) - 1
}

func (r *reader) compactString() string {
	n := r.compactLen()
	if n < 0 {
		r.fail("compact string")
		return ""
	}
	return string(r.take(n, "compact string"))
}

func (r *reader) compactNullableString() *string {
	n := r.compactLen()
	if r.err != nil || n < 0 {
		return nil
	}
	s := string(r.take(n, "compact string"))
	return &s
}

func (r *reader) compactBytes() []byte {
	n := r.compactLen()
	if r.err != nil || n < 0 {
		return nil
	}
	b := r.take(n, "compact bytes")
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}

func (r *reader) skipTags() {
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		r.fail("tagged fields")
		return
	}
	for i := uint64(0); i < n && r.err == nil; i++ {
		r.uvarint() // tag
		size := r.uvarint()
		if size > uint64(len(r.b)) {
			r.fail("tagged field")
			return
		}
		r.take(int(size), "tagged field")
	}
}

// done reports the sticky error. Trailing bytes are tolerated, as Kafka does, so a
// newer writer may append fields.
func (r *reader) done() error { return r.err }

// PartitionFor returns the __consumer_offsets partition of group among n partitions,
// exactly as Apache Kafka computes it: Utils.abs(groupId.hashCode()) % n, where
// hashCode is java.lang.String.hashCode over the UTF-16 code units of the name.
func PartitionFor(group string, n int32) int32 {
	if n <= 0 {
		return 0
	}
	h := JavaStringHash(group)
	if h == -1<<31 { // Utils.abs maps Integer.MIN_VALUE to 0
		h = 0
	} else if h < 0 {
		h = -h
	}
	return h % n
}

// JavaStringHash is java.lang.String.hashCode: s[0]*31^(n-1) + ... + s[n-1] over
// UTF-16 code units, in int32 arithmetic that wraps.
func JavaStringHash(s string) int32 {
	var h int32
	for _, r := range s {
		if r >= 0x10000 { // encoded as a surrogate pair in UTF-16
			r -= 0x10000
			h = 31*h + int32(0xd800+(r>>10))
			h = 31*h + int32(0xdc00+(r&0x3ff))
			continue
		}
		h = 31*h + int32(r)
	}
	return h
}
