package main

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/engine"
)

// oneRecordBatch builds a record batch v2 holding one record with value v.
func oneRecordBatch(v []byte) []byte {
	rec := []byte{0}                   // attributes
	rec = binary.AppendVarint(rec, 0)  // timestamp delta
	rec = binary.AppendVarint(rec, 0)  // offset delta
	rec = binary.AppendVarint(rec, -1) // null key
	rec = binary.AppendVarint(rec, int64(len(v)))
	rec = append(rec, v...)
	rec = binary.AppendVarint(rec, 0) // headers
	b := make([]byte, engine.BatchHeaderSize)
	b = binary.AppendVarint(b, int64(len(rec)))
	b = append(b, rec...)
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12))
	b[16] = 2
	binary.BigEndian.PutUint64(b[43:], ^uint64(0)) // producer id -1
	binary.BigEndian.PutUint16(b[51:], 0xFFFF)
	binary.BigEndian.PutUint32(b[53:], 0xFFFFFFFF)
	binary.BigEndian.PutUint32(b[57:], 1)
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

func TestRun(t *testing.T) {
	dir := t.TempDir()
	m, err := engine.Open(engine.Options{Dirs: []string{dir}, Sync: engine.SyncNone})
	if err != nil {
		t.Fatal(err)
	}
	l, err := m.CreateLog(engine.TopicPartition{Topic: "d", Partition: 0}, engine.DefaultLogConfig())
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if _, err := l.Append(oneRecordBatch([]byte("hello")), engine.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	seg := filepath.Join(dir, "d-0", "00000000000000000000.log")
	// Keep the test's stdout quiet.
	stdout := os.Stdout
	devnull, _ := os.Open(os.DevNull)
	os.Stdout = devnull
	defer func() { os.Stdout = stdout }()
	if code := run([]string{"-print-data-log", seg}); code != 0 {
		t.Fatalf("exit %d on a good segment", code)
	}
	f, _ := os.OpenFile(seg, os.O_RDWR, 0)
	f.WriteAt([]byte{0xFF}, 70)
	f.Close()
	if code := run([]string{seg}); code != 1 {
		t.Fatalf("exit %d on a damaged segment", code)
	}
	if code := run([]string{filepath.Join(dir, "nope.log")}); code != 2 {
		t.Fatalf("exit %d on a missing file", code)
	}
	if code := run(nil); code != 2 {
		t.Fatalf("exit %d without arguments", code)
	}
}

// kmsgBatch encodes a batch with franz-go's kmsg (an independent encoder of
// the record batch v2 layout), CRC-32C over attributes..end.
func kmsgBatch(n int, pid int64, seq int32) []byte {
	var recs []byte
	for i := 0; i < n; i++ {
		r := kmsg.NewRecord()
		r.TimestampDelta64 = int64(i)
		r.OffsetDelta = int32(i)
		r.Key = []byte(fmt.Sprintf("k%d", i))
		r.Value = []byte(fmt.Sprintf("value-%d", i))
		r.Headers = []kmsg.Header{{Key: "h", Value: []byte("v")}}
		body := r.AppendTo(nil)
		// AppendTo writes r.Length first: recompute it from the body.
		r.Length = int32(len(body) - varintLen(r.Length))
		recs = r.AppendTo(recs)
	}
	b := kmsg.NewRecordBatch()
	b.Magic = 2
	b.LastOffsetDelta = int32(n - 1)
	b.FirstTimestamp = 1_700_000_000_000
	b.MaxTimestamp = b.FirstTimestamp + int64(n-1)
	b.ProducerID, b.ProducerEpoch, b.FirstSequence = pid, 0, seq
	if pid < 0 {
		b.ProducerEpoch, b.FirstSequence = -1, -1
	}
	b.NumRecords = int32(n)
	b.Records = recs
	b.Length = int32(49 + len(recs))
	raw := b.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
	return raw
}

func varintLen(v int32) int { return len(binary.AppendVarint(nil, int64(v))) }

// TestClientEncodedBatches stores batches encoded by franz-go, reads them
// back and decodes them with franz-go: offsets and leader epochs are stamped
// where Kafka clients expect them, and the records survive byte for byte.
func TestClientEncodedBatches(t *testing.T) {
	dir := t.TempDir()
	m, err := engine.Open(engine.Options{Dirs: []string{dir}, Sync: engine.SyncNone})
	if err != nil {
		t.Fatal(err)
	}
	l, _ := m.CreateLog(engine.TopicPartition{Topic: "kmsg", Partition: 0}, engine.DefaultLogConfig())
	for i := 0; i < 5; i++ {
		if _, err := l.Append(kmsgBatch(3, 11, int32(3*i)), engine.AppendOptions{LeaderEpoch: 4}); err != nil {
			t.Fatalf("append of a franz-go batch: %v", err)
		}
	}
	got, err := l.ReadCopy(0, 1<<20, l.LogEndOffset(), true, nil)
	if err != nil {
		t.Fatal(err)
	}
	var next int64
	for len(got) > 0 {
		var b kmsg.RecordBatch
		if err := b.ReadFrom(got); err != nil {
			t.Fatal(err)
		}
		if b.FirstOffset != next || b.PartitionLeaderEpoch != 4 || b.NumRecords != 3 {
			t.Fatalf("batch at %d: offset %d epoch %d records %d", next, b.FirstOffset, b.PartitionLeaderEpoch, b.NumRecords)
		}
		if crc := crc32.Checksum(got[21:12+b.Length], crc32.MakeTable(crc32.Castagnoli)); uint32(b.CRC) != crc {
			t.Fatalf("crc %08x, computed %08x", uint32(b.CRC), crc)
		}
		recs := b.Records
		for i := 0; i < 3; i++ {
			var r kmsg.Record
			if err := r.ReadFrom(recs); err != nil {
				t.Fatal(err)
			}
			if string(r.Value) != fmt.Sprintf("value-%d", i) || string(r.Key) != fmt.Sprintf("k%d", i) {
				t.Fatalf("record %d: %q=%q", i, r.Key, r.Value)
			}
			recs = recs[varintLen(r.Length)+int(r.Length):]
		}
		next += 3
		got = got[12+b.Length:]
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	stdout := os.Stdout
	devnull, _ := os.Open(os.DevNull)
	os.Stdout = devnull
	defer func() { os.Stdout = stdout }()
	if code := run([]string{"-print-data-log", filepath.Join(dir, "kmsg-0", "00000000000000000000.log")}); code != 0 {
		t.Fatalf("dumplog exit %d on franz-go batches", code)
	}
}
