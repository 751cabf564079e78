package engine

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/snappy/xerial"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// Codec ids of the batch attributes (bits 0-2), as Kafka numbers them.
const (
	codecNone   = 0
	codecGzip   = 1
	codecSnappy = 2
	codecLZ4    = 3
	codecZstd   = 4
)

// errDecompressedTooLarge is a payload that decompresses past the codec
// set's limit.
var errDecompressedTooLarge = fmt.Errorf("%w: records decompress to more than the limit", ErrInvalidRecord)

// xerialMagic opens a snappy payload in the framing of the Java client
// (snappy-java's SnappyOutputStream): the magic, then version 1 and
// compatible version 1, then blocks of [uint32 length][snappy block].
var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

const xerialHeaderSize = 16

// codecs holds one goroutine's decoders and encoders for the four codecs
// Kafka has, reused from batch to batch (the cleaner owns one per thread).
// The first use of each codec allocates its state.
//
// Decompression is bounded: a payload whose records would take more than
// limit bytes fails with an error wrapping ErrInvalidRecord, and nothing
// larger than limit (plus the codec's own block buffers: at most 4 MiB for
// lz4, the zstd window, bounded the same way) is allocated for it.
type codecs struct {
	limit int

	gzr  *gzip.Reader
	gzw  *gzip.Writer
	lzr  *lz4.Reader
	lzw  *lz4.Writer
	zd   *zstd.Decoder
	ze   *zstd.Encoder
	src  bytes.Reader
	out  bytes.Buffer
	snap []byte // snappy scratch
}

func newCodecs(limit int) *codecs { return &codecs{limit: limit} }

// close releases the zstd decoder's and encoder's goroutines and memory.
func (c *codecs) close() {
	if c.zd != nil {
		c.zd.Close()
		c.zd = nil
	}
	if c.ze != nil {
		c.ze.Close()
		c.ze = nil
	}
}

// decompress appends to dst[:0] the records payload src compressed with
// codec (1..4). xerialFramed reports, for snappy, whether the payload was
// in the Java client's framing (the re-compression keeps it).
func (c *codecs) decompress(codec int, src, dst []byte) (out []byte, xerialFramed bool, err error) {
	dst = dst[:0]
	switch codec {
	case codecGzip:
		c.src.Reset(src)
		if c.gzr == nil {
			r, err := gzip.NewReader(&c.src)
			if err != nil {
				return dst, false, codecError("gzip", err)
			}
			c.gzr = r
		} else if err := c.gzr.Reset(&c.src); err != nil {
			return dst, false, codecError("gzip", err)
		}
		out, err = readLimited(c.gzr, dst, c.limit)
		return out, false, codecError("gzip", err)
	case codecSnappy:
		if len(src) >= len(xerialMagic) && bytes.Equal(src[:len(xerialMagic)], xerialMagic) {
			out, err = c.xerialDecode(src, dst)
			return out, true, codecError("snappy", err)
		}
		out, err = c.snappyBlock(src, dst)
		return out, false, codecError("snappy", err)
	case codecLZ4:
		c.src.Reset(src)
		if c.lzr == nil {
			c.lzr = lz4.NewReader(&c.src)
			if err := c.lzr.Apply(lz4.ConcurrencyOption(1)); err != nil {
				return dst, false, codecError("lz4", err)
			}
		} else {
			c.lzr.Reset(&c.src)
		}
		out, err = readLimited(c.lzr, dst, c.limit)
		return out, false, codecError("lz4", err)
	case codecZstd:
		if c.zd == nil {
			// The window is bounded too: a frame may declare one far larger
			// than its content.
			d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true),
				zstd.WithDecoderMaxMemory(uint64(max(c.limit, 1<<10))), zstd.WithDecoderMaxWindow(uint64(max(c.limit, 1<<20))))
			if err != nil {
				return dst, false, codecError("zstd", err)
			}
			c.zd = d
		}
		out, err = c.zd.DecodeAll(src, dst)
		if err == nil && len(out) > c.limit {
			err = errDecompressedTooLarge
		}
		return out, false, codecError("zstd", err)
	}
	return dst, false, fmt.Errorf("%w: compression codec %d", ErrInvalidRecord, codec)
}

func codecError(name string, err error) error {
	if err == nil || errors.Is(err, ErrInvalidRecord) {
		return err
	}
	return fmt.Errorf("%w: %s: %w", ErrInvalidRecord, name, err)
}

// readLimited reads r to its end, appending to dst, failing past limit bytes.
func readLimited(r io.Reader, dst []byte, limit int) ([]byte, error) {
	for {
		if len(dst) == cap(dst) {
			if len(dst) > limit {
				return dst, errDecompressedTooLarge
			}
			n := min(max(2*cap(dst), 4096), limit+1)
			if n <= cap(dst) {
				n = cap(dst) + 1
			}
			nd := make([]byte, len(dst), n)
			copy(nd, dst)
			dst = nd
		}
		n, err := r.Read(dst[len(dst):cap(dst)])
		dst = dst[:len(dst)+n]
		if len(dst) > limit {
			return dst, errDecompressedTooLarge
		}
		if errors.Is(err, io.EOF) {
			return dst, nil
		}
		if err != nil {
			return dst, err
		}
	}
}

// snappyBlock appends the decoded snappy block src to dst.
func (c *codecs) snappyBlock(src, dst []byte) ([]byte, error) {
	n, err := snappy.DecodedLen(src)
	if err != nil {
		return dst, err
	}
	if n < 0 || n > c.limit-len(dst) {
		return dst, errDecompressedTooLarge
	}
	if cap(dst)-len(dst) < n {
		nd := make([]byte, len(dst), len(dst)+n)
		copy(nd, dst)
		dst = nd
	}
	got, err := snappy.Decode(dst[len(dst):len(dst)+n], src)
	if err != nil {
		return dst, err
	}
	if len(got) != n {
		return dst, fmt.Errorf("snappy block decodes to %d bytes, header says %d", len(got), n)
	}
	return dst[:len(dst)+n], nil
}

// xerialDecode appends the blocks of a xerial-framed payload to dst.
func (c *codecs) xerialDecode(src, dst []byte) ([]byte, error) {
	if len(src) < xerialHeaderSize {
		return dst, errors.New("xerial header cut short")
	}
	for p := xerialHeaderSize; p < len(src); {
		if len(src)-p < 4 {
			return dst, errors.New("xerial block length cut short")
		}
		n := int64(binary.BigEndian.Uint32(src[p:]))
		p += 4
		if n > int64(len(src)-p) {
			return dst, errors.New("xerial block runs past the payload")
		}
		var err error
		if dst, err = c.snappyBlock(src[p:p+int(n)], dst); err != nil {
			return dst, err
		}
		p += int(n)
	}
	return dst, nil
}

// compress appends to dst the payload src compressed with codec, in the
// framing the decompression reported (xerialFramed, for snappy). The lz4
// frame has independent 64 KiB blocks, as Kafka's own writer; gzip and
// zstd use their default levels.
func (c *codecs) compress(codec int, src, dst []byte, xerialFramed bool) ([]byte, error) {
	switch codec {
	case codecGzip:
		c.out.Reset()
		if c.gzw == nil {
			c.gzw = gzip.NewWriter(&c.out)
		} else {
			c.gzw.Reset(&c.out)
		}
		if _, err := c.gzw.Write(src); err != nil {
			return dst, err
		}
		if err := c.gzw.Close(); err != nil {
			return dst, err
		}
		return append(dst, c.out.Bytes()...), nil
	case codecSnappy:
		if xerialFramed {
			// xerial.Encode writes the header only into an empty dst.
			c.snap = xerial.Encode(c.snap[:0], src)
		} else {
			c.snap = snappy.Encode(c.snap[:cap(c.snap)], src)
		}
		return append(dst, c.snap...), nil
	case codecLZ4:
		c.out.Reset()
		if c.lzw == nil {
			c.lzw = lz4.NewWriter(&c.out)
			if err := c.lzw.Apply(lz4.BlockSizeOption(lz4.Block64Kb), lz4.ConcurrencyOption(1)); err != nil {
				return dst, err
			}
		} else {
			c.lzw.Reset(&c.out)
		}
		if _, err := c.lzw.Write(src); err != nil {
			return dst, err
		}
		if err := c.lzw.Close(); err != nil {
			return dst, err
		}
		return append(dst, c.out.Bytes()...), nil
	case codecZstd:
		if c.ze == nil {
			e, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithZeroFrames(true))
			if err != nil {
				return dst, err
			}
			c.ze = e
		}
		return c.ze.EncodeAll(src, dst), nil
	}
	return dst, fmt.Errorf("%w: compression codec %d", ErrInvalidRecord, codec)
}
