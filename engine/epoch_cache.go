package engine

import (
	"fmt"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/samsa-broker/samsa/engine/vfs"
)

// epochEntry is the first offset written in a leader epoch.
type epochEntry struct {
	epoch int32
	start int64
}

// epochCache is the leader-epoch cache of one partition: epoch → start
// offset, persisted in leader-epoch-checkpoint. Entries increase strictly in
// both fields. Safe for concurrent use.
type epochCache struct {
	mu      sync.RWMutex
	fs      vfs.FS
	path    string
	entries []epochEntry
	// dirty: entries changed since the file was written (assignLater).
	dirty bool
}

func loadEpochCache(fsys vfs.FS, dir string) (*epochCache, error) {
	c := &epochCache{fs: fsys, path: filepath.Join(dir, leaderEpochFile)}
	rows, err := readCheckpoint(fsys, c.path, 2)
	if err != nil {
		return c, err
	}
	for _, r := range rows {
		e, err1 := strconv.ParseInt(r[0], 10, 32)
		s, err2 := strconv.ParseInt(r[1], 10, 64)
		if err1 != nil || err2 != nil || e < 0 || s < 0 {
			c.entries = nil
			return c, fmt.Errorf("%w: %s", ErrCorrupt, c.path)
		}
		c.appendMonotonicLocked(epochEntry{int32(e), s})
	}
	return c, nil
}

// appendMonotonicLocked drops entries that conflict with e, then appends it.
func (c *epochCache) appendMonotonicLocked(e epochEntry) {
	n := len(c.entries)
	for n > 0 && (c.entries[n-1].epoch >= e.epoch || c.entries[n-1].start >= e.start) {
		n--
	}
	c.entries = append(c.entries[:n], e)
}

func (c *epochCache) persistLocked() error {
	if err := writeFileAtomic(c.fs, c.path, c.encodeLocked()); err != nil {
		return err
	}
	c.dirty = false
	return nil
}

// assign records that epoch starts at start. As in Kafka it is a no-op when
// epoch is the latest epoch and start is not lower than its start offset;
// entries with a higher-or-equal epoch or start offset are removed.
func (c *epochCache) assign(epoch int32, start int64) (bool, error) {
	if epoch < 0 {
		return false, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := len(c.entries); n > 0 {
		last := c.entries[n-1]
		if last.epoch == epoch && start >= last.start {
			return false, nil
		}
	}
	c.appendMonotonicLocked(epochEntry{epoch, start})
	return true, c.persistLocked()
}

// assignLater is assign without the write: the entry is kept in memory and
// the file is written by persistIfDirty, which the log's next flush (before
// it moves the recovery point past the entry's offset) and a clean close
// call. The append path uses it, so that the first record of a new leader
// epoch costs no fsync on the request path, once per partition: 10,000
// partitions were 20,000 fsyncs in the first produce to each (Kafka 3.7 moved
// the same flush off its request path, KAFKA-15046). Should the process die
// before the write, recovery assigns the epochs again from the batch headers
// it scans (loadLog).
func (c *epochCache) assignLater(epoch int32, start int64) bool {
	if epoch < 0 {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := len(c.entries); n > 0 {
		last := c.entries[n-1]
		if last.epoch == epoch && start >= last.start {
			return false
		}
	}
	c.appendMonotonicLocked(epochEntry{epoch, start})
	c.dirty = true
	return true
}

// persistIfDirty writes the file (atomically, synced) when assignLater
// changed the entries since the last write.
func (c *epochCache) persistIfDirty() error {
	_, err := c.persistIfDirtyCounted()
	return err
}

// persistIfDirtyCounted is persistIfDirty; wrote says whether it wrote the file.
func (c *epochCache) persistIfDirtyCounted() (wrote bool, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.dirty {
		return false, nil
	}
	return true, c.persistLocked()
}

// encodeLocked is the checkpoint file's content.
func (c *epochCache) encodeLocked() []byte {
	lines := make([]string, len(c.entries))
	for i, e := range c.entries {
		lines[i] = fmt.Sprintf("%d %d", e.epoch, e.start)
	}
	return encodeCheckpoint(lines)
}

// writeUnsynced is persistIfDirty for a syncfs round: the file is written and
// renamed into place with no fsync, the round's syncfs making it durable
// (flusher_syncfs.go). Should the file reach the disk before the segments it
// speaks of, recovery drops its entries past the log end, as for any crash.
func (c *epochCache) writeUnsynced() (wrote bool, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.dirty {
		return false, nil
	}
	if err := writeFileRenamed(c.fs, c.path, c.encodeLocked(), false); err != nil {
		return true, ioFailure("write "+filepath.Base(c.path), err)
	}
	c.dirty = false
	return true, nil
}

// setDirty makes the next flush write the checkpoint again (its unsynced
// write was not made durable).
func (c *epochCache) setDirty() {
	c.mu.Lock()
	c.dirty = true
	c.mu.Unlock()
}

// latest is the latest epoch, -1 if none.
func (c *epochCache) latest() int32 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if len(c.entries) == 0 {
		return -1
	}
	return c.entries[len(c.entries)-1].epoch
}

// endOffsetFor answers OffsetForLeaderEpoch as Kafka's LeaderEpochFileCache.
func (c *epochCache) endOffsetFor(epoch int32, leo int64) (int32, int64) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	n := len(c.entries)
	if epoch < 0 || n == 0 {
		return -1, -1
	}
	if c.entries[n-1].epoch == epoch {
		return epoch, leo
	}
	// The first entry with a higher epoch.
	hi := -1
	for i, e := range c.entries {
		if e.epoch > epoch {
			hi = i
			break
		}
	}
	if hi < 0 {
		return -1, -1
	}
	if hi == 0 {
		return epoch, c.entries[0].start
	}
	return c.entries[hi-1].epoch, c.entries[hi].start
}

// truncateFromEnd removes entries starting at or after offset.
func (c *epochCache) truncateFromEnd(offset int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(c.entries)
	for n > 0 && c.entries[n-1].start >= offset {
		n--
	}
	if n == len(c.entries) {
		return nil
	}
	c.entries = c.entries[:n]
	return c.persistLocked()
}

// truncateFromStart drops entries wholly below offset; the last of them is
// kept with its start moved up to offset.
func (c *epochCache) truncateFromStart(offset int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := 0
	for i < len(c.entries) && c.entries[i].start <= offset {
		i++
	}
	if i == 0 || (i == 1 && c.entries[0].start == offset) {
		return nil
	}
	kept := c.entries[i-1]
	kept.start = offset
	c.entries = append([]epochEntry{kept}, c.entries[i:]...)
	return c.persistLocked()
}

// clear removes every entry.
func (c *epochCache) clear() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entries = nil
	return c.persistLocked()
}
