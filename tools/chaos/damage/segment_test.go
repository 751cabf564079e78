package damage

import (
	"encoding/binary"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// batch builds a magic-2 batch of count records' worth of payload at base, with its
// CRC-32C right.
func batch(base int64, count int, payload int) []byte {
	b := make([]byte, headerLen+payload)
	binary.BigEndian.PutUint64(b, uint64(base))
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-prefixLen))
	b[magicAt] = 2
	binary.BigEndian.PutUint32(b[lastDeltaAt:], uint32(count-1))
	for i := headerLen; i < len(b); i++ {
		b[i] = byte(i)
	}
	binary.BigEndian.PutUint32(b[crcAt:], crc32.Checksum(b[crcFrom:], castagnoli))
	return b
}

// partition writes two segments of three batches each (offsets 0..29) and their
// indexes, and returns the directory.
func partition(t *testing.T) string {
	dir := filepath.Join(t.TempDir(), "damage-0")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, base := range []int64{0, 15} {
		var seg []byte
		for i := int64(0); i < 3; i++ {
			seg = append(seg, batch(base+5*i, 5, 200)...)
		}
		name := filepath.Join(dir, strings.Repeat("0", 18)+map[int64]string{0: "00", 15: "15"}[base])
		if err := os.WriteFile(name+".log", append(seg, make([]byte, 100)...), 0o644); err != nil { // zeros: preallocation
			t.Fatal(err)
		}
		if err := os.WriteFile(name+".index", make([]byte, 16), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestBatchesAndApply(t *testing.T) {
	dir := partition(t)
	segs, err := Segments(dir)
	if err != nil || len(segs) != 2 || segs[1].Base != 15 {
		t.Fatalf("segments %+v %v", segs, err)
	}
	bs, err := Batches(segs[1].Path)
	if err != nil || len(bs) != 3 || bs[2].BaseOffset != 25 || bs[2].LastOffset != 29 || !bs[2].CRCOK {
		t.Fatalf("batches %+v %v", bs, err)
	}

	a, err := Apply(dir, FlipSealed)
	if err != nil || a.First != 5 || a.Last != 9 {
		t.Fatalf("flip-sealed %+v %v", a, err)
	}
	bs, _ = Batches(segs[0].Path)
	if len(bs) != 3 || bs[1].CRCOK || !bs[0].CRCOK || !bs[2].CRCOK {
		t.Errorf("after flip-sealed %+v", bs)
	}
	raw, _ := os.ReadFile(segs[0].Path)
	if at, why := firstBadBatch(raw); at != int(bs[1].Pos) || !strings.Contains(why, "5..9") {
		t.Errorf("firstBadBatch %d %q", at, why)
	}

	if a, err = Apply(dir, FlipTail); err != nil || a.First != 25 {
		t.Fatalf("flip-tail %+v %v", a, err)
	}
	bs, _ = Batches(segs[1].Path)
	if bs[2].CRCOK || !bs[1].CRCOK {
		t.Errorf("after flip-tail %+v", bs)
	}

	if a, err = Apply(dir, TornTail); err != nil || a.First != 25 {
		t.Fatalf("torn-tail %+v %v", a, err)
	}
	bs, _ = Batches(segs[1].Path)
	if len(bs) != 2 {
		t.Errorf("after torn-tail: %d batches", len(bs))
	}

	if a, err = Apply(dir, DeleteIndex); err != nil || !strings.Contains(a.Detail, "2 .index") {
		t.Fatalf("delete-index %+v %v", a, err)
	}
	if _, err := Apply(dir, DeleteIndex); err == nil {
		t.Error("a second delete-index found an index")
	}
}

func TestParseKinds(t *testing.T) {
	if ks, err := ParseKinds("all"); err != nil || len(ks) != 4 {
		t.Errorf("all: %v %v", ks, err)
	}
	if _, err := ParseKinds("flip-tail,nope"); err == nil {
		t.Error("nope accepted")
	}
}

func TestFirstBadBatchPartialTail(t *testing.T) {
	b := append(batch(0, 2, 50), batch(2, 2, 50)[:40]...)
	if at, why := firstBadBatch(b); at != len(b) || why != "" {
		t.Errorf("a partial last batch: %d %q", at, why)
	}
}
