package remotelog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/samsa-broker/samsa/engine/remote"
)

// The values of __remote_log_metadata's records, as Kafka's
// RemoteLogMetadataSerde writes them (its key is always null):
//
//	frame version   uvarint  1
//	api key         uvarint  0 RemoteLogSegmentMetadataRecord
//	                         1 RemoteLogSegmentMetadataUpdateRecord
//	                         2 RemotePartitionDeleteMetadataRecord
//	version         uvarint  0 (every record's only version)
//	message         the record in Kafka's flexible encoding (compact strings,
//	                arrays and bytes; tagged fields after each struct)
//
//	RemoteLogSegmentMetadataRecord v0      RemoteLogSegmentMetadataUpdateRecord v0
//	  RemoteLogSegmentId                     RemoteLogSegmentId
//	    TopicIdPartition                     BrokerId          int32
//	      Name       compact string          EventTimestampMs  int64
//	      Id         uuid                    CustomMetadata    compact nullable bytes
//	      Partition  int32                   RemoteLogSegmentState int8
//	    Id           uuid
//	  StartOffset      int64               RemotePartitionDeleteMetadataRecord v0
//	  EndOffset        int64                 TopicIdPartition  (as above)
//	  BrokerId         int32                 BrokerId          int32
//	  MaxTimestampMs   int64                 EventTimestampMs  int64
//	  EventTimestampMs int64                 RemotePartitionDeleteState int8
//	  SegmentLeaderEpochs [LeaderEpoch int32, Offset int64]
//	  SegmentSizeInBytes int32
//	  CustomMetadata   compact nullable bytes
//	  RemoteLogSegmentState int8
//
// Tagged fields are skipped when read (Kafka 4's TxnIndexEmpty among them)
// and none are written.

// The api keys of the records.
const (
	apiSegment         = 0
	apiSegmentUpdate   = 1
	apiPartitionDelete = 2
	frameVersion       = 1
)

// Update is Kafka's RemoteLogSegmentMetadataUpdate.
type Update = remote.SegmentMetadataUpdate

// PartitionDeleteState is Kafka's RemotePartitionDeleteState.
type PartitionDeleteState = remote.PartitionDeleteState

const (
	DeletePartitionMarked   = remote.DeletePartitionMarked   // DELETE_PARTITION_MARKED
	DeletePartitionStarted  = remote.DeletePartitionStarted  // DELETE_PARTITION_STARTED
	DeletePartitionFinished = remote.DeletePartitionFinished // DELETE_PARTITION_FINISHED
)

// PartitionDelete is Kafka's RemotePartitionDeleteMetadata.
type PartitionDelete = remote.PartitionDeleteMetadata

// ErrCorruptRecord: a record value this package cannot read.
var ErrCorruptRecord = errors.New("remotelog: corrupt __remote_log_metadata record")

// EncodeSegment encodes md as a RemoteLogSegmentMetadataRecord.
func EncodeSegment(md *remote.SegmentMetadata) []byte {
	b := header(nil, apiSegment)
	b = appendSegmentID(b, &md.ID)
	b = binary.BigEndian.AppendUint64(b, uint64(md.StartOffset))
	b = binary.BigEndian.AppendUint64(b, uint64(md.EndOffset))
	b = binary.BigEndian.AppendUint32(b, uint32(md.BrokerID))
	b = binary.BigEndian.AppendUint64(b, uint64(md.MaxTimestamp))
	b = binary.BigEndian.AppendUint64(b, uint64(md.EventTimestamp))
	b = binary.AppendUvarint(b, uint64(len(md.LeaderEpochs)+1))
	for _, e := range md.LeaderEpochs {
		b = binary.BigEndian.AppendUint32(b, uint32(e.Epoch))
		b = binary.BigEndian.AppendUint64(b, uint64(e.StartOffset))
		b = append(b, 0)
	}
	b = binary.BigEndian.AppendUint32(b, uint32(min(md.SegmentSize, math.MaxInt32)))
	b = appendNullableBytes(b, md.CustomMetadata)
	b = append(b, byte(md.State))
	return append(b, 0)
}

// EncodeUpdate encodes u as a RemoteLogSegmentMetadataUpdateRecord.
func EncodeUpdate(u *Update) []byte {
	b := header(nil, apiSegmentUpdate)
	b = appendSegmentID(b, &u.ID)
	b = binary.BigEndian.AppendUint32(b, uint32(u.BrokerID))
	b = binary.BigEndian.AppendUint64(b, uint64(u.EventTimestamp))
	b = appendNullableBytes(b, u.CustomMetadata)
	b = append(b, byte(u.State))
	return append(b, 0)
}

// EncodePartitionDelete encodes d as a RemotePartitionDeleteMetadataRecord.
func EncodePartitionDelete(d *PartitionDelete) []byte {
	b := header(nil, apiPartitionDelete)
	b = appendTopicIDPartition(b, &d.Partition)
	b = binary.BigEndian.AppendUint32(b, uint32(d.BrokerID))
	b = binary.BigEndian.AppendUint64(b, uint64(d.EventTimestamp))
	b = append(b, byte(d.State))
	return append(b, 0)
}

func header(b []byte, api uint64) []byte {
	b = binary.AppendUvarint(b, frameVersion)
	b = binary.AppendUvarint(b, api)
	return binary.AppendUvarint(b, 0)
}

func appendTopicIDPartition(b []byte, tp *remote.TopicIDPartition) []byte {
	b = binary.AppendUvarint(b, uint64(len(tp.Topic)+1))
	b = append(b, tp.Topic...)
	b = append(b, tp.TopicID[:]...)
	b = binary.BigEndian.AppendUint32(b, uint32(tp.Partition))
	return append(b, 0)
}

func appendSegmentID(b []byte, id *remote.SegmentID) []byte {
	b = appendTopicIDPartition(b, &id.TopicIDPartition)
	b = append(b, id.ID[:]...)
	return append(b, 0)
}

func appendNullableBytes(b, v []byte) []byte {
	if v == nil {
		return append(b, 0)
	}
	b = binary.AppendUvarint(b, uint64(len(v)+1))
	return append(b, v...)
}

// Decode reads a record value: a *remote.SegmentMetadata, an *Update or a
// *PartitionDelete.
func Decode(v []byte) (any, error) {
	r := reader{b: v}
	frame, api, version := r.uvarint(), r.uvarint(), r.uvarint()
	if r.err == nil && (frame != frameVersion || version != 0) {
		return nil, fmt.Errorf("%w: frame version %d, api key %d version %d", ErrCorruptRecord, frame, api, version)
	}
	var out any
	switch api {
	case apiSegment:
		md := &remote.SegmentMetadata{}
		md.ID = r.segmentID()
		md.StartOffset, md.EndOffset = r.int64(), r.int64()
		md.BrokerID = r.int32()
		md.MaxTimestamp, md.EventTimestamp = r.int64(), r.int64()
		n := r.uvarint()
		if n == 0 || n-1 > uint64(len(r.b)/13) {
			r.fail("leader epochs")
		} else {
			for i := uint64(0); i < n-1 && r.err == nil; i++ {
				md.LeaderEpochs = append(md.LeaderEpochs, remote.EpochEntry{Epoch: r.int32(), StartOffset: r.int64()})
				r.tags()
			}
		}
		md.SegmentSize = int64(r.int32())
		md.CustomMetadata = r.nullableBytes()
		md.State = remote.SegmentState(r.int8())
		r.tags()
		out = md
	case apiSegmentUpdate:
		u := &Update{ID: r.segmentID(), BrokerID: r.int32(), EventTimestamp: r.int64()}
		u.CustomMetadata = r.nullableBytes()
		u.State = remote.SegmentState(r.int8())
		r.tags()
		out = u
	case apiPartitionDelete:
		d := &PartitionDelete{Partition: r.topicIDPartition(), BrokerID: r.int32(), EventTimestamp: r.int64()}
		d.State = PartitionDeleteState(r.int8())
		r.tags()
		out = d
	default:
		return nil, fmt.Errorf("%w: api key %d", ErrCorruptRecord, api)
	}
	if r.err != nil {
		return nil, r.err
	}
	return out, nil
}

// reader reads Kafka's flexible encoding; the first error sticks.
type reader struct {
	b   []byte
	err error
}

func (r *reader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s", ErrCorruptRecord, what)
	}
	r.b = nil
}

func (r *reader) take(n int, what string) []byte {
	if r.err != nil || n < 0 || len(r.b) < n {
		r.fail(what)
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail("varint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) int8() int8 {
	if b := r.take(1, "int8"); b != nil {
		return int8(b[0])
	}
	return 0
}

func (r *reader) int32() int32 {
	if b := r.take(4, "int32"); b != nil {
		return int32(binary.BigEndian.Uint32(b))
	}
	return 0
}

func (r *reader) int64() int64 {
	if b := r.take(8, "int64"); b != nil {
		return int64(binary.BigEndian.Uint64(b))
	}
	return 0
}

func (r *reader) nullableBytes() []byte {
	n := r.uvarint()
	if n == 0 || r.err != nil {
		return nil
	}
	if n-1 > uint64(len(r.b)) {
		r.fail("bytes")
		return nil
	}
	return append([]byte{}, r.take(int(n-1), "bytes")...)
}

// tags skips a tagged-fields section.
func (r *reader) tags() {
	n := r.uvarint()
	for i := uint64(0); i < n && r.err == nil; i++ {
		r.uvarint()
		size := r.uvarint()
		if size > uint64(len(r.b)) {
			r.fail("tagged field")
			return
		}
		r.take(int(size), "tagged field")
	}
}

func (r *reader) topicIDPartition() remote.TopicIDPartition {
	var tp remote.TopicIDPartition
	n := r.uvarint()
	if n == 0 || n-1 > uint64(len(r.b)) {
		r.fail("topic name")
		return tp
	}
	tp.Topic = string(r.take(int(n-1), "topic name"))
	copy(tp.TopicID[:], r.take(16, "topic id"))
	tp.Partition = r.int32()
	r.tags()
	return tp
}

func (r *reader) segmentID() remote.SegmentID {
	id := remote.SegmentID{TopicIDPartition: r.topicIDPartition()}
	copy(id.ID[:], r.take(16, "segment id"))
	r.tags()
	return id
}

// MetadataPartition is the __remote_log_metadata partition that holds tp's
// records among n, as Kafka's RemoteLogMetadataTopicPartitioner computes
// it: murmur2 of the 4 bytes of Objects.hash(topic id's least significant
// bits, its most significant bits, partition), made positive, modulo n.
func MetadataPartition(tp remote.TopicIDPartition, n int32) int32 {
	most := int64(binary.BigEndian.Uint64(tp.TopicID[:8]))
	least := int64(binary.BigEndian.Uint64(tp.TopicID[8:]))
	longHash := func(v int64) int32 { return int32(v ^ int64(uint64(v)>>32)) }
	h := int32(1)
	h = 31*h + longHash(least)
	h = 31*h + longHash(most)
	h = 31*h + tp.Partition
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], uint32(h))
	return int32(murmur2(b[:])&0x7fffffff) % n
}

// murmur2 is Kafka's Utils.murmur2.
func murmur2(data []byte) uint32 {
	const (
		seed = 0x9747b28c
		m    = 0x5bd1e995
		r    = 24
	)
	length := len(data)
	h := uint32(seed) ^ uint32(length)
	for i := 0; i+4 <= length; i += 4 {
		k := binary.LittleEndian.Uint32(data[i:])
		k *= m
		k ^= k >> r
		k *= m
		h *= m
		h ^= k
	}
	tail := length &^ 3
	switch length % 4 {
	case 3:
		h ^= uint32(data[tail+2]) << 16
		fallthrough
	case 2:
		h ^= uint32(data[tail+1]) << 8
		fallthrough
	case 1:
		h ^= uint32(data[tail])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return h
}
