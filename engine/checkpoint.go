package engine

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/samsa-broker/samsa/engine/vfs"
)

// Checkpoint file names, as in Kafka.
const (
	recoveryPointFile  = "recovery-point-offset-checkpoint"
	replicationFile    = "replication-offset-checkpoint"
	logStartOffsetFile = "log-start-offset-checkpoint"
	leaderEpochFile    = "leader-epoch-checkpoint"
	cleanShutdownFile  = ".kafka_cleanshutdown"
	cleanerOffsetFile  = "cleaner-offset-checkpoint" // first dirty offset of each cleaned log
)

// Checkpoint files are text, version 0:
//
//	0\n
//	<number of entries>\n
//	<entry>\n ...
//
// where an offsets checkpoint entry is "<topic> <partition> <offset>" and a
// leader-epoch entry is "<epoch> <start offset>".

// writeFileAtomic writes data to path through a temporary file: write, fsync,
// rename, fsync of the directory.
func writeFileAtomic(fsys vfs.FS, path string, data []byte) error {
	if err := writeFileAtomicRaw(fsys, path, data); err != nil {
		return ioFailure("write "+filepath.Base(path), err)
	}
	return nil
}

func writeFileAtomicRaw(fsys vfs.FS, path string, data []byte) error {
	return writeFileRenamed(fsys, path, data, true)
}

// writeFileRenamed writes data to a temporary name and renames it over path;
// with sync, the file is fsynced before the rename and its directory after.
// Without, a later syncfs of the file system makes both durable
// (flusher_syncfs.go).
func writeFileRenamed(fsys vfs.FS, path string, data []byte, sync bool) error {
	tmp := path + tmpSuffix
	f, err := fsys.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if sync {
		if err := f.Sync(); err != nil {
			f.Close()
			return err
		}
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := fsys.Rename(tmp, path); err != nil {
		return err
	}
	if !sync {
		return nil
	}
	return fsys.SyncDir(filepath.Dir(path))
}

func encodeCheckpoint(lines []string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "0\n%d\n", len(lines))
	for _, l := range lines {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// readCheckpoint returns the entry lines of a checkpoint file, split into
// fields, each with want fields. A missing file is (nil, nil); a malformed one
// is an error wrapping ErrCorrupt.
func readCheckpoint(fsys vfs.FS, path string, want int) ([][]string, error) {
	data, err := vfs.ReadFile(fsys, path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	bad := func(what string) error { return fmt.Errorf("%w: checkpoint %s: %s", ErrCorrupt, path, what) }
	if !sc.Scan() || strings.TrimSpace(sc.Text()) != "0" {
		return nil, bad("version")
	}
	if !sc.Scan() {
		return nil, bad("count")
	}
	n, err := strconv.Atoi(strings.TrimSpace(sc.Text()))
	if err != nil || n < 0 || n > len(data) {
		return nil, bad("count")
	}
	out := make([][]string, 0, n)
	for i := 0; i < n; i++ {
		if !sc.Scan() {
			return nil, bad("short")
		}
		f := strings.Fields(sc.Text())
		if len(f) != want {
			return nil, bad("entry")
		}
		out = append(out, f)
	}
	return out, nil
}

// encodeOffsetsCheckpoint encodes "<topic> <partition> <offset>" entries,
// sorted.
func encodeOffsetsCheckpoint(offsets map[TopicPartition]int64) []byte {
	lines := make([]string, 0, len(offsets))
	for tp, off := range offsets {
		lines = append(lines, fmt.Sprintf("%s %d %d", tp.Topic, tp.Partition, off))
	}
	sort.Strings(lines)
	return encodeCheckpoint(lines)
}

// readOffsetsCheckpoint reads a file written by writeOffsetsCheckpoint.
func readOffsetsCheckpoint(fsys vfs.FS, path string) (map[TopicPartition]int64, error) {
	rows, err := readCheckpoint(fsys, path, 3)
	if err != nil {
		return nil, err
	}
	m := make(map[TopicPartition]int64, len(rows))
	for _, r := range rows {
		p, err1 := strconv.ParseInt(r[1], 10, 32)
		off, err2 := strconv.ParseInt(r[2], 10, 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("%w: checkpoint %s: entry %q", ErrCorrupt, path, strings.Join(r, " "))
		}
		m[TopicPartition{Topic: r[0], Partition: int32(p)}] = off
	}
	return m, nil
}

// ckptCache is what the checkpoint writer knows of a directory: its logs, sorted
// as the files list them, and for each the offsets last encoded. A round loads
// four atomics per log and encodes (without formatting the names again, or
// sorting) only the files whose offsets changed: an idle directory costs the
// loads, not an encoding of every partition of every file every round.
type ckptCache struct {
	valid   bool
	gen     uint64 // logDir.logsGen the list was made at
	entries []ckptEntry
	cleaned int     // entries with a first dirty offset (the cleaner checkpoint's)
	changed [4]bool // per file (recovery point, replication, log start, cleaner): to encode
	buf     []byte
}

type ckptEntry struct {
	l      *Log
	prefix string   // "<topic> <partition> "
	off    [4]int64 // recovery point, HW, log start, first dirty (-1: none), as last loaded
}

// reset lists logs again (a log was created or deleted): every file is encoded.
func (c *ckptCache) reset(logs []*Log, gen uint64) {
	c.entries = c.entries[:0]
	for _, l := range logs {
		c.entries = append(c.entries, ckptEntry{l: l, prefix: l.tp.Topic + " " + strconv.FormatInt(int64(l.tp.Partition), 10) + " ",
			off: [4]int64{math.MinInt64, math.MinInt64, math.MinInt64, math.MinInt64}})
	}
	// As encodeOffsetsCheckpoint sorts its lines: topic names hold no space, so
	// the prefixes order the lines.
	sort.Slice(c.entries, func(i, j int) bool { return c.entries[i].prefix < c.entries[j].prefix })
	c.valid, c.gen = true, gen
	c.changed = [4]bool{true, true, true, true}
}

// load reads every log's offsets, marking the files whose entries changed.
func (c *ckptCache) load() {
	c.cleaned = 0
	for i := range c.entries {
		e := &c.entries[i]
		l := e.l
		now := [4]int64{l.recoveryPoint.Load(), l.hw.Load(), l.logStart.Load(), l.firstDirty.Load()}
		if now[3] < 0 {
			now[3] = -1
		} else {
			c.cleaned++
		}
		for k := range now {
			if now[k] != e.off[k] {
				e.off[k] = now[k]
				c.changed[k] = true
			}
		}
	}
}

// encode is file k's content (as encodeOffsetsCheckpoint would write it).
func (c *ckptCache) encode(k int) []byte {
	n := len(c.entries)
	if k == 3 {
		n = c.cleaned
	}
	b := append(c.buf[:0], "0\n"...)
	b = strconv.AppendInt(b, int64(n), 10)
	b = append(b, '\n')
	for i := range c.entries {
		e := &c.entries[i]
		if k == 3 && e.off[3] < 0 {
			continue
		}
		b = append(b, e.prefix...)
		b = strconv.AppendInt(b, e.off[k], 10)
		b = append(b, '\n')
	}
	c.buf = b
	return b
}

// cleanShutdownMarker is the content of the clean-shutdown marker, Kafka's
// CleanShutdownFileHandler's: {"version":0,"brokerEpoch":N}. A marker written before
// it held an epoch is empty, and reads as none.
type cleanShutdownMarker struct {
	Version     int   `json:"version"`
	BrokerEpoch int64 `json:"brokerEpoch"`
}

// markerContent is the marker for broker epoch epoch (at most 0: none, -1 as Kafka
// writes it).
func markerContent(epoch int64) []byte {
	if epoch <= 0 {
		epoch = -1
	}
	b, _ := json.Marshal(cleanShutdownMarker{BrokerEpoch: epoch})
	return b
}

// readMarkerEpoch returns the broker epoch a marker records, or -1.
func readMarkerEpoch(fsys vfs.FS, path string) int64 {
	data, err := vfs.ReadFile(fsys, path)
	if err != nil || len(data) == 0 {
		return -1
	}
	var mk cleanShutdownMarker
	if err := json.Unmarshal(data, &mk); err != nil || mk.Version != 0 || mk.BrokerEpoch <= 0 {
		return -1
	}
	return mk.BrokerEpoch
}

// sameEpoch is the epoch every directory recorded, or -1 (none, or they differ).
func sameEpoch(epochs []int64) int64 {
	if len(epochs) == 0 {
		return -1
	}
	for _, e := range epochs {
		if e <= 0 || e != epochs[0] {
			return -1
		}
	}
	return epochs[0]
}
