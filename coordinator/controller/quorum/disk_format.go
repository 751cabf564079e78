package quorum

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// The on-disk formats; the package doc draws them.
const (
	segMagic      = "SMRWAL01"
	segHeaderSize = 8 + 8 + 8 + 4 + 4 // magic, base, base term, flags, crc32c
	segFlagReset  = 1                 // the segment starts a new log after a received snapshot
	snapMagic     = "SMRSNP01"
	snapMagic2    = "SMRSNP02" // with the joint configuration's fields (written only for one)

	frameHeaderSize = 12 // length u32, crc32c of the length u32, crc32c of the body u32
	frameWrite      = 1  // the only frame kind: one Save (hard state and/or entries)
	flagHardState   = 1  // the write carries a hard state

	// maxFrameSize bounds one frame (one Save); a length beyond it is torn or corrupt.
	maxFrameSize = 1 << 30
	// maxSnapshotFileSize bounds a snapshot file.
	maxSnapshotFileSize = 2 << 30
	// maxEntryDataSize bounds one entry's data (metadata.MaxEntrySize plus slack).
	maxEntryDataSize = 128 << 20

	segSuffix  = ".wal"
	snapSuffix = ".snap"
	tmpSuffix  = ".tmp"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func segName(base uint64) string   { return fmt.Sprintf("%020d%s", base, segSuffix) }
func snapName(index uint64) string { return fmt.Sprintf("%020d%s", index, snapSuffix) }

// segHeader is a segment's header: the log position it continues from.
type segHeader struct {
	base, baseTerm uint64 // the entry before the segment's first entry
	reset          bool   // the log before base is discarded (a received snapshot)
}

// appendSegHeader appends a segment's header to dst.
func appendSegHeader(dst []byte, h segHeader) []byte {
	start := len(dst)
	dst = append(dst, segMagic...)
	dst = binary.BigEndian.AppendUint64(dst, h.base)
	dst = binary.BigEndian.AppendUint64(dst, h.baseTerm)
	var flags uint32
	if h.reset {
		flags |= segFlagReset
	}
	dst = binary.BigEndian.AppendUint32(dst, flags)
	return binary.BigEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))
}

// decodeSegHeader parses a segment header.
func decodeSegHeader(b []byte) (segHeader, error) {
	if len(b) < segHeaderSize {
		return segHeader{}, fmt.Errorf("%w: segment header: %w", ErrCorrupt, io.ErrUnexpectedEOF)
	}
	if string(b[:8]) != segMagic {
		return segHeader{}, fmt.Errorf("%w: not a raft log segment", ErrCorrupt)
	}
	if crc32.Checksum(b[:segHeaderSize-4], castagnoli) != binary.BigEndian.Uint32(b[segHeaderSize-4:]) {
		return segHeader{}, fmt.Errorf("%w: segment header checksum", ErrCorrupt)
	}
	flags := binary.BigEndian.Uint32(b[24:])
	if flags&^segFlagReset != 0 {
		return segHeader{}, fmt.Errorf("%w: segment header flags %#x", ErrCorrupt, flags)
	}
	return segHeader{base: binary.BigEndian.Uint64(b[8:]), baseTerm: binary.BigEndian.Uint64(b[16:]), reset: flags&segFlagReset != 0}, nil
}

// appendWriteFrame appends the frame of one Save to dst.
func appendWriteFrame(dst []byte, hs *raftpb.HardState, ents []*raftpb.Entry) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, frameWrite)
	if hs != nil {
		dst = append(dst, flagHardState)
		dst = binary.BigEndian.AppendUint64(dst, hs.GetTerm())
		dst = binary.BigEndian.AppendUint64(dst, hs.GetVote())
		dst = binary.BigEndian.AppendUint64(dst, hs.GetCommit())
	} else {
		dst = append(dst, 0)
	}
	dst = binary.AppendUvarint(dst, uint64(len(ents)))
	for _, e := range ents {
		dst = binary.BigEndian.AppendUint64(dst, e.GetIndex())
		dst = binary.BigEndian.AppendUint64(dst, e.GetTerm())
		dst = append(dst, byte(e.GetType()))
		dst = binary.AppendUvarint(dst, uint64(len(e.GetData())))
		dst = append(dst, e.GetData()...)
	}
	body := dst[start+frameHeaderSize:]
	binary.BigEndian.PutUint32(dst[start:], uint32(len(body)))
	binary.BigEndian.PutUint32(dst[start+4:], crc32.Checksum(dst[start:start+4], castagnoli))
	binary.BigEndian.PutUint32(dst[start+8:], crc32.Checksum(body, castagnoli))
	return dst
}

// frameLength returns the body length a frame header gives, and whether the
// length's own checksum holds (a length is trusted only then).
func frameLength(h []byte) (uint32, bool) {
	return binary.BigEndian.Uint32(h), crc32.Checksum(h[:4], castagnoli) == binary.BigEndian.Uint32(h[4:])
}

// frameBodyOK reports whether body matches the frame header's body checksum.
func frameBodyOK(h, body []byte) bool {
	return crc32.Checksum(body, castagnoli) == binary.BigEndian.Uint32(h[8:])
}

// decodeWriteBody parses a frame body (after its checksum was verified). The
// entries' data alias b.
func decodeWriteBody(b []byte) (*raftpb.HardState, []*raftpb.Entry, error) {
	d := reader{b: b}
	if kind := d.byte(); kind != frameWrite {
		return nil, nil, fmt.Errorf("%w: frame kind %d", ErrCorrupt, kind)
	}
	var hs *raftpb.HardState
	switch flags := d.byte(); flags {
	case 0:
	case flagHardState:
		hs = &raftpb.HardState{Term: proto.Uint64(d.u64()), Vote: proto.Uint64(d.u64()), Commit: proto.Uint64(d.u64())}
	default:
		return nil, nil, fmt.Errorf("%w: frame flags %#x", ErrCorrupt, flags)
	}
	n := d.uvarint()
	// Each entry takes at least 18 bytes: bound the count before allocating by it.
	if d.err == nil && n > uint64(len(d.b)/18) {
		return nil, nil, fmt.Errorf("%w: frame claims %d entries in %d bytes", ErrCorrupt, n, len(d.b))
	}
	var ents []*raftpb.Entry
	if n > 0 {
		ents = make([]*raftpb.Entry, 0, n)
	}
	for i := uint64(0); i < n && d.err == nil; i++ {
		idx, term := d.u64(), d.u64()
		typ := raftpb.EntryType(d.byte())
		size := d.uvarint()
		if size > maxEntryDataSize {
			return nil, nil, fmt.Errorf("%w: entry %d claims %d bytes", ErrCorrupt, idx, size)
		}
		data := d.take(int(size))
		if d.err != nil {
			break
		}
		if _, ok := raftpb.EntryType_name[int32(typ)]; !ok {
			return nil, nil, fmt.Errorf("%w: entry %d type %d", ErrCorrupt, idx, typ)
		}
		e := &raftpb.Entry{Index: proto.Uint64(idx), Term: proto.Uint64(term), Type: typ.Enum()}
		if len(data) > 0 {
			e.Data = data
		}
		ents = append(ents, e)
	}
	if d.err != nil {
		return nil, nil, fmt.Errorf("%w: frame: %v", ErrCorrupt, d.err)
	}
	if len(d.b) != 0 {
		return nil, nil, fmt.Errorf("%w: frame has %d trailing bytes", ErrCorrupt, len(d.b))
	}
	return hs, ents, nil
}

// encodeSnapshotFile returns the bytes of a snapshot file: version 1, or version 2
// when the configuration is joint (a change of the voters in progress), which
// version 1 cannot hold, so that a build that reads only version 1 reads every
// snapshot of a quorum whose voters do not change.
func encodeSnapshotFile(snap *raftpb.Snapshot) []byte {
	md := snap.GetMetadata()
	cs := md.GetConfState()
	v2 := len(cs.GetVotersOutgoing()) > 0 || len(cs.GetLearnersNext()) > 0 || cs.GetAutoLeave()
	b := make([]byte, 0, 64+len(snap.GetData()))
	lists := [][]uint64{cs.GetVoters(), cs.GetLearners()}
	if v2 {
		b = append(b, snapMagic2...)
		lists = append(lists, cs.GetVotersOutgoing(), cs.GetLearnersNext())
	} else {
		b = append(b, snapMagic...)
	}
	b = binary.BigEndian.AppendUint64(b, md.GetIndex())
	b = binary.BigEndian.AppendUint64(b, md.GetTerm())
	for _, ids := range lists {
		b = binary.AppendUvarint(b, uint64(len(ids)))
		for _, id := range ids {
			b = binary.BigEndian.AppendUint64(b, id)
		}
	}
	if v2 {
		var auto byte
		if cs.GetAutoLeave() {
			auto = 1
		}
		b = append(b, auto)
	}
	b = binary.BigEndian.AppendUint64(b, uint64(len(snap.GetData())))
	b = append(b, snap.GetData()...)
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// decodeSnapshotFile parses a snapshot file (version 1 or 2). The data aliases b.
func decodeSnapshotFile(b []byte) (*raftpb.Snapshot, error) {
	if len(b) < len(snapMagic)+4 || (string(b[:len(snapMagic)]) != snapMagic && string(b[:len(snapMagic)]) != snapMagic2) {
		return nil, fmt.Errorf("%w: not a snapshot file", ErrCorrupt)
	}
	v2 := string(b[:len(snapMagic)]) == snapMagic2
	if crc32.Checksum(b[:len(b)-4], castagnoli) != binary.BigEndian.Uint32(b[len(b)-4:]) {
		return nil, fmt.Errorf("%w: snapshot checksum", ErrCorrupt)
	}
	d := reader{b: b[len(snapMagic) : len(b)-4]}
	index, term := d.u64(), d.u64()
	lists := make([][]uint64, 2, 4)
	if v2 {
		lists = lists[:4]
	}
	for i := range lists {
		n := d.uvarint()
		if n > uint64(len(d.b)/8) {
			return nil, fmt.Errorf("%w: snapshot claims %d ids", ErrCorrupt, n)
		}
		for j := uint64(0); j < n; j++ {
			lists[i] = append(lists[i], d.u64())
		}
	}
	cs := &raftpb.ConfState{Voters: lists[0], Learners: lists[1]}
	if v2 {
		cs.VotersOutgoing, cs.LearnersNext = lists[2], lists[3]
		switch d.byte() {
		case 0:
		case 1:
			cs.AutoLeave = proto.Bool(true)
		default:
			return nil, fmt.Errorf("%w: snapshot auto-leave flag", ErrCorrupt)
		}
	}
	size := d.u64()
	if d.err == nil && size != uint64(len(d.b)) {
		return nil, fmt.Errorf("%w: snapshot data length %d, %d bytes left", ErrCorrupt, size, len(d.b))
	}
	data := d.take(len(d.b))
	if d.err != nil {
		return nil, fmt.Errorf("%w: snapshot: %v", ErrCorrupt, d.err)
	}
	return &raftpb.Snapshot{Data: data, Metadata: &raftpb.SnapshotMetadata{
		Index: proto.Uint64(index), Term: proto.Uint64(term), ConfState: raftpb.EnsureConfState(cs),
	}}, nil
}

// reader decodes big-endian fields; after the first error every read returns zero.
type reader struct {
	b   []byte
	err error
}

var errShort = errors.New("short or malformed field")

func (r *reader) take(n int) []byte {
	if r.err != nil || n < 0 || n > len(r.b) {
		r.err, r.b = errShort, nil
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

func (r *reader) byte() byte {
	if v := r.take(1); v != nil {
		return v[0]
	}
	return 0
}

func (r *reader) u64() uint64 {
	if v := r.take(8); v != nil {
		return binary.BigEndian.Uint64(v)
	}
	return 0
}

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err, r.b = errShort, nil
		return 0
	}
	r.b = r.b[n:]
	return v
}
