package engine

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
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
	tmp := path + tmpSuffix
	f, err := fsys.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := fsys.Rename(tmp, path); err != nil {
		return err
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
