// Package damage damages a stopped node's partition files from outside, as a failing
// disk or an operator would, and checks what the cluster then serves: the storage
// half of the fault harness (tools/chaos). It imports no broker package: it reads
// the segment files in Kafka's on-disk layout (<log dir>/<topic>-<partition>/
// <20-digit base offset>.log holding record batches of magic 2, with .index and
// .timeindex beside them) and talks to the nodes over the Kafka wire.
//
// The damages (Kind):
//
//	flip-sealed   one byte flipped inside the records of a batch in the middle of the
//	              first (sealed) segment: the batch fails its CRC
//	flip-tail     one byte flipped inside the records of the last batch of the active
//	              segment, after a clean shutdown
//	torn-tail     the active segment cut in the middle of its last batch (a write the
//	              disk did not finish)
//	delete-index  every .index file of the partition removed
//
// A scenario (Run) starts a cluster, writes acknowledged records, stops the target
// node cleanly (SIGTERM), damages its files, restarts it, makes it the partition's
// leader (in a cluster: the other replica is shut down, so the damaged replica is the
// only one left in the ISR), and reads the partition from its start with raw Fetch
// requests, checking every batch's CRC itself (so that a batch the broker serves
// corrupt is told from one it refuses), then with a franz-go consumer (what a user's
// client sees: an error, or a stall). In a cluster it then restarts the other replica
// and reads again: every acknowledged record must still be readable.
package damage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Kind is a damage.
type Kind string

// The damages.
const (
	FlipSealed  Kind = "flip-sealed"
	FlipTail    Kind = "flip-tail"
	TornTail    Kind = "torn-tail"
	DeleteIndex Kind = "delete-index"
)

// Kinds lists every damage.
var Kinds = []Kind{FlipSealed, FlipTail, TornTail, DeleteIndex}

// ParseKinds reads a comma-separated list ("all": every kind).
func ParseKinds(s string) ([]Kind, error) {
	var out []Kind
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		switch {
		case f == "":
		case f == "all":
			out = append(out, Kinds...)
		default:
			k := Kind(f)
			found := false
			for _, x := range Kinds {
				found = found || x == k
			}
			if !found {
				return nil, fmt.Errorf("damage: unknown kind %q (known: flip-sealed, flip-tail, torn-tail, delete-index)", f)
			}
			out = append(out, k)
		}
	}
	return out, nil
}

// Segment is one .log file of a partition directory.
type Segment struct {
	Base int64 // the base offset its name gives
	Path string
	Size int64
}

// Batch is one record batch's place in a segment file.
type Batch struct {
	Pos        int64 // file position of its first byte
	Size       int64 // 12-byte prefix (base offset, length) included
	BaseOffset int64
	LastOffset int64
	CRCOK      bool
}

// Batch layout (magic 2): baseOffset int64, batchLength int32, partitionLeaderEpoch
// int32, magic int8, crc uint32 (CRC-32C of what follows it), attributes int16,
// lastOffsetDelta int32, ... records from byte 61 on.
const (
	prefixLen    = 12
	headerLen    = 61
	crcAt        = 17
	crcFrom      = 21
	lastDeltaAt  = 23
	magicAt      = 16
	maxBatchSize = 64 << 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// PartitionDir is the directory of topic-partition under logDir.
func PartitionDir(logDir, topic string, partition int32) string {
	return filepath.Join(logDir, fmt.Sprintf("%s-%d", topic, partition))
}

// Segments lists the .log files of a partition directory by base offset.
func Segments(dir string) ([]Segment, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("damage: %w", err)
	}
	var out []Segment
	for _, e := range ents {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".log") || len(name) != 24 {
			continue
		}
		base, err := strconv.ParseInt(strings.TrimSuffix(name, ".log"), 10, 64)
		if err != nil {
			continue
		}
		info, err := e.Info()
		if err != nil {
			return nil, fmt.Errorf("damage: %w", err)
		}
		out = append(out, Segment{Base: base, Path: filepath.Join(dir, name), Size: info.Size()})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Base < out[j].Base })
	if len(out) == 0 {
		return nil, fmt.Errorf("damage: no segment in %s", dir)
	}
	return out, nil
}

// Batches reads a segment file's batches, stopping at the first framing that does
// not hold (a torn tail, or preallocated zeros).
func Batches(path string) ([]Batch, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("damage: %w", err)
	}
	var out []Batch
	for pos := 0; pos+headerLen <= len(b); {
		length := int64(int32(binary.BigEndian.Uint32(b[pos+8:])))
		size := prefixLen + length
		if length < headerLen-prefixLen || size > maxBatchSize || int64(pos)+size > int64(len(b)) || b[pos+magicAt] != 2 {
			break
		}
		bt := b[pos : int64(pos)+size]
		base := int64(binary.BigEndian.Uint64(bt))
		out = append(out, Batch{Pos: int64(pos), Size: size, BaseOffset: base,
			LastOffset: base + int64(int32(binary.BigEndian.Uint32(bt[lastDeltaAt:]))),
			CRCOK:      crc32.Checksum(bt[crcFrom:], castagnoli) == binary.BigEndian.Uint32(bt[crcAt:])})
		pos += int(size)
	}
	return out, nil
}

// Applied says what a damage did to the files.
type Applied struct {
	Kind   Kind
	Detail string
	// First and Last are the offsets of the damaged batch (flips, tear); -1 for
	// delete-index.
	First, Last int64
}

// Apply damages the partition directory dir (its node must be stopped).
func Apply(dir string, kind Kind) (Applied, error) {
	segs, err := Segments(dir)
	if err != nil {
		return Applied{}, err
	}
	a := Applied{Kind: kind, First: -1, Last: -1}
	active := segs[len(segs)-1]
	switch kind {
	case FlipSealed, FlipTail:
		seg := active
		if kind == FlipSealed {
			if len(segs) < 2 {
				return a, fmt.Errorf("damage: %s: one segment only in %s (no sealed segment)", kind, dir)
			}
			seg = segs[0]
		}
		bs, err := Batches(seg.Path)
		if err != nil {
			return a, err
		}
		if len(bs) == 0 {
			return a, fmt.Errorf("damage: no batch in %s", seg.Path)
		}
		bt := bs[len(bs)-1]
		if kind == FlipSealed {
			bt = bs[len(bs)/2]
		}
		// A byte of the records, past the header: the CRC no longer matches and the
		// framing still holds.
		at := bt.Pos + headerLen + (bt.Size-headerLen)/2
		if err := flipByte(seg.Path, at); err != nil {
			return a, err
		}
		a.First, a.Last = bt.BaseOffset, bt.LastOffset
		a.Detail = fmt.Sprintf("flipped the byte at %d of %s (batch %d..%d at %d, %d bytes)", at, filepath.Base(seg.Path), bt.BaseOffset, bt.LastOffset, bt.Pos, bt.Size)
	case TornTail:
		bs, err := Batches(active.Path)
		if err != nil {
			return a, err
		}
		if len(bs) == 0 {
			return a, fmt.Errorf("damage: no batch in %s", active.Path)
		}
		bt := bs[len(bs)-1]
		cut := bt.Pos + bt.Size/2
		if err := os.Truncate(active.Path, cut); err != nil {
			return a, fmt.Errorf("damage: %w", err)
		}
		a.First, a.Last = bt.BaseOffset, bt.LastOffset
		a.Detail = fmt.Sprintf("cut %s to %d bytes, in the middle of its last batch %d..%d (at %d, %d bytes; the file had %d)",
			filepath.Base(active.Path), cut, bt.BaseOffset, bt.LastOffset, bt.Pos, bt.Size, active.Size)
	case DeleteIndex:
		var gone []string
		for _, s := range segs {
			idx := strings.TrimSuffix(s.Path, ".log") + ".index"
			if err := os.Remove(idx); err == nil {
				gone = append(gone, filepath.Base(idx))
			} else if !errors.Is(err, os.ErrNotExist) {
				return a, fmt.Errorf("damage: %w", err)
			}
		}
		if len(gone) == 0 {
			return a, fmt.Errorf("damage: no .index file in %s", dir)
		}
		a.Detail = fmt.Sprintf("removed %d .index file(s): %s", len(gone), strings.Join(gone, " "))
	default:
		return a, fmt.Errorf("damage: unknown kind %q", kind)
	}
	return a, nil
}

func flipByte(path string, at int64) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("damage: %w", err)
	}
	defer f.Close()
	var b [1]byte
	if _, err := f.ReadAt(b[:], at); err != nil {
		return fmt.Errorf("damage: %w", err)
	}
	b[0] ^= 0xff
	if _, err := f.WriteAt(b[:], at); err != nil {
		return fmt.Errorf("damage: %w", err)
	}
	return f.Sync()
}
