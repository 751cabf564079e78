package txn

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sort"
)

// Errors of the record decoders.
var (
	// ErrCorrupt is a key or value that does not parse.
	ErrCorrupt = errors.New("txn: corrupt record")
	// ErrUnknownVersion is a key or value of a schema version this package
	// does not read.
	ErrUnknownVersion = errors.New("txn: unknown record schema version")
)

// StateTopic is the internal topic of transaction states.
const StateTopic = "__transaction_state"

// TopicPartition is a data partition of a transaction.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// Value is a TransactionLogValue: a transactional id's state after a
// transition. Partitions are sorted by topic, then partition.
type Value struct {
	Version          int16
	ProducerID       int64
	PrevProducerID   int64 // v1 tag 0 (-1 default)
	NextProducerID   int64 // v1 tag 1 (-1 default)
	ProducerEpoch    int16
	TimeoutMs        int32
	State            State
	Partitions       []TopicPartition // nil in Empty (written as a null array)
	LastUpdateMs     int64
	StartMs          int64
	ClientTxnVersion int16 // v1 tag 2 (0 default)
}

// AppendKey appends the TransactionLogKey of id: the coordinator record
// type 0 (TransactionLog), then the key in version 0.
func AppendKey(dst []byte, id string) []byte {
	dst = binary.BigEndian.AppendUint16(dst, 0)
	return appendString(dst, id)
}

// DecodeKey returns the transactional id of a key. A key of another record
// type wraps ErrUnknownVersion.
func DecodeKey(b []byte) (string, error) {
	if len(b) < 2 {
		return "", fmt.Errorf("%w: key of %d bytes", ErrCorrupt, len(b))
	}
	if v := int16(binary.BigEndian.Uint16(b)); v != 0 {
		return "", fmt.Errorf("%w: key version %d", ErrUnknownVersion, v)
	}
	id, rest, ok := readString(b[2:])
	if !ok || len(rest) != 0 {
		return "", fmt.Errorf("%w: key", ErrCorrupt)
	}
	return id, nil
}

// AppendValue appends v in v.Version (0, or 1: flexible, with the tagged
// fields that differ from their defaults).
func AppendValue(dst []byte, v *Value) []byte {
	flex := v.Version >= 1
	dst = binary.BigEndian.AppendUint16(dst, uint16(v.Version))
	dst = binary.BigEndian.AppendUint64(dst, uint64(v.ProducerID))
	dst = binary.BigEndian.AppendUint16(dst, uint16(v.ProducerEpoch))
	dst = binary.BigEndian.AppendUint32(dst, uint32(v.TimeoutMs))
	dst = append(dst, byte(v.State))
	topics := groupByTopic(v.Partitions)
	switch {
	case v.Partitions == nil && flex:
		dst = binary.AppendUvarint(dst, 0)
	case v.Partitions == nil:
		dst = binary.BigEndian.AppendUint32(dst, 0xffffffff)
	case flex:
		dst = binary.AppendUvarint(dst, uint64(len(topics))+1)
	default:
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(topics)))
	}
	for _, t := range topics {
		if flex {
			dst = binary.AppendUvarint(dst, uint64(len(t.topic))+1)
			dst = append(dst, t.topic...)
			dst = binary.AppendUvarint(dst, uint64(len(t.parts))+1)
		} else {
			dst = appendString(dst, t.topic)
			dst = binary.BigEndian.AppendUint32(dst, uint32(len(t.parts)))
		}
		for _, p := range t.parts {
			dst = binary.BigEndian.AppendUint32(dst, uint32(p))
		}
		if flex {
			dst = binary.AppendUvarint(dst, 0) // the topic's tagged fields
		}
	}
	dst = binary.BigEndian.AppendUint64(dst, uint64(v.LastUpdateMs))
	dst = binary.BigEndian.AppendUint64(dst, uint64(v.StartMs))
	if flex {
		n := 0
		if v.PrevProducerID != -1 {
			n++
		}
		if v.NextProducerID != -1 {
			n++
		}
		if v.ClientTxnVersion != 0 {
			n++
		}
		dst = binary.AppendUvarint(dst, uint64(n))
		if v.PrevProducerID != -1 {
			dst = append(dst, 0, 8)
			dst = binary.BigEndian.AppendUint64(dst, uint64(v.PrevProducerID))
		}
		if v.NextProducerID != -1 {
			dst = append(dst, 1, 8)
			dst = binary.BigEndian.AppendUint64(dst, uint64(v.NextProducerID))
		}
		if v.ClientTxnVersion != 0 {
			dst = append(dst, 2, 2)
			dst = binary.BigEndian.AppendUint16(dst, uint16(v.ClientTxnVersion))
		}
	}
	return dst
}

// DecodeValue parses a TransactionLogValue of version 0 or 1 (tagged
// fields it does not know are skipped; partitions listed in the Empty
// state are ignored, as Kafka does; a partition listed twice counts
// once). A state id outside 0..7 or bytes that do not parse wrap
// ErrCorrupt; another version wraps ErrUnknownVersion.
func DecodeValue(b []byte) (Value, error) {
	v := Value{PrevProducerID: -1, NextProducerID: -1}
	if len(b) < 2 {
		return v, fmt.Errorf("%w: value of %d bytes", ErrCorrupt, len(b))
	}
	v.Version = int16(binary.BigEndian.Uint16(b))
	if v.Version < 0 || v.Version > 1 {
		return v, fmt.Errorf("%w: value version %d", ErrUnknownVersion, v.Version)
	}
	flex := v.Version == 1
	r := reader{b: b[2:]}
	v.ProducerID = r.int64()
	v.ProducerEpoch = r.int16()
	v.TimeoutMs = r.int32()
	st := r.int8()
	var n int64
	if flex {
		n = int64(r.uvarint()) - 1
	} else {
		n = int64(r.int32())
	}
	if n > int64(len(r.b)) || n < -1 {
		return v, fmt.Errorf("%w: %d topics", ErrCorrupt, n)
	}
	if n >= 0 {
		v.Partitions = []TopicPartition{}
	}
	for i := int64(0); i < n && r.err == nil; i++ {
		var topic string
		var np int64
		if flex {
			topic = r.compactString()
			np = int64(r.uvarint()) - 1
		} else {
			topic = r.string()
			np = int64(r.int32())
		}
		if np < 0 || np > int64(len(r.b))/4 {
			return v, fmt.Errorf("%w: %d partitions", ErrCorrupt, np)
		}
		for j := int64(0); j < np && r.err == nil; j++ {
			v.Partitions = append(v.Partitions, TopicPartition{Topic: topic, Partition: r.int32()})
		}
		if flex {
			r.skipTags(nil)
		}
	}
	v.LastUpdateMs = r.int64()
	v.StartMs = r.int64()
	if flex {
		r.skipTags(func(tag uint64, data []byte) {
			switch {
			case tag == 0 && len(data) == 8:
				v.PrevProducerID = int64(binary.BigEndian.Uint64(data))
			case tag == 1 && len(data) == 8:
				v.NextProducerID = int64(binary.BigEndian.Uint64(data))
			case tag == 2 && len(data) == 2:
				v.ClientTxnVersion = int16(binary.BigEndian.Uint16(data))
			}
		})
	}
	if r.err != nil {
		return v, fmt.Errorf("%w: value: %w", ErrCorrupt, r.err)
	}
	if len(r.b) != 0 {
		return v, fmt.Errorf("%w: %d bytes after the value", ErrCorrupt, len(r.b))
	}
	if st < 0 || st > int8(PrepareEpochFence) {
		return v, fmt.Errorf("%w: transaction state %d", ErrCorrupt, st)
	}
	v.State = State(st)
	if v.State == Empty {
		v.Partitions = nil
	}
	sortPartitions(v.Partitions)
	// The partitions are a set (Kafka reads them into one): a partition listed twice
	// counts once, as AppendValue writes it.
	v.Partitions = slices.Compact(v.Partitions)
	return v, nil
}

type topicParts struct {
	topic string
	parts []int32
}

func groupByTopic(ps []TopicPartition) []topicParts {
	sorted := append([]TopicPartition(nil), ps...)
	sortPartitions(sorted)
	var out []topicParts
	for _, p := range sorted {
		if len(out) == 0 || out[len(out)-1].topic != p.Topic {
			out = append(out, topicParts{topic: p.Topic})
		}
		t := &out[len(out)-1]
		if n := len(t.parts); n == 0 || t.parts[n-1] != p.Partition {
			t.parts = append(t.parts, p.Partition)
		}
	}
	return out
}

func sortPartitions(ps []TopicPartition) {
	sort.Slice(ps, func(i, j int) bool {
		if ps[i].Topic != ps[j].Topic {
			return ps[i].Topic < ps[j].Topic
		}
		return ps[i].Partition < ps[j].Partition
	})
}

func appendString(dst []byte, s string) []byte {
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(s)))
	return append(dst, s...)
}

func readString(b []byte) (string, []byte, bool) {
	if len(b) < 2 {
		return "", nil, false
	}
	n := int(int16(binary.BigEndian.Uint16(b)))
	if n < 0 || n > len(b)-2 {
		return "", nil, false
	}
	return string(b[2 : 2+n]), b[2+n:], true
}

// reader reads big-endian fields, remembering the first shortfall.
type reader struct {
	b   []byte
	err error
}

var errShort = errors.New("cut short")

func (r *reader) take(n int) []byte {
	if r.err != nil || n < 0 || len(r.b) < n {
		if r.err == nil {
			r.err = errShort
		}
		return make([]byte, max(n, 8))
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}

func (r *reader) int8() int8   { return int8(r.take(1)[0]) }
func (r *reader) int16() int16 { return int16(binary.BigEndian.Uint16(r.take(2))) }
func (r *reader) int32() int32 { return int32(binary.BigEndian.Uint32(r.take(4))) }
func (r *reader) int64() int64 { return int64(binary.BigEndian.Uint64(r.take(8))) }

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = errShort
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) string() string {
	n := r.int16()
	if n < 0 {
		if r.err == nil {
			r.err = errors.New("null string")
		}
		return ""
	}
	return string(r.take(int(n)))
}

func (r *reader) compactString() string {
	n := r.uvarint()
	if n == 0 || n-1 > uint64(len(r.b)) {
		if r.err == nil {
			r.err = errors.New("bad compact string")
		}
		return ""
	}
	return string(r.take(int(n - 1)))
}

// skipTags reads a tagged-field section, giving each field to fn.
func (r *reader) skipTags(fn func(tag uint64, data []byte)) {
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		if r.err == nil {
			r.err = errors.New("bad tag count")
		}
		return
	}
	for i := uint64(0); i < n && r.err == nil; i++ {
		tag := r.uvarint()
		size := r.uvarint()
		if size > uint64(len(r.b)) {
			if r.err == nil {
				r.err = errors.New("bad tag size")
			}
			return
		}
		data := r.take(int(size))
		if fn != nil && r.err == nil {
			fn(tag, data)
		}
	}
}

// PartitionFor returns the __transaction_state partition of id:
// abs(javaStringHash(id)) mod n, as Kafka computes it.
func PartitionFor(id string, n int32) int32 {
	if n <= 0 {
		return 0
	}
	h := javaStringHash(id)
	if h == -1<<31 { // Utils.abs maps Integer.MIN_VALUE to 0
		h = 0
	} else if h < 0 {
		h = -h
	}
	return h % n
}

// javaStringHash is java.lang.String.hashCode over UTF-16 code units.
func javaStringHash(s string) int32 {
	var h int32
	for _, r := range s {
		if r >= 0x10000 {
			r -= 0x10000
			h = 31*h + int32(0xd800+(r>>10))
			h = 31*h + int32(0xdc00+(r&0x3ff))
			continue
		}
		h = 31*h + int32(r)
	}
	return h
}
