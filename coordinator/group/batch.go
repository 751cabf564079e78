package group

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// Record batches (magic 2), the framing of __consumer_offsets on disk and on the wire:
//
//	+--------------------+ 0
//	| baseOffset   int64 |
//	| batchLength  int32 |  bytes after this field
//	| leaderEpoch  int32 |
//	| magic        int8  |  = 2
//	| crc          uint32|  CRC-32C of everything from attributes to the end
//	| attributes   int16 |  bits 0-2 compression, 3 timestamp type, 4 txn, 5 control
//	| lastOffsetDelta int32
//	| baseTimestamp int64|
//	| maxTimestamp int64 |
//	| producerId   int64 |
//	| producerEpoch int16|
//	| baseSequence int32 |
//	| recordCount  int32 |
//	+--------------------+ 61
//	| records ...        |  (compressed as one block when bits 0-2 != 0)
//	+--------------------+
//
//	record: varint length | int8 attributes | varlong timestampDelta | varint offsetDelta |
//	        varint keyLen (-1 null) | key | varint valueLen (-1 null) | value |
//	        varint headerCount | headers (varint keyLen | key | varint valueLen | value)

// Record is one __consumer_offsets record. A nil Value is a tombstone.
type Record struct {
	Offset    int64 // set by DecodeBatches; ignored by AppendBatch
	Timestamp int64 // milliseconds since the epoch
	Key       []byte
	Value     []byte
}

const (
	batchHeaderLen   = 61
	batchCRCOffset   = 17
	batchAttrsOffset = 21
	// maxDecompressed bounds what one compressed batch may expand to.
	maxDecompressed = 64 << 20
)

var crc32c = crc32.MakeTable(crc32.Castagnoli)

// AppendBatch appends one uncompressed record batch v2 holding recs, with base offset
// 0 (the log assigns offsets), no producer id, and a valid CRC-32C. Timestamps are
// taken from the records (the first one is the base).
func AppendBatch(dst []byte, recs []Record) []byte {
	start := len(dst)
	var baseTS, maxTS int64 = -1, -1
	if len(recs) > 0 {
		baseTS = recs[0].Timestamp
		maxTS = baseTS
	}
	for i := range recs {
		maxTS = max(maxTS, recs[i].Timestamp)
	}
	dst = binary.BigEndian.AppendUint64(dst, 0)          // base offset
	dst = binary.BigEndian.AppendUint32(dst, 0)          // batch length, patched below
	dst = binary.BigEndian.AppendUint32(dst, 0xffffffff) // partition leader epoch: -1
	dst = append(dst, 2)                                 // magic
	dst = binary.BigEndian.AppendUint32(dst, 0)          // crc, patched below
	dst = binary.BigEndian.AppendUint16(dst, 0)          // attributes
	dst = binary.BigEndian.AppendUint32(dst, uint32(max(len(recs)-1, 0)))
	dst = binary.BigEndian.AppendUint64(dst, uint64(baseTS))
	dst = binary.BigEndian.AppendUint64(dst, uint64(maxTS))
	dst = binary.BigEndian.AppendUint64(dst, 0xffffffffffffffff) // producer id -1
	dst = binary.BigEndian.AppendUint16(dst, 0xffff)             // producer epoch -1
	dst = binary.BigEndian.AppendUint32(dst, 0xffffffff)         // base sequence -1
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(recs)))
	for i := range recs {
		dst = appendRecord(dst, &recs[i], int64(i), recs[i].Timestamp-baseTS)
	}
	binary.BigEndian.PutUint32(dst[start+8:], uint32(len(dst)-start-12))
	binary.BigEndian.PutUint32(dst[start+batchCRCOffset:], crc32.Checksum(dst[start+batchAttrsOffset:], crc32c))
	return dst
}

func appendRecord(dst []byte, r *Record, offsetDelta, tsDelta int64) []byte {
	// body length first: compute it without a scratch buffer.
	n := 1 + varintLen(tsDelta) + varintLen(offsetDelta) +
		nullableLen(r.Key) + nullableLen(r.Value) + 1
	dst = binary.AppendVarint(dst, int64(n))
	dst = append(dst, 0)
	dst = binary.AppendVarint(dst, tsDelta)
	dst = binary.AppendVarint(dst, offsetDelta)
	dst = appendVarBytes(dst, r.Key)
	dst = appendVarBytes(dst, r.Value)
	return append(dst, 0) // no headers
}

func varintLen(v int64) int {
	var b [binary.MaxVarintLen64]byte
	return binary.PutVarint(b[:], v)
}

func nullableLen(b []byte) int {
	if b == nil {
		return varintLen(-1)
	}
	return varintLen(int64(len(b))) + len(b)
}

func appendVarBytes(dst, b []byte) []byte {
	if b == nil {
		return binary.AppendVarint(dst, -1)
	}
	dst = binary.AppendVarint(dst, int64(len(b)))
	return append(dst, b...)
}

// DecodeBatches calls fn for every data record of every batch in buf, in order.
// Control batches are skipped; compressed batches (gzip, snappy, lz4, zstd) are
// decompressed, to at most 64 MiB each. A truncated final batch ends the walk
// without error (a log read may cut one); anything else malformed returns an error
// wrapping ErrCorrupt. Key and Value alias buf or a decompression buffer and are
// valid only during fn.
func DecodeBatches(buf []byte, fn func(Record) error) error {
	for len(buf) > 0 {
		if len(buf) < batchHeaderLen {
			return nil
		}
		length := int64(int32(binary.BigEndian.Uint32(buf[8:])))
		if length < batchHeaderLen-12 {
			return fmt.Errorf("%w: batch length %d", ErrCorrupt, length)
		}
		if int64(len(buf)) < 12+length {
			return nil
		}
		b := buf[:12+length]
		buf = buf[12+length:]
		if magic := b[16]; magic != 2 {
			return fmt.Errorf("%w: batch magic %d", ErrCorrupt, magic)
		}
		if crc := binary.BigEndian.Uint32(b[batchCRCOffset:]); crc != crc32.Checksum(b[batchAttrsOffset:], crc32c) {
			return fmt.Errorf("%w: batch crc mismatch", ErrCorrupt)
		}
		attrs := binary.BigEndian.Uint16(b[batchAttrsOffset:])
		if attrs&0x20 != 0 { // control batch (transaction markers)
			continue
		}
		baseOffset := int64(binary.BigEndian.Uint64(b))
		baseTS := int64(binary.BigEndian.Uint64(b[27:]))
		count := int64(int32(binary.BigEndian.Uint32(b[57:])))
		body := b[batchHeaderLen:]
		if codec := attrs & 7; codec != 0 {
			var err error
			if body, err = decompress(codec, body); err != nil {
				return err
			}
		}
		if count < 0 || count > int64(len(body)) {
			return fmt.Errorf("%w: record count %d", ErrCorrupt, count)
		}
		for i := int64(0); i < count; i++ {
			var rec Record
			var err error
			rec, body, err = decodeRecord(body)
			if err != nil {
				return err
			}
			rec.Offset += baseOffset
			rec.Timestamp += baseTS
			if err := fn(rec); err != nil {
				return err
			}
		}
	}
	return nil
}

func decodeRecord(b []byte) (Record, []byte, error) {
	var rec Record
	length, n := binary.Varint(b)
	if n <= 0 || length < 0 || length > int64(len(b)-n) {
		return rec, nil, fmt.Errorf("%w: record length", ErrCorrupt)
	}
	rest := b[n+int(length):]
	r := b[n : n+int(length)]
	if len(r) < 1 {
		return rec, nil, fmt.Errorf("%w: empty record", ErrCorrupt)
	}
	r = r[1:] // attributes
	var ok bool
	var v int64
	if v, r, ok = readVarint(r); !ok {
		return rec, nil, fmt.Errorf("%w: record timestamp", ErrCorrupt)
	}
	rec.Timestamp = v
	if v, r, ok = readVarint(r); !ok {
		return rec, nil, fmt.Errorf("%w: record offset", ErrCorrupt)
	}
	rec.Offset = v
	if rec.Key, r, ok = readVarBytes(r); !ok {
		return rec, nil, fmt.Errorf("%w: record key", ErrCorrupt)
	}
	if rec.Value, r, ok = readVarBytes(r); !ok {
		return rec, nil, fmt.Errorf("%w: record value", ErrCorrupt)
	}
	// Headers are not used by __consumer_offsets; they are checked for shape only.
	h, r, ok := readVarint(r)
	if !ok || h < 0 || h > int64(len(r)) {
		return rec, nil, fmt.Errorf("%w: record headers", ErrCorrupt)
	}
	for i := int64(0); i < h; i++ {
		if _, r, ok = readVarBytes(r); !ok {
			return rec, nil, fmt.Errorf("%w: header key", ErrCorrupt)
		}
		if _, r, ok = readVarBytes(r); !ok {
			return rec, nil, fmt.Errorf("%w: header value", ErrCorrupt)
		}
	}
	return rec, rest, nil
}

func readVarint(b []byte) (int64, []byte, bool) {
	v, n := binary.Varint(b)
	if n <= 0 {
		return 0, nil, false
	}
	return v, b[n:], true
}

func readVarBytes(b []byte) ([]byte, []byte, bool) {
	n, b, ok := readVarint(b)
	if !ok || n < -1 || n > int64(len(b)) {
		return nil, nil, false
	}
	if n == -1 {
		return nil, b, true
	}
	return b[:n:n], b[n:], true
}

// errTooLarge marks a batch that decompresses beyond maxDecompressed.
var errTooLarge = errors.New("decompressed batch too large")

func decompress(codec uint16, body []byte) ([]byte, error) {
	var out []byte
	var err error
	switch codec {
	case 1:
		var zr *gzip.Reader
		if zr, err = gzip.NewReader(bytes.NewReader(body)); err == nil {
			out, err = readLimited(zr)
		}
	case 2:
		out, err = unsnappy(body)
	case 3:
		out, err = readLimited(lz4.NewReader(bytes.NewReader(body)))
	case 4:
		var zr *zstd.Decoder
		if zr, err = zstd.NewReader(bytes.NewReader(body), zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(maxDecompressed)); err == nil {
			out, err = readLimited(zr)
			zr.Close()
		}
	default:
		return nil, fmt.Errorf("%w: compression codec %d", ErrCorrupt, codec)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: decompress codec %d: %w", ErrCorrupt, codec, err)
	}
	return out, nil
}

func readLimited(r io.Reader) ([]byte, error) {
	out, err := io.ReadAll(io.LimitReader(r, maxDecompressed+1))
	if err != nil {
		return nil, err
	}
	if len(out) > maxDecompressed {
		return nil, errTooLarge
	}
	return out, nil
}

// xerialHeader starts the snappy-java framing the Java client writes.
var xerialHeader = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

// unsnappy decodes raw snappy, or snappy-java's xerial framing (16-byte header, then
// chunks of int32 length + raw snappy block).
func unsnappy(b []byte) ([]byte, error) {
	if !bytes.HasPrefix(b, xerialHeader) {
		return snappyBlock(nil, b)
	}
	if len(b) < 16 {
		return nil, io.ErrUnexpectedEOF
	}
	b = b[16:]
	var out []byte
	for len(b) > 0 {
		if len(b) < 4 {
			return nil, io.ErrUnexpectedEOF
		}
		n := int64(binary.BigEndian.Uint32(b))
		if n > int64(len(b)-4) {
			return nil, io.ErrUnexpectedEOF
		}
		var err error
		if out, err = snappyBlock(out, b[4:4+n]); err != nil {
			return nil, err
		}
		b = b[4+n:]
	}
	return out, nil
}

func snappyBlock(dst, block []byte) ([]byte, error) {
	n, err := s2.DecodedLen(block)
	if err != nil {
		return nil, err
	}
	if n > maxDecompressed-len(dst) {
		return nil, errTooLarge
	}
	out, err := s2.Decode(nil, block)
	if err != nil {
		return nil, err
	}
	return append(dst, out...), nil
}
