package share

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// The records of __share_group_state. One record per share partition, keyed by
// (group, topic id, partition); the last one is the share partition's state (the
// topic is compacted), a tombstone (nil value) deletes it.
//
//	key (Kafka's ShareSnapshotKey layout, version 0):
//	+----------------------+
//	| version      int16   |  0
//	| group        string  |  int16 length + UTF-8
//	| topicID      [16]byte|
//	| partition    int32   |
//	+----------------------+
//
//	value (version 0):
//	+----------------------+
//	| version      int16   |  0
//	| stateEpoch   int32   |
//	| leaderEpoch  int32   |  of the data partition's leader that wrote it
//	| startOffset  int64   |  the share-partition start offset
//	| writeTime    int64   |  ms since the epoch
//	| batches      int32   |  count, then per batch:
//	|   firstOffset int64  |
//	|   lastOffset  int64  |
//	|   state       int8   |  Available 0, Acknowledged 2, Archived 4
//	|   count       int16  |  delivery count
//	+----------------------+
//
// Kafka writes a ShareSnapshot now and then and ShareUpdate deltas between; Samsa
// writes the whole state every time (it is bounded by the in-flight window), so a
// record is always a snapshot.

// StateTopic is the internal topic holding share-partition state (Kafka's name).
const StateTopic = "__share_group_state"

// ErrCorrupt wraps a record of __share_group_state that does not decode.
var ErrCorrupt = errors.New("share: corrupt state record")

// Key names a share partition: a share group's view of one topic partition.
type Key struct {
	Group     string
	TopicID   [16]byte
	Partition int32
}

func (k Key) String() string {
	return fmt.Sprintf("%s:%x:%d", k.Group, k.TopicID, k.Partition)
}

// Snapshot is what __share_group_state keeps of a share partition.
type Snapshot struct {
	StateEpoch  int32
	LeaderEpoch int32
	StartOffset int64
	WriteTime   int64
	Batches     []Batch
}

// maxBatches bounds a decoded value's batch count (a length field is never trusted).
const maxBatches = 1 << 16

// AppendKey appends k's record key to dst.
func AppendKey(dst []byte, k Key) []byte {
	dst = binary.BigEndian.AppendUint16(dst, 0)
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(k.Group)))
	dst = append(dst, k.Group...)
	dst = append(dst, k.TopicID[:]...)
	return binary.BigEndian.AppendUint32(dst, uint32(k.Partition))
}

// DecodeKey decodes a record key.
func DecodeKey(b []byte) (Key, error) {
	var k Key
	if len(b) < 4 || binary.BigEndian.Uint16(b) != 0 {
		return k, fmt.Errorf("%w: key version", ErrCorrupt)
	}
	n := int(binary.BigEndian.Uint16(b[2:]))
	b = b[4:]
	if len(b) != n+20 {
		return k, fmt.Errorf("%w: key length", ErrCorrupt)
	}
	k.Group = string(b[:n])
	copy(k.TopicID[:], b[n:n+16])
	k.Partition = int32(binary.BigEndian.Uint32(b[n+16:]))
	return k, nil
}

// AppendValue appends s's record value to dst.
func AppendValue(dst []byte, s *Snapshot) []byte {
	dst = binary.BigEndian.AppendUint16(dst, 0)
	dst = binary.BigEndian.AppendUint32(dst, uint32(s.StateEpoch))
	dst = binary.BigEndian.AppendUint32(dst, uint32(s.LeaderEpoch))
	dst = binary.BigEndian.AppendUint64(dst, uint64(s.StartOffset))
	dst = binary.BigEndian.AppendUint64(dst, uint64(s.WriteTime))
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(s.Batches)))
	for _, b := range s.Batches {
		dst = binary.BigEndian.AppendUint64(dst, uint64(b.First))
		dst = binary.BigEndian.AppendUint64(dst, uint64(b.Last))
		dst = append(dst, byte(b.State))
		dst = binary.BigEndian.AppendUint16(dst, uint16(b.Count))
	}
	return dst
}

const batchLen = 8 + 8 + 1 + 2

// DecodeValue decodes a record value.
func DecodeValue(b []byte) (Snapshot, error) {
	var s Snapshot
	if len(b) < 2+4+4+8+8+4 || binary.BigEndian.Uint16(b) != 0 {
		return s, fmt.Errorf("%w: value header", ErrCorrupt)
	}
	s.StateEpoch = int32(binary.BigEndian.Uint32(b[2:]))
	s.LeaderEpoch = int32(binary.BigEndian.Uint32(b[6:]))
	s.StartOffset = int64(binary.BigEndian.Uint64(b[10:]))
	s.WriteTime = int64(binary.BigEndian.Uint64(b[18:]))
	if s.StartOffset < -1 { // -1: the state was deleted
		return s, fmt.Errorf("%w: start offset %d", ErrCorrupt, s.StartOffset)
	}
	n := binary.BigEndian.Uint32(b[26:])
	b = b[30:]
	if n > maxBatches || uint64(len(b)) != uint64(n)*batchLen {
		return s, fmt.Errorf("%w: %d batches in %d bytes", ErrCorrupt, n, len(b))
	}
	s.Batches = make([]Batch, n)
	for i := range s.Batches {
		s.Batches[i] = Batch{
			First: int64(binary.BigEndian.Uint64(b)),
			Last:  int64(binary.BigEndian.Uint64(b[8:])),
			State: State(b[16]),
			Count: int16(binary.BigEndian.Uint16(b[17:])),
		}
		b = b[batchLen:]
	}
	return s, nil
}

// PartitionFor maps k to a partition of __share_group_state with n partitions, as
// Kafka's share coordinator does: the absolute value of the Java hash code of
// "group:topicId:partition" (topic id in Kafka's base64 form) modulo n.
func PartitionFor(k Key, n int32) int32 {
	if n <= 0 {
		return 0
	}
	s := k.Group + ":" + base64UUID(k.TopicID) + ":" + fmt.Sprint(k.Partition)
	var h int32
	for _, r := range utf16Units(s) {
		h = 31*h + int32(r)
	}
	if h == -2147483648 {
		h = 0 // Kafka's Utils.abs
	}
	if h < 0 {
		h = -h
	}
	return h % n
}

func utf16Units(s string) []uint16 {
	out := make([]uint16, 0, len(s))
	for _, r := range s {
		if r >= 0x10000 {
			r -= 0x10000
			out = append(out, uint16(0xD800+(r>>10)), uint16(0xDC00+(r&0x3FF)))
			continue
		}
		out = append(out, uint16(r))
	}
	return out
}

// base64UUID is Kafka's Uuid.toString: URL-safe base64 without padding.
func base64UUID(id [16]byte) string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	var out []byte
	var buf [18]byte
	copy(buf[:], id[:])
	for i := 0; i < 16; i += 3 {
		v := uint32(buf[i])<<16 | uint32(buf[i+1])<<8 | uint32(buf[i+2])
		out = append(out, alphabet[v>>18&63], alphabet[v>>12&63])
		if i+1 < 16 {
			out = append(out, alphabet[v>>6&63])
		}
		if i+2 < 16 {
			out = append(out, alphabet[v&63])
		}
	}
	return string(out)
}
