package wire

import (
	"encoding/binary"
	"slices"
	"sync"

	"github.com/valyala/bytebufferpool"

	"github.com/samsa-broker/samsa/engine"
	"github.com/samsa-broker/samsa/net/transport"
)

// The Fetch response is framed by hand so that record bytes leave the segment files
// with sendfile. Field by field, for the versions served (v4..v18; "flex" = v12+,
// where arrays and strings are compact, i.e. uvarint length+1, and structs end in a
// tagged-field section):
//
//	response header     correlation_id int32 [flex: tags 0x00]
//	throttle_ms         int32
//	error_code          int16                      v7+
//	session_id          int32                      v7+
//	topics              array                      (int32 n | flex: uvarint n+1)
//	  topic             string (int16 len | flex: uvarint len+1)   v4..v12
//	  topic_id          [16]byte                                    v13+
//	  partitions        array
//	    partition       int32
//	    error_code      int16
//	    high_watermark  int64
//	    last_stable     int64
//	    log_start       int64                      v5+
//	    aborted_txns    nullable array             (null: int32 -1 | flex: uvarint 0)
//	    preferred_read  int32                      v11+
//	    records         nullable bytes             (int32 len | flex: uvarint len+1)
//	    ┄┄┄┄┄┄┄┄┄┄┄┄┄┄┄┄ the record bytes: a file range, sent with sendfile
//	    [flex: tags: 0: diverging_epoch {epoch int32, end_offset int64, 0x00}
//	                 1: current_leader  {leader_id int32, leader_epoch int32, 0x00}]
//	  [flex: topic tags 0x00]
//	[flex: tags: 0: node_endpoints (v16+, when a partition names a leader)
//	                {array of {node_id int32, host string, port int32, rack nullable string, 0x00}}]
//
// Everything but the record bytes goes into one pooled buffer; the response is that
// buffer cut at each records field, interleaved with the file ranges:
//
//	chunks: bytes │ file range │ bytes │ file range │ … │ bytes
//
// Records read from remote storage (tiered storage) are in memory, as the chunks they
// were read in (engine.Buffers): each slice is a chunk of its own in the same place,
// written from where it is with the bytes around it (writev), not copied into the
// buffer (SpliceBytes); the frame holds them, and their references to the chunks'
// buffers (lent: reused once released), until it is released.
//
// so its size is known before anything is written (transport.Response.Size). The
// engine slices stay pinned until the transport has written or dropped the answer and
// runs the Release below.
//
// Small ranges are copied instead: a range of at most FetchCopyMax bytes is read
// (pread) into the buffer while the answer is framed, as long as the answer's copied
// bytes stay within FetchCopyTotal. A file range costs the transport three system
// calls (write what precedes it, sendfile, write what follows) and a break in the
// batch of answers it writes with one writev; a copied range costs one pread. The
// tail-following consumer of a busy log fetches a few KiB at a time, so its answers
// become one plain buffer. A failed pread falls back to the file range.
// FetchCopyMax and FetchCopyTotal bound the record bytes a frame copies (CopyIn).
const (
	FetchCopyMax   = 16 << 10
	FetchCopyTotal = 64 << 10
)

// FetchFrame is a hand-framed Fetch answer: a pooled buffer, its chunk list and the
// pinned slices. It releases itself (transport.Releaser).
type FetchFrame struct {
	bb     *bytebufferpool.ByteBuffer
	marks  []int             // positions in bb.B after which parts[i] is spliced in
	parts  []transport.Chunk // a file range (of a slice) or bytes in memory
	slices []engine.Slice    // the pinned slices among parts, released with the frame
	lent   []engine.Buffers  // records in memory taken over, released with the frame
	chunks []transport.Chunk
	copied int // record bytes copied into bb
}

var fetchFrames = sync.Pool{New: func() any { return new(FetchFrame) }}

// GetFetchFrame returns a pooled, empty frame.
func GetFetchFrame() *FetchFrame {
	fr := fetchFrames.Get().(*FetchFrame)
	fr.bb = bytebufferpool.Get()
	return fr
}

// Release implements transport.Releaser: unpin the segments, recycle the buffers.
func (fr *FetchFrame) Release() {
	for i := range fr.slices {
		fr.slices[i].Release()
	}
	clear(fr.slices)
	fr.slices = fr.slices[:0]
	for i := range fr.lent {
		fr.lent[i].Release()
	}
	clear(fr.lent)
	fr.lent = fr.lent[:0]
	clear(fr.parts)
	fr.parts = fr.parts[:0]
	clear(fr.chunks)
	fr.chunks = fr.chunks[:0]
	fr.marks = fr.marks[:0]
	fr.copied = 0
	bytebufferpool.Put(fr.bb)
	fr.bb = nil
	fetchFrames.Put(fr)
}

// Bytes is the frame's buffer: the answer framed so far.
func (fr *FetchFrame) Bytes() []byte { return fr.bb.B }

// SetBytes makes b (the buffer, appended to) the frame's buffer.
func (fr *FetchFrame) SetBytes(b []byte) { fr.bb.B = b }

// Splice records that the slice's bytes follow the buffer's current end. The caller
// gives up the slice (fr releases it).
func (fr *FetchFrame) Splice(s engine.Slice) {
	fr.marks = append(fr.marks, len(fr.bb.B))
	fr.parts = append(fr.parts, transport.Chunk{File: s.File, Offset: s.Pos, Length: int64(s.Size)})
	fr.slices = append(fr.slices, s)
}

// SpliceBytes records that b follows the buffer's current end, written from
// where it is (writev), not copied: b must not change until the frame is
// released.
func (fr *FetchFrame) SpliceBytes(b []byte) {
	fr.marks = append(fr.marks, len(fr.bb.B))
	fr.parts = append(fr.parts, transport.Chunk{Bytes: b})
}

// appendBuffers appends v's bytes to b: each slice copied when small enough
// (FetchCopyMax, FetchCopyTotal, as CopyIn), else spliced in (SpliceBytes).
func (fr *FetchFrame) appendBuffers(b []byte, v engine.Buffers) []byte {
	for _, p := range v.Bufs {
		if n := len(p); n <= FetchCopyMax && fr.copied+n <= FetchCopyTotal {
			b = append(b, p...)
			fr.copied += n
			continue
		}
		fr.SetBytes(b)
		fr.SpliceBytes(p)
	}
	return b
}

// CopyIn appends s's bytes to b when s is small enough to be copied (see
// FetchCopyMax) and the read succeeds; the caller still owns s.
func (fr *FetchFrame) CopyIn(b []byte, s engine.Slice) ([]byte, bool) {
	n := int(s.Size)
	if n > FetchCopyMax || fr.copied+n > FetchCopyTotal {
		return b, false
	}
	b = slices.Grow(b, n)
	if _, err := s.File.ReadAt(b[len(b):len(b)+n], s.Pos); err != nil {
		return b, false
	}
	fr.copied += n
	return b[:len(b)+n], true
}

// Response cuts the buffer into chunks around the file ranges.
func (fr *FetchFrame) Response() transport.Response {
	b := fr.bb.B
	prev := 0
	for i, m := range fr.marks {
		if m > prev {
			fr.chunks = append(fr.chunks, transport.Chunk{Bytes: b[prev:m]})
		}
		fr.chunks = append(fr.chunks, fr.parts[i])
		prev = m
	}
	if len(b) > prev {
		fr.chunks = append(fr.chunks, transport.Chunk{Bytes: b[prev:]})
	}
	return transport.Response{Chunks: fr.chunks, Release: fr}
}

// Field writers (big-endian; compact forms for flexible versions).

// AppendI16, AppendI32 and AppendI64 write a big-endian integer.
func AppendI16(b []byte, v int16) []byte { return binary.BigEndian.AppendUint16(b, uint16(v)) }
func AppendI32(b []byte, v int32) []byte { return binary.BigEndian.AppendUint32(b, uint32(v)) }
func AppendI64(b []byte, v int64) []byte { return binary.BigEndian.AppendUint64(b, uint64(v)) }

// AppendArrayLen writes an array length (n < 0: null).
func AppendArrayLen(b []byte, flex bool, n int) []byte {
	if flex {
		return binary.AppendUvarint(b, uint64(n+1))
	}
	return AppendI32(b, int32(n))
}

// AppendStr writes a string: int16 length, or its compact form.
func AppendStr(b []byte, flex bool, s string) []byte {
	if flex {
		b = binary.AppendUvarint(b, uint64(len(s)+1))
	} else {
		b = AppendI16(b, int16(len(s)))
	}
	return append(b, s...)
}

// AppendBytesLen writes the length of a nullable bytes field (n < 0: null).
func AppendBytesLen(b []byte, flex bool, n int32) []byte {
	if flex {
		return binary.AppendUvarint(b, uint64(int64(n)+1))
	}
	return AppendI32(b, n)
}

// FetchPartition is one partition of a Fetch answer, its fields in the order of the
// wire (the format above).
type FetchPartition struct {
	Partition        int32
	ErrorCode        int16
	HighWatermark    int64
	LastStableOffset int64
	LogStartOffset   int64
	// Aborted is written only for a READ_COMMITTED fetch (otherwise null).
	Aborted []engine.AbortedTxn
	// Records is spliced in as a file range or copied (CopyIn); AppendPartition
	// takes it over. RecordBytes, when not empty, are records in memory (read
	// from remote storage, tiered storage), written instead, each slice spliced
	// in where it is unless small (appendBuffers); Records is then empty.
	// AppendPartition takes RecordBytes over too: the frame releases them.
	Records     engine.Slice
	RecordBytes engine.Buffers
	// The tagged fields of the flexible versions: DivergingEpoch (tag 0) when
	// Diverging, CurrentLeader (tag 1) when CurrentLeader.
	Diverging             bool
	DivergingEpoch        int32
	DivergingEndOffset    int64
	CurrentLeader         bool
	LeaderID, LeaderEpoch int32
}

// AppendPartition frames p for Fetch version v after b, splicing its records in (or
// copying them, then releasing them), and returns the buffer to go on with.
func (fr *FetchFrame) AppendPartition(b []byte, v int16, readCommitted bool, p *FetchPartition) []byte {
	flex := v >= 12
	b = AppendI32(b, p.Partition)
	b = AppendI16(b, p.ErrorCode)
	b = AppendI64(b, p.HighWatermark)
	b = AppendI64(b, p.LastStableOffset)
	if v >= 5 {
		b = AppendI64(b, p.LogStartOffset)
	}
	if readCommitted {
		b = AppendArrayLen(b, flex, len(p.Aborted))
		for _, a := range p.Aborted {
			b = AppendI64(b, a.ProducerID)
			b = AppendI64(b, a.FirstOffset)
			if flex {
				b = append(b, 0)
			}
		}
	} else {
		b = AppendArrayLen(b, flex, -1)
	}
	if v >= 11 {
		b = AppendI32(b, -1) // preferred read replica
	}
	if n := p.RecordBytes.Len(); n > 0 {
		b = AppendBytesLen(b, flex, int32(n))
		b = fr.appendBuffers(b, p.RecordBytes)
		fr.lent = append(fr.lent, p.RecordBytes)
		p.RecordBytes = engine.Buffers{}
	} else {
		b = AppendBytesLen(b, flex, p.Records.Size)
	}
	if p.Records.Size > 0 {
		if nb, ok := fr.CopyIn(b, p.Records); ok {
			b = nb
			p.Records.Release()
		} else {
			fr.SetBytes(b)
			fr.Splice(p.Records)
		}
		p.Records = engine.Slice{}
	}
	if !flex {
		return b
	}
	ntags := 0
	if p.Diverging {
		ntags++
	}
	if p.CurrentLeader {
		ntags++
	}
	b = append(b, byte(ntags))
	if p.Diverging {
		b = append(b, 0, 13) // tag 0, 13 bytes
		b = AppendI32(b, p.DivergingEpoch)
		b = AppendI64(b, p.DivergingEndOffset)
		b = append(b, 0)
	}
	if p.CurrentLeader {
		b = append(b, 1, 9) // tag 1, 9 bytes
		b = AppendI32(b, p.LeaderID)
		b = AppendI32(b, p.LeaderEpoch)
		b = append(b, 0)
	}
	return b
}

// NodeEndpoint is an entry of a Fetch answer's NodeEndpoints (KIP-951).
type NodeEndpoint struct {
	NodeID int32
	Host   string
	Port   int32
	Rack   *string
}

// AppendFetchTags writes the tagged fields that end a flexible Fetch answer:
// NodeEndpoints (tag 0) when eps is not empty, else none.
func AppendFetchTags(b []byte, eps []NodeEndpoint) []byte {
	if len(eps) == 0 {
		return append(b, 0)
	}
	var body []byte
	body = binary.AppendUvarint(body, uint64(len(eps)+1))
	for _, e := range eps {
		body = AppendI32(body, e.NodeID)
		body = AppendStr(body, true, e.Host)
		body = AppendI32(body, e.Port)
		if e.Rack == nil {
			body = append(body, 0)
		} else {
			body = AppendStr(body, true, *e.Rack)
		}
		body = append(body, 0) // the endpoint's tags
	}
	b = append(b, 1, 0) // one tag: 0
	b = binary.AppendUvarint(b, uint64(len(body)))
	return append(b, body...)
}
