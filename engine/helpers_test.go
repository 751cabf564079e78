package engine

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"sync/atomic"
	"testing"
	"time"
)

// testBatch describes a batch built by makeBatch.
type testBatch struct {
	records     int
	valueSize   int
	baseTs      int64
	tsStep      int64
	pid         int64
	epoch       int16
	seq         int32
	compression int16 // attribute codec bits only; the payload stays raw
}

// makeBatch encodes an uncompressed record batch v2 (base offset 0).
func makeBatch(tb testBatch) []byte {
	if tb.records == 0 {
		tb.records = 1
	}
	if tb.pid == 0 {
		tb.pid = -1
		tb.epoch = -1
		tb.seq = -1
	}
	b := make([]byte, BatchHeaderSize, BatchHeaderSize+tb.records*(tb.valueSize+16))
	val := make([]byte, tb.valueSize)
	for i := range val {
		val[i] = byte(i)
	}
	var rec []byte
	for i := 0; i < tb.records; i++ {
		rec = rec[:0]
		rec = append(rec, 0)                               // attributes
		rec = binary.AppendVarint(rec, int64(i)*tb.tsStep) // timestamp delta
		rec = binary.AppendVarint(rec, int64(i))           // offset delta
		rec = binary.AppendVarint(rec, -1)                 // null key
		rec = binary.AppendVarint(rec, int64(len(val)))
		rec = append(rec, val...)
		rec = binary.AppendVarint(rec, 0) // headers
		b = binary.AppendVarint(b, int64(len(rec)))
		b = append(b, rec...)
	}
	binary.BigEndian.PutUint32(b[offLength:], uint32(len(b)-logOverhead))
	binary.BigEndian.PutUint32(b[offLeaderEpoch:], 0xFFFFFFFF)
	b[offMagic] = 2
	binary.BigEndian.PutUint16(b[offAttributes:], uint16(tb.compression))
	binary.BigEndian.PutUint32(b[offLastOffsetDelta:], uint32(tb.records-1))
	binary.BigEndian.PutUint64(b[offBaseTimestamp:], uint64(tb.baseTs))
	binary.BigEndian.PutUint64(b[offMaxTimestamp:], uint64(tb.baseTs+int64(tb.records-1)*tb.tsStep))
	binary.BigEndian.PutUint64(b[offProducerID:], uint64(tb.pid))
	binary.BigEndian.PutUint16(b[offProducerEpoch:], uint16(tb.epoch))
	binary.BigEndian.PutUint32(b[offBaseSequence:], uint32(tb.seq))
	binary.BigEndian.PutUint32(b[offNumRecords:], uint32(tb.records))
	binary.BigEndian.PutUint32(b[offCRC:], crc32.Checksum(b[offAttributes:], castagnoli))
	return b
}

// fakeClock is a settable clock for Options.Now.
type fakeClock struct{ ms atomic.Int64 }

func newFakeClock(ms int64) *fakeClock {
	c := &fakeClock{}
	c.ms.Store(ms)
	return c
}
func (c *fakeClock) now() time.Time  { return time.UnixMilli(c.ms.Load()) }
func (c *fakeClock) advance(d int64) { c.ms.Add(d) }

func openTest(t testing.TB, dirs []string, pol SyncPolicy, clk *fakeClock) *Manager {
	t.Helper()
	opts := Options{Dirs: dirs, Sync: pol}
	if clk != nil {
		opts.Now = clk.now
	}
	m, err := Open(opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return m
}

func mustAppend(t testing.TB, l *Log, b []byte) AppendResult {
	t.Helper()
	r, err := l.Append(b, AppendOptions{LeaderEpoch: 1})
	if err != nil {
		t.Fatalf("Append: %v", err)
	}
	return r
}

// readAll reads every batch from the log start to the end with ReadCopy and
// checks each batch's CRC and offsets.
func readAll(t testing.TB, l *Log) []BatchHeader {
	t.Helper()
	var out []BatchHeader
	off := l.LogStartOffset()
	leo := l.LogEndOffset()
	var buf []byte
	for off < leo {
		var err error
		buf, err = l.ReadCopy(off, 1<<20, leo, true, buf[:0])
		if err != nil {
			t.Fatalf("ReadCopy(%d): %v", off, err)
		}
		if len(buf) == 0 {
			t.Fatalf("ReadCopy(%d) returned nothing below LEO %d", off, leo)
		}
		for p := 0; p < len(buf); {
			h, err := ValidateBatch(buf[p:])
			if err != nil {
				t.Fatalf("batch at read offset %d: %v", off, err)
			}
			if h.LastOffset() < off && len(out) > 0 {
				t.Fatalf("batch %d..%d does not reach %d", h.BaseOffset, h.LastOffset(), off)
			}
			out = append(out, h)
			off = h.LastOffset() + 1
			p += int(h.Size())
		}
	}
	return out
}

func isErr(err, target error) bool { return errors.Is(err, target) }

// eventually polls cond until it holds, failing the test after timeout.
func eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, timeout)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
