package metadata

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"math"
)

// Frame sizes and versions; see the package doc for the layouts.
const (
	frameHeaderSize = 8 // length + crc32c
	entryMagic      = 0xE1

	// MaxRecordSize bounds one record frame; larger frames are rejected on decode and
	// refused by Store.Append.
	MaxRecordSize = 1 << 20
	// MaxEntrySize bounds one entry frame (one Append).
	MaxEntrySize = 64 << 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Encode appends r's record frame to dst and returns the extended slice. r must not be
// nil (Image.Apply rejects nil records, so anything Apply accepted encodes).
func Encode(dst []byte, r Record) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0, 0, 0, 0, 0, encodeVersion(r), byte(r.recordType()))
	switch r := r.(type) {
	case *TopicRecord:
		dst = appendString(dst, r.Name)
		dst = append(dst, r.ID[:]...)
	case *PartitionRecord:
		dst = append(dst, r.TopicID[:]...)
		dst = binary.BigEndian.AppendUint32(dst, uint32(r.Partition))
		dst = appendInt32s(dst, r.Replicas)
		dst = appendInt32s(dst, r.ISR)
		dst = appendInt32s(dst, r.Removing)
		dst = appendInt32s(dst, r.Adding)
		dst = binary.BigEndian.AppendUint32(dst, uint32(r.Leader))
		dst = binary.BigEndian.AppendUint32(dst, uint32(r.LeaderEpoch))
		dst = binary.BigEndian.AppendUint32(dst, uint32(r.PartitionEpoch))
		dst = append(dst, byte(r.LeaderRecoveryState))
		if partitionHasELR(r) {
			dst = appendTaggedArrays(dst, taggedArray{tagPartitionELR, orNil(r.ELR)}, taggedArray{tagPartitionLastKnownELR, orNil(r.LastKnownELR)})
		}
	case *PartitionChangeRecord:
		dst = append(dst, r.TopicID[:]...)
		dst = binary.BigEndian.AppendUint32(dst, uint32(r.Partition))
		dst = appendOptInt32s(dst, r.ISR)
		dst = binary.BigEndian.AppendUint32(dst, uint32(r.Leader))
		dst = appendOptInt32s(dst, r.Replicas)
		dst = appendOptInt32s(dst, r.Removing)
		dst = appendOptInt32s(dst, r.Adding)
		dst = append(dst, byte(r.LeaderRecoveryState))
		if changeHasELR(r) {
			dst = appendTaggedArrays(dst, taggedArray{tagChangeELR, r.ELR}, taggedArray{tagChangeLastKnownELR, r.LastKnownELR})
		}
	case *ClearElrRecord:
		dst = appendString(dst, r.TopicName)
	case *RemoveTopicRecord:
		dst = append(dst, r.ID[:]...)
	case *ConfigRecord:
		dst = append(dst, byte(r.Resource))
		dst = appendString(dst, r.Name)
		dst = appendString(dst, r.Key)
		dst = appendNullableString(dst, r.Value)
	case *ProducerIDsRecord:
		dst = binary.BigEndian.AppendUint32(dst, uint32(r.BrokerID))
		dst = binary.BigEndian.AppendUint64(dst, uint64(r.BrokerEpoch))
		dst = binary.BigEndian.AppendUint64(dst, uint64(r.NextProducerID))
	case *RegisterBrokerRecord:
		dst = binary.BigEndian.AppendUint32(dst, uint32(r.ID))
		dst = append(dst, r.IncarnationID[:]...)
		dst = binary.BigEndian.AppendUint64(dst, uint64(r.Epoch))
		dst = binary.AppendUvarint(dst, uint64(len(r.Endpoints)))
		for _, e := range r.Endpoints {
			dst = appendString(dst, e.Name)
			dst = appendString(dst, e.Host)
			dst = binary.BigEndian.AppendUint32(dst, uint32(e.Port))
			dst = binary.BigEndian.AppendUint16(dst, uint16(e.SecurityProtocol))
		}
		dst = appendNullableString(dst, r.Rack)
		var flags byte
		if r.Fenced {
			flags |= 1
		}
		if r.InControlledShutdown {
			flags |= 2
		}
		dst = append(dst, flags)
		if len(r.Features) > 0 {
			dst = binary.AppendUvarint(dst, uint64(len(r.Features)))
			for _, f := range r.Features {
				dst = appendString(dst, f.Name)
				dst = binary.BigEndian.AppendUint16(dst, uint16(f.Min))
				dst = binary.BigEndian.AppendUint16(dst, uint16(f.Max))
			}
		}
	case *UnregisterBrokerRecord:
		dst = binary.BigEndian.AppendUint32(dst, uint32(r.ID))
		dst = binary.BigEndian.AppendUint64(dst, uint64(r.Epoch))
	case *BrokerRegistrationChangeRecord:
		dst = binary.BigEndian.AppendUint32(dst, uint32(r.ID))
		dst = binary.BigEndian.AppendUint64(dst, uint64(r.Epoch))
		dst = append(dst, byte(r.Fenced), byte(r.InControlledShutdown))
	case *FeatureLevelRecord:
		dst = appendString(dst, r.Name)
		dst = binary.BigEndian.AppendUint16(dst, uint16(r.Level))
	case securityRecord:
		dst = appendSecurity(dst, r)
	case *VotersRecord:
		dst = appendVoters(dst, r)
	}
	return finishFrame(dst, start)
}

// encodeVersion is the version Encode writes for r: 2 for Partition, for
// RegisterBroker without features and for FeatureLevel (type 12, whose version 1 is
// RemoveUserScramCredential), 3 for RegisterBroker with features and for Partition
// with an ELR or last known ELR, 2 for PartitionChange with either, 1 for the others.
// A record's version follows what it carries, never a level: the controller writes
// ELR fields only while eligible.leader.replicas.version is 1 (finalized only once
// every broker supports it), so a cluster that has not finalized ELR writes exactly
// the bytes a build before ELR writes and reads.
func encodeVersion(r Record) byte {
	switch r := r.(type) {
	case *RegisterBrokerRecord:
		if len(r.Features) > 0 {
			return 3
		}
		return 2
	case *PartitionRecord:
		if partitionHasELR(r) {
			return 3
		}
		return 2
	case *PartitionChangeRecord:
		if changeHasELR(r) {
			return 2
		}
		return 1
	case *FeatureLevelRecord:
		return featureLevelVersion
	}
	return 1
}

// decodableVersion reports whether Decode reads version ver of type t: every version
// Encode writes, and version 1 of RegisterBroker and Partition (written before the
// cluster existed).
func decodableVersion(t recordType, ver byte) bool {
	switch t {
	case typeRegisterBroker:
		return ver >= 1 && ver <= 3
	case typePartition:
		return ver >= 1 && ver <= 3
	case typePartitionChange:
		return ver == 1 || ver == 2
	case typeFeatureLevel: // also typeRemoveUserScramCredential
		return ver == 1 || ver == featureLevelVersion
	}
	return ver == 1
}

// finishFrame fills in the length and checksum of the frame that starts at start.
func finishFrame(dst []byte, start int) []byte {
	body := dst[start+frameHeaderSize:]
	binary.BigEndian.PutUint32(dst[start:], uint32(len(body)))
	binary.BigEndian.PutUint32(dst[start+4:], crc32.Checksum(body, castagnoli))
	return dst
}

// EncodeEntry appends one entry frame holding recs (one Append's worth; later, one Raft
// entry) to dst and returns the extended slice.
func EncodeEntry(dst []byte, recs ...Record) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0, 0, 0, 0, 0, entryMagic)
	dst = binary.AppendUvarint(dst, uint64(len(recs)))
	for _, r := range recs {
		dst = Encode(dst, r)
	}
	return finishFrame(dst, start)
}

// checkFrame validates the frame at the start of b against max and returns its body and
// total length.
func checkFrame(b []byte, max int) ([]byte, int, error) {
	if len(b) < frameHeaderSize {
		return nil, 0, fmt.Errorf("%w: frame header: %w", ErrCorrupt, io.ErrUnexpectedEOF)
	}
	n := binary.BigEndian.Uint32(b)
	if n > uint32(max) {
		return nil, 0, fmt.Errorf("%w: frame length %d exceeds %d", ErrCorrupt, n, max)
	}
	if uint64(len(b)-frameHeaderSize) < uint64(n) {
		return nil, 0, fmt.Errorf("%w: frame of %d bytes: %w", ErrCorrupt, n, io.ErrUnexpectedEOF)
	}
	body := b[frameHeaderSize : frameHeaderSize+int(n)]
	if got, want := crc32.Checksum(body, castagnoli), binary.BigEndian.Uint32(b[4:]); got != want {
		return nil, 0, fmt.Errorf("%w: crc32c %08x, frame says %08x", ErrCorrupt, got, want)
	}
	return body, frameHeaderSize + int(n), nil
}

// Decode parses the record frame at the start of b. It returns the record and the frame's
// length. Errors wrap ErrCorrupt (and io.ErrUnexpectedEOF if b ends inside the frame).
// The record does not alias b.
func Decode(b []byte) (Record, int, error) {
	body, n, err := checkFrame(b, MaxRecordSize)
	if err != nil {
		return nil, 0, err
	}
	if len(body) < 2 {
		return nil, 0, fmt.Errorf("%w: record frame of %d bytes", ErrCorrupt, len(body))
	}
	typ, ver := recordType(body[1]), body[0]
	if !decodableVersion(typ, ver) {
		return nil, 0, fmt.Errorf("%w: record type %d version %d unsupported", ErrCorrupt, typ, ver)
	}
	d := decoder{b: body[2:]}
	var r Record
	switch typ {
	case typeTopic:
		r = &TopicRecord{Name: d.string(), ID: d.uuid()}
	case typePartition:
		p := &PartitionRecord{TopicID: d.uuid(), Partition: d.int32(), Replicas: d.int32s(), ISR: d.int32s()}
		if ver >= 2 {
			p.Removing, p.Adding = d.int32s(), d.int32s()
		}
		p.Leader, p.LeaderEpoch = d.int32(), d.int32()
		if ver >= 2 {
			p.PartitionEpoch, p.LeaderRecoveryState = d.int32(), d.int8()
		}
		if ver >= 3 {
			f := d.taggedArrays(tagPartitionELR, tagPartitionLastKnownELR)
			p.ELR, p.LastKnownELR = f[0], f[1]
			if !partitionHasELR(p) || (p.ELR != nil && len(p.ELR) == 0) || (p.LastKnownELR != nil && len(p.LastKnownELR) == 0) {
				d.fail("partition ELR fields") // version 3 carries at least one, never empty
			}
		}
		r = p
	case typePartitionChange:
		c := &PartitionChangeRecord{TopicID: d.uuid(), Partition: d.int32(), ISR: d.optInt32s(), Leader: d.int32(),
			Replicas: d.optInt32s(), Removing: d.optInt32s(), Adding: d.optInt32s(), LeaderRecoveryState: d.int8()}
		if ver >= 2 {
			f := d.taggedArrays(tagChangeELR, tagChangeLastKnownELR)
			c.ELR, c.LastKnownELR = f[0], f[1]
			if !changeHasELR(c) {
				d.fail("partition change ELR fields") // version 2 carries at least one
			}
		}
		r = c
	case typeClearElr:
		r = &ClearElrRecord{TopicName: d.string()}
	case typeRemoveTopic:
		r = &RemoveTopicRecord{ID: d.uuid()}
	case typeConfig:
		r = &ConfigRecord{Resource: ResourceType(d.int8()), Name: d.string(), Key: d.string(), Value: d.nullableString()}
	case typeProducerIDs:
		r = &ProducerIDsRecord{BrokerID: d.int32(), BrokerEpoch: d.int64(), NextProducerID: d.int64()}
	case typeRegisterBroker:
		if ver == 1 {
			rb := &RegisterBrokerRecord{ID: d.int32()}
			rb.Endpoints = []Endpoint{{Name: "PLAINTEXT", Host: d.string(), Port: d.int32(), SecurityProtocol: ProtocolPlaintext}}
			rb.Rack = d.nullableString()
			r = rb
			break
		}
		rb := &RegisterBrokerRecord{ID: d.int32(), IncarnationID: d.uuid(), Epoch: d.int64()}
		n := d.uvarint("endpoint count")
		// An endpoint takes at least 8 bytes: bound the count before sizing by it.
		if n > uint64(len(d.b)/8) {
			d.fail("endpoints")
		} else if n > 0 {
			rb.Endpoints = make([]Endpoint, n)
			for i := range rb.Endpoints {
				rb.Endpoints[i] = Endpoint{Name: d.string(), Host: d.string(), Port: d.int32(), SecurityProtocol: d.int16()}
			}
		}
		rb.Rack = d.nullableString()
		flags := d.int8()
		if flags&^3 != 0 {
			d.fail("broker flags")
		}
		rb.Fenced, rb.InControlledShutdown = flags&1 != 0, flags&2 != 0
		if ver >= 3 {
			n := d.uvarint("feature count")
			// A feature takes at least 5 bytes; version 3 has one at least.
			if n == 0 || n > uint64(len(d.b)/5) {
				d.fail("features")
			} else {
				rb.Features = make([]BrokerFeature, n)
				for i := range rb.Features {
					rb.Features[i] = BrokerFeature{Name: d.string(), Min: d.int16(), Max: d.int16()}
				}
			}
		}
		r = rb
	case typeUnregisterBroker:
		r = &UnregisterBrokerRecord{ID: d.int32(), Epoch: d.int64()}
	case typeBrokerRegistrationChange:
		r = &BrokerRegistrationChangeRecord{ID: d.int32(), Epoch: d.int64(), Fenced: d.int8(), InControlledShutdown: d.int8()}
	case typeFeatureLevel:
		if ver == featureLevelVersion {
			r = &FeatureLevelRecord{Name: d.string(), Level: d.int16()}
			break
		}
		r = decodeSecurity(typeRemoveUserScramCredential, &d)
	case typeUserScramCredential, typeAccessControlEntry, typeRemoveAccessControlEntry, typeClientQuota:
		r = decodeSecurity(typ, &d)
	case typeVoters:
		r = decodeVoters(&d)
	default:
		return nil, 0, fmt.Errorf("%w: record type %d unknown", ErrCorrupt, body[1])
	}
	if d.err != nil {
		return nil, 0, fmt.Errorf("%w: record type %d: %v", ErrCorrupt, body[1], d.err)
	}
	if len(d.b) != 0 {
		return nil, 0, fmt.Errorf("%w: record type %d: %d trailing bytes", ErrCorrupt, body[1], len(d.b))
	}
	return r, n, nil
}

// DecodeEntry parses the entry frame at the start of b and returns its records and the
// frame's length. Errors wrap ErrCorrupt.
func DecodeEntry(b []byte) ([]Record, int, error) {
	body, n, err := checkFrame(b, MaxEntrySize)
	if err != nil {
		return nil, 0, err
	}
	if len(body) < 1 || body[0] != entryMagic {
		return nil, 0, fmt.Errorf("%w: not an entry frame", ErrCorrupt)
	}
	body = body[1:]
	count, k := binary.Uvarint(body)
	if k <= 0 || k != uvarintLen(count) {
		return nil, 0, fmt.Errorf("%w: entry record count", ErrCorrupt)
	}
	body = body[k:]
	// Every record frame takes at least frameHeaderSize+2 bytes: bound the count by that
	// before sizing anything by it.
	if count > uint64(len(body)/(frameHeaderSize+2)) {
		return nil, 0, fmt.Errorf("%w: entry claims %d records in %d bytes", ErrCorrupt, count, len(body))
	}
	recs := make([]Record, 0, count)
	for i := uint64(0); i < count; i++ {
		r, m, err := Decode(body)
		if err != nil {
			return nil, 0, fmt.Errorf("entry record %d: %w", i, err)
		}
		recs = append(recs, r)
		body = body[m:]
	}
	if len(body) != 0 {
		return nil, 0, fmt.Errorf("%w: entry has %d trailing bytes", ErrCorrupt, len(body))
	}
	return recs, n, nil
}

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

func appendNullableString(dst []byte, s *string) []byte {
	if s == nil {
		return append(dst, 0)
	}
	dst = binary.AppendUvarint(dst, uint64(len(*s))+1)
	return append(dst, *s...)
}

// appendOptInt32s writes an optional array: a uvarint of count+1 (0 = nil), then the
// values.
func appendOptInt32s(dst []byte, v []int32) []byte {
	if v == nil {
		return append(dst, 0)
	}
	dst = binary.AppendUvarint(dst, uint64(len(v))+1)
	for _, x := range v {
		dst = binary.BigEndian.AppendUint32(dst, uint32(x))
	}
	return dst
}

func appendInt32s(dst []byte, v []int32) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(v)))
	for _, x := range v {
		dst = binary.BigEndian.AppendUint32(dst, uint32(x))
	}
	return dst
}

// decoder reads a record payload; after the first error every read returns zero.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("short or malformed %s", what)
	}
	d.b = nil
}

func (d *decoder) take(n int, what string) []byte {
	if d.err != nil || n < 0 || len(d.b) < n {
		d.fail(what)
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) int8() int8 {
	if v := d.take(1, "int8"); v != nil {
		return int8(v[0])
	}
	return 0
}

func (d *decoder) int16() int16 {
	if v := d.take(2, "int16"); v != nil {
		return int16(binary.BigEndian.Uint16(v))
	}
	return 0
}

func (d *decoder) int32() int32 {
	if v := d.take(4, "int32"); v != nil {
		return int32(binary.BigEndian.Uint32(v))
	}
	return 0
}

func (d *decoder) int64() int64 {
	if v := d.take(8, "int64"); v != nil {
		return int64(binary.BigEndian.Uint64(v))
	}
	return 0
}

func (d *decoder) uuid() (u UUID) {
	if v := d.take(16, "uuid"); v != nil {
		copy(u[:], v)
	}
	return u
}

func (d *decoder) uvarint(what string) uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 || n != uvarintLen(v) {
		d.fail(what)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) string() string {
	n := d.uvarint("string length")
	if n > uint64(len(d.b)) {
		d.fail("string")
		return ""
	}
	return string(d.take(int(n), "string"))
}

func (d *decoder) nullableString() *string {
	n := d.uvarint("string length")
	if d.err != nil || n == 0 {
		return nil
	}
	if n-1 > uint64(len(d.b)) {
		d.fail("string")
		return nil
	}
	s := string(d.take(int(n-1), "string"))
	return &s
}

func (d *decoder) int32s() []int32 {
	n := d.uvarint("array length")
	if n > uint64(len(d.b)/4) || n > math.MaxInt32 {
		d.fail("int32 array")
		return nil
	}
	if n == 0 {
		return nil
	}
	out := make([]int32, n)
	for i := range out {
		out[i] = d.int32()
	}
	return out
}

// optInt32s reads appendOptInt32s's form; a present empty array is non-nil.
func (d *decoder) optInt32s() []int32 {
	n := d.uvarint("array length")
	if d.err != nil || n == 0 {
		return nil
	}
	n--
	if n > uint64(len(d.b)/4) || n > math.MaxInt32 {
		d.fail("int32 array")
		return nil
	}
	out := make([]int32, n)
	for i := range out {
		out[i] = d.int32()
	}
	return out
}

// Tags of the ELR fields, Kafka's: PartitionRecord's EligibleLeaderReplicas (1) and
// LastKnownElr (2), PartitionChangeRecord's (6 and 7).
const (
	tagPartitionELR          = 1
	tagPartitionLastKnownELR = 2
	tagChangeELR             = 6
	tagChangeLastKnownELR    = 7
)

func partitionHasELR(r *PartitionRecord) bool { return len(r.ELR) > 0 || len(r.LastKnownELR) > 0 }

func changeHasELR(r *PartitionChangeRecord) bool { return r.ELR != nil || r.LastKnownELR != nil }

// orNil is v, or nil when it is empty (a PartitionRecord writes no empty field).
func orNil(v []int32) []int32 {
	if len(v) == 0 {
		return nil
	}
	return v
}

// taggedArray is one tagged field holding an []int32; nil: absent.
type taggedArray struct {
	tag uint64
	v   []int32
}

// appendTaggedArrays writes a tagged-field section as Kafka's flexible versions do: a
// uvarint count of the fields present, then per field, tags ascending, a uvarint tag,
// a uvarint size of its bytes, and the bytes (here an int32 array as appendInt32s
// writes it). fs must be in tag order.
func appendTaggedArrays(dst []byte, fs ...taggedArray) []byte {
	n := 0
	for _, f := range fs {
		if f.v != nil {
			n++
		}
	}
	dst = binary.AppendUvarint(dst, uint64(n))
	for _, f := range fs {
		if f.v == nil {
			continue
		}
		dst = binary.AppendUvarint(dst, f.tag)
		dst = binary.AppendUvarint(dst, uint64(uvarintLen(uint64(len(f.v)))+4*len(f.v)))
		dst = appendInt32s(dst, f.v)
	}
	return dst
}

// taggedArrays reads appendTaggedArrays's section: the array of each tag of known
// (nil: absent; present: non-nil, possibly empty). Tags must ascend and be known:
// every record has one encoding, so a field a later build adds comes with a new
// record version.
func (d *decoder) taggedArrays(known ...uint64) [][]int32 {
	out := make([][]int32, len(known))
	n := d.uvarint("tagged field count")
	if n > uint64(len(known)) {
		d.fail("tagged fields")
		return out
	}
	next := 0
	for range n {
		tag, size := d.uvarint("tag"), d.uvarint("tagged field size")
		if d.err != nil {
			return out
		}
		for next < len(known) && known[next] < tag {
			next++
		}
		if next == len(known) || known[next] != tag || size > uint64(len(d.b)) {
			d.fail("tagged field")
			return out
		}
		sub := decoder{b: d.take(int(size), "tagged field")}
		v := sub.int32s()
		if sub.err != nil || len(sub.b) != 0 {
			d.fail("tagged field")
			return out
		}
		if v == nil {
			v = []int32{}
		}
		out[next] = v
		next++
	}
	return out
}

// uvarintLen is the length of v's minimal uvarint; longer encodings are rejected so
// every record has exactly one encoding.
func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}
