package engine

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDumpSegment(t *testing.T) {
	dir := t.TempDir()
	m := openTest(t, []string{dir}, SyncNone, nil)
	l, _ := m.CreateLog(TopicPartition{"dump", 0}, smallConfig())
	for i := 0; i < 40; i++ {
		mustAppend(t, l, makeBatch(testBatch{records: 2, valueSize: 100, baseTs: int64(100 * i), tsStep: 1, pid: 3, epoch: 0, seq: int32(2 * i)}))
	}
	m.Close()
	files := segmentFiles(t, l.Dir())
	seg := files[0]
	base := strings.TrimSuffix(seg, logSuffix)

	var out bytes.Buffer
	if err := DumpSegment(&out, seg, DumpOptions{Records: true}); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	s := out.String()
	for _, want := range []string{
		"Starting offset: 0",
		"baseOffset: 0 lastOffset: 1 count: 2 baseSequence: 0 lastSequence: 1 producerId: 3 producerEpoch: 0 partitionLeaderEpoch: 1",
		"compresscodec: none",
		"isvalid: true",
		"| offset: 1 CreateTime: 1 keySize: -1 valueSize: 100",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("log dump lacks %q:\n%s", want, s)
		}
	}
	for _, suf := range []string{indexSuffix, timeIndexSuffix} {
		out.Reset()
		if err := DumpSegment(&out, base+suf, DumpOptions{}); err != nil {
			t.Fatalf("%s: %v\n%s", suf, err, out.String())
		}
		if !strings.Contains(out.String(), "offset: ") || strings.Contains(out.String(), " 0 entries") {
			t.Errorf("%s dump:\n%s", suf, out.String())
		}
	}
	snaps, _ := filepath.Glob(filepath.Join(l.Dir(), "*"+snapshotSuffix))
	if len(snaps) == 0 {
		t.Fatal("no snapshot")
	}
	out.Reset()
	if err := DumpSegment(&out, snaps[len(snaps)-1], DumpOptions{}); err != nil || !strings.Contains(out.String(), "producerId: 3 producerEpoch: 0") {
		t.Fatalf("snapshot dump %v:\n%s", err, out.String())
	}

	// Damage: a flipped byte in the log, a wrong index entry.
	data, _ := os.ReadFile(seg)
	data[200] ^= 1
	os.WriteFile(seg, append(data, 1, 2, 3), 0o644)
	out.Reset()
	if err := DumpSegment(&out, seg, DumpOptions{}); !isErr(err, ErrDumpMismatch) || !isErr(err, ErrCorrupt) {
		t.Fatalf("damaged log: %v", err)
	}
	if !strings.Contains(out.String(), "isvalid: false") || !strings.Contains(out.String(), "Found 3 invalid bytes") {
		t.Fatalf("damaged log dump:\n%s", out.String())
	}
	idx, _ := os.ReadFile(base + indexSuffix)
	idx[7]++
	os.WriteFile(base+indexSuffix, idx, 0o644)
	out.Reset()
	if err := DumpSegment(&out, base+indexSuffix, DumpOptions{IndexSanityOnly: true}); !isErr(err, ErrDumpMismatch) ||
		!strings.Contains(out.String(), "is not the start of a batch") {
		t.Fatalf("damaged index: %v\n%s", err, out.String())
	}
	if err := DumpSegment(&out, filepath.Join(dir, recoveryPointFile), DumpOptions{}); !isErr(err, ErrInvalidConfig) {
		t.Fatalf("checkpoint file: %v", err)
	}
}
