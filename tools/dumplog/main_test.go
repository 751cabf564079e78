package main

import (
	"encoding/binary"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"

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
