package engine

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"runtime"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/snappy/xerial"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

func testPayload(n int) []byte {
	var p []byte
	for i := 0; i < n; i++ {
		k := fmt.Sprint("key-", i%13)
		p = encodeRecord(p, kv{key: k, value: valueOf(k, i), ts: int64(i)}, i, 0, i%2)
	}
	return p
}

// TestCodecsInterop decodes payloads written by each library's own
// writer as Kafka's clients write them (gzip; snappy raw and in the Java
// client's xerial framing; an lz4 frame with 4 MiB blocks and a content
// checksum; zstd), and has each library's reader decode what the engine
// writes.
func TestCodecsInterop(t *testing.T) {
	plain := testPayload(500)
	var gz bytes.Buffer
	w := gzip.NewWriter(&gz)
	w.Write(plain)
	w.Close()
	var lz bytes.Buffer
	lw := lz4.NewWriter(&lz)
	lw.Write(plain)
	lw.Close()
	ze, _ := zstd.NewWriter(nil)
	zs := ze.EncodeAll(plain, nil)
	ze.Close()
	c := newCodecs(1 << 20)
	defer c.close()
	for _, tc := range []struct {
		name   string
		codec  int
		data   []byte
		xerial bool
	}{
		{"gzip", codecGzip, gz.Bytes(), false},
		{"snappy", codecSnappy, s2.EncodeSnappy(nil, plain), false},
		{"snappy-xerial", codecSnappy, xerial.Encode(nil, plain), true},
		{"lz4", codecLZ4, lz.Bytes(), false},
		{"zstd", codecZstd, zs, false},
	} {
		got, xf, err := c.decompress(tc.codec, tc.data, nil)
		if err != nil || !bytes.Equal(got, plain) || xf != tc.xerial {
			t.Fatalf("%s: decompress: %v (equal %v, xerial %v)", tc.name, err, bytes.Equal(got, plain), xf)
		}
		enc, err := c.compress(tc.codec, plain, nil, tc.xerial)
		if err != nil {
			t.Fatal(err)
		}
		var back []byte
		switch tc.codec {
		case codecGzip:
			r, err := gzip.NewReader(bytes.NewReader(enc))
			if err != nil {
				t.Fatal(err)
			}
			back, err = io.ReadAll(r)
		case codecSnappy:
			back, err = xerial.Decode(enc)
			if got := bytes.HasPrefix(enc, xerialMagic); got != tc.xerial {
				t.Fatalf("%s: framing kept %v", tc.name, got)
			}
		case codecLZ4:
			// Kafka's Java reader wants independent blocks (FLG bit 5).
			if flg := enc[4]; flg&0x20 == 0 || flg>>6 != 1 {
				t.Fatalf("lz4 FLG %08b", flg)
			}
			back, err = io.ReadAll(lz4.NewReader(bytes.NewReader(enc)))
		case codecZstd:
			d, _ := zstd.NewReader(nil)
			back, err = d.DecodeAll(enc, nil)
			d.Close()
		}
		if err != nil || !bytes.Equal(back, plain) {
			t.Fatalf("%s: the library reads back %d bytes (%v)", tc.name, len(back), err)
		}
	}
}

// TestDecompressionIsBounded: a small payload that would decompress to
// 64 MiB fails at the limit, allocating about the limit, in every codec.
func TestDecompressionIsBounded(t *testing.T) {
	zeros := make([]byte, 64<<20)
	var gz bytes.Buffer
	w := gzip.NewWriter(&gz)
	w.Write(zeros)
	w.Close()
	var lz bytes.Buffer
	lw := lz4.NewWriter(&lz)
	lw.Write(zeros)
	lw.Close()
	ze, _ := zstd.NewWriter(nil)
	zs := ze.EncodeAll(zeros, nil)
	ze.Close()
	xs := xerial.Encode(nil, zeros)
	sn := s2.EncodeSnappy(nil, zeros[:4<<20])
	zeros = nil
	const limit = 1 << 20
	for _, tc := range []struct {
		name  string
		codec int
		data  []byte
	}{{"gzip", codecGzip, gz.Bytes()}, {"lz4", codecLZ4, lz.Bytes()}, {"zstd", codecZstd, zs},
		{"snappy-xerial", codecSnappy, xs}, {"snappy", codecSnappy, sn}} {
		c := newCodecs(limit)
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, _, err := c.decompress(tc.codec, tc.data, nil)
		runtime.ReadMemStats(&after)
		c.close()
		if !isErr(err, ErrInvalidRecord) {
			t.Fatalf("%s: %v, want ErrInvalidRecord", tc.name, err)
		}
		if got := after.TotalAlloc - before.TotalAlloc; got > 24<<20 {
			t.Fatalf("%s: allocated %d bytes for a %d-byte limit", tc.name, got, limit)
		}
	}
}

// TestForEachRecordRejects covers the record checks.
func TestForEachRecordRejects(t *testing.T) {
	good := testPayload(3)
	if err := forEachRecord(good, 3, 2, func(*record) error { return nil }); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		payload    []byte
		count, max int32
	}{
		"too few records":    {good, 4, 3},
		"too many records":   {good, 2, 2},
		"delta past last":    {good, 3, 1},
		"cut short":          {good[:len(good)-1], 3, 2},
		"negative count":     {good, -1, 2},
		"huge count":         {good, 1 << 30, 1 << 30},
		"length past end":    {append(binary.AppendVarint(nil, 200), good...), 1, 0},
		"decreasing offsets": {append(encodeRecord(nil, kv{key: "a", value: []byte("b")}, 1, 0, 0), encodeRecord(nil, kv{key: "a", value: []byte("b")}, 0, 0, 0)...), 2, 1},
	} {
		if err := forEachRecord(tc.payload, tc.count, tc.max, func(*record) error { return nil }); !isErr(err, ErrInvalidRecord) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestAppendRecordShifted moves a record's timestamp delta and keeps the
// rest.
func TestAppendRecordShifted(t *testing.T) {
	p := encodeRecord(nil, kv{key: "k", value: []byte("value"), ts: 100}, 0, 90, 2)
	var r record
	forEachRecord(p, 1, 0, func(x *record) error { r = *x; return nil })
	for _, shift := range []int64{0, 1, -10, 1 << 40, -(1 << 40)} {
		q := appendRecordShifted(nil, &r, shift)
		var got record
		if err := forEachRecord(q, 1, 0, func(x *record) error { got = *x; return nil }); err != nil {
			t.Fatalf("shift %d: %v", shift, err)
		}
		if got.tsDelta != r.tsDelta+shift || string(got.key) != "k" || string(got.value) != "value" {
			t.Fatalf("shift %d: %+v", shift, got)
		}
	}
}

// FuzzDecodeRecords feeds the record decoder (after the codec named by
// the first byte) arbitrary payloads: it must not panic, must stay within
// its decompression limit, and what it decodes must survive being encoded
// again (shifted timestamps, the same codec) and decoded.
func FuzzDecodeRecords(f *testing.F) {
	plain := testPayload(20)
	c := newCodecs(1 << 20)
	for codec := codecNone; codec <= codecZstd; codec++ {
		payload := plain
		if codec != codecNone {
			payload, _ = c.compress(codec, plain, nil, false)
		}
		f.Add(byte(codec), int32(20), int32(19), payload)
	}
	x, _ := c.compress(codecSnappy, plain, nil, true)
	f.Add(byte(codecSnappy), int32(20), int32(25), x)
	f.Add(byte(0), int32(1), int32(0), []byte{0x0e, 0, 0, 0, 2, 'k', 2, 'v', 0})
	f.Fuzz(func(t *testing.T, codec byte, count, last int32, payload []byte) {
		cd := int(codec % 5)
		c := newCodecs(1 << 20)
		defer c.close()
		plain := payload
		xerialFramed := false
		if cd != codecNone {
			var err error
			if plain, xerialFramed, err = c.decompress(cd, payload, nil); err != nil {
				return
			}
			if len(plain) > 1<<20 {
				t.Fatalf("decompressed %d bytes past the limit", len(plain))
			}
		}
		var recs []record
		var again []byte
		shift := int64(count) - int64(last)
		err := forEachRecord(plain, count, last, func(r *record) error {
			recs = append(recs, *r)
			again = appendRecordShifted(again, r, shift)
			return nil
		})
		if err != nil {
			return
		}
		if cd != codecNone {
			enc, err := c.compress(cd, again, nil, xerialFramed)
			if err != nil {
				t.Fatal(err)
			}
			if again, _, err = c.decompress(cd, enc, nil); err != nil {
				t.Fatalf("re-encoded payload does not decode: %v", err)
			}
		}
		i := 0
		err = forEachRecord(again, count, last, func(r *record) error {
			o := recs[i]
			if r.offDelta != o.offDelta || r.tsDelta != o.tsDelta+shift || !bytes.Equal(r.key, o.key) || r.keyNull != o.keyNull ||
				!bytes.Equal(r.value, o.value) || r.valueNull != o.valueNull {
				t.Fatalf("record %d changed: %+v, was %+v", i, r, o)
			}
			i++
			return nil
		})
		if err != nil {
			t.Fatalf("re-encoded records do not decode: %v", err)
		}
	})
}

// TestValidateStoredBatch: compacted shapes pass, a bad CRC or a count
// above the offsets does not.
func TestValidateStoredBatch(t *testing.T) {
	b := keyedBatch(t, []kv{{key: "a", value: []byte("1")}, {key: "b", value: []byte("2")}}, batchOpts{})
	if _, err := ValidateBatch(b); err != nil {
		t.Fatal(err)
	}
	h := parseHeaderUnchecked(b)
	empty := appendEmptyBatch(nil, &h)
	if _, err := validateStoredBatch(empty); err != nil {
		t.Fatalf("empty batch: %v", err)
	}
	if _, err := ValidateBatch(empty); err == nil {
		t.Fatal("an empty batch passes ValidateBatch (a producer's batch)")
	}
	// One record of two offsets.
	one := appendBatch(nil, &h, 0, h.BaseTimestamp, h.MaxTimestamp, 1, encodeRecord(nil, kv{key: "b", value: []byte("2")}, 1, 0, 0))
	if _, err := validateStoredBatch(one); err != nil {
		t.Fatalf("thinned batch: %v", err)
	}
	bad := append([]byte(nil), one...)
	bad[len(bad)-1] ^= 1
	if _, err := validateStoredBatch(bad); !isErr(err, ErrCorruptBatch) {
		t.Fatalf("bad crc: %v", err)
	}
	over := appendBatch(nil, &h, 0, 0, 0, 3, testPayload(3))
	if _, err := validateStoredBatch(over); !isErr(err, ErrInvalidRecord) {
		t.Fatalf("3 records in 2 offsets: %v", err)
	}
}
