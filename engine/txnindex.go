package engine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/samsa-broker/samsa/engine/vfs"
)

// Transaction index (<base>.txnindex), Kafka's layout (TransactionIndex,
// AbortedTxn): one entry per aborted transaction whose abort marker lies
// in the segment, in the order of the markers (so by strictly increasing
// last offset):
//
//	 0         2             10             18            26                   34
//	+---------+-------------+--------------+-------------+--------------------+
//	| version | producer id | first offset | last offset | last stable offset |
//	| int16=0 | int64       | int64        | int64       | int64              |
//	+---------+-------------+--------------+-------------+--------------------+
//
// The file is created by the segment's first entry; a segment without one
// has none. An entry is written (pwrite at the end) before the marker's
// offset is published as the log end, and fdatasynced by the flush that
// moves the recovery point past the marker; a cleaned segment's index is
// written whole and synced before the swap. Recovery after a crash
// rewrites the index of every segment it scans, from the producer state
// as of the first one. A ragged tail (a torn write) is ignored, as Kafka
// does; an index that does not hold together (a version other than 0, an
// entry outside its segment or out of order) is rebuilt at Open from the
// log, as recovery rebuilds it.
//
// The entries of every segment are kept in memory (34 bytes of file, a
// little more in memory, per aborted transaction), loaded at Open.
const txnEntrySize = 34

// txnIndex is one segment's aborted transactions. entries changes under
// Log.appendMu (and mu, for the readers); the file fields are the
// appender's (appendMu) and the flusher's (mu).
type txnIndex struct {
	mu       sync.RWMutex
	entries  []AbortedTxn
	f        vfs.File // the open file; nil until the first write or load
	fileEnts int      // entries written to the file
	synced   int      // entries of the file known durable
}

// collect appends the entries overlapping [from, upTo) to dst; done
// reports that no later segment can hold one (an entry's last stable
// offset reached upTo).
func (t *txnIndex) collect(from, upTo int64, dst []AbortedTxn) ([]AbortedTxn, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	for _, a := range t.entries {
		if a.LastOffset >= from && a.FirstOffset < upTo {
			dst = append(dst, a)
		}
		if a.LastStableOffset >= upTo {
			return dst, true
		}
	}
	return dst, false
}

// all returns a copy of the entries.
func (t *txnIndex) all() []AbortedTxn {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return append([]AbortedTxn(nil), t.entries...)
}

// encodeTxnEntry writes a's 34 bytes to b.
func encodeTxnEntry(b []byte, a AbortedTxn) {
	binary.BigEndian.PutUint16(b[0:], 0)
	binary.BigEndian.PutUint64(b[2:], uint64(a.ProducerID))
	binary.BigEndian.PutUint64(b[10:], uint64(a.FirstOffset))
	binary.BigEndian.PutUint64(b[18:], uint64(a.LastOffset))
	binary.BigEndian.PutUint64(b[26:], uint64(a.LastStableOffset))
}

// encodeTxnIndex returns the file of entries.
func encodeTxnIndex(entries []AbortedTxn) []byte {
	b := make([]byte, txnEntrySize*len(entries))
	for i, a := range entries {
		encodeTxnEntry(b[i*txnEntrySize:], a)
	}
	return b
}

// decodeTxnIndex parses a .txnindex of the segment [base, end) (end < 0:
// unknown). A ragged tail is ignored; an entry that is not version 0, has
// its offsets out of order or outside the segment, or does not follow the
// previous entry's marker, is an error wrapping ErrCorrupt.
func decodeTxnIndex(b []byte, base, end int64) ([]AbortedTxn, error) {
	n := len(b) / txnEntrySize
	out := make([]AbortedTxn, 0, n)
	prev := int64(-1)
	for i := 0; i < n; i++ {
		e := b[i*txnEntrySize:]
		if v := binary.BigEndian.Uint16(e); v != 0 {
			return out, fmt.Errorf("%w: transaction index entry %d: version %d", ErrCorrupt, i, v)
		}
		a := AbortedTxn{
			ProducerID:       int64(binary.BigEndian.Uint64(e[2:])),
			FirstOffset:      int64(binary.BigEndian.Uint64(e[10:])),
			LastOffset:       int64(binary.BigEndian.Uint64(e[18:])),
			LastStableOffset: int64(binary.BigEndian.Uint64(e[26:])),
		}
		if a.ProducerID < 0 || a.FirstOffset < 0 || a.LastOffset <= a.FirstOffset || a.LastOffset < base ||
			end >= 0 && a.LastOffset >= end || a.LastOffset <= prev ||
			a.LastStableOffset < 0 || a.LastStableOffset > a.LastOffset+1 {
			return out, fmt.Errorf("%w: transaction index entry %d: %+v in segment [%d, %d) after %d", ErrCorrupt, i, a, base, end, prev)
		}
		prev = a.LastOffset
		out = append(out, a)
	}
	return out, nil
}

// loadTxnIndex reads the segment's .txnindex (absent: no entry). end is the
// offset after the segment's last batch.
func (s *segment) loadTxnIndex(end int64) error {
	b, err := vfs.ReadFile(s.fs, s.path(txnIndexSuffix))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return err
	}
	entries, err := decodeTxnIndex(b, s.base, end)
	if err != nil {
		return err
	}
	t := &s.tix
	t.mu.Lock()
	t.entries = entries
	t.fileEnts, t.synced = len(entries), len(entries)
	t.mu.Unlock()
	return nil
}

// openTxnFile opens (creating) the index file for writing, cut to the
// entries it holds. created reports a new file (its name is durable only
// with the directory).
func (s *segment) openTxnFileLocked() (created bool, err error) {
	t := &s.tix
	if t.f != nil {
		return false, nil
	}
	path := s.path(txnIndexSuffix)
	if _, serr := s.fs.Stat(path); serr != nil {
		created = true
	}
	f, err := s.fs.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return false, err
	}
	if err := f.Truncate(int64(t.fileEnts) * txnEntrySize); err != nil {
		f.Close()
		return false, err
	}
	t.f = f
	return created, nil
}

// appendTxn adds the entries to the segment's index: in memory, and written
// to the file. Called with Log.appendMu held. created reports that the
// file was created. On a write error the entries stay in memory (readers
// need them) but the file lacks them: the caller undoes the append.
func (s *segment) appendTxn(as []AbortedTxn) (created bool, err error) {
	t := &s.tix
	t.mu.Lock()
	defer t.mu.Unlock()
	t.entries = append(t.entries, as...)
	if created, err = s.openTxnFileLocked(); err != nil {
		return false, err
	}
	b := encodeTxnIndex(as)
	if _, err := t.f.WriteAt(b, int64(t.fileEnts)*txnEntrySize); err != nil {
		return created, err
	}
	t.fileEnts += len(as)
	return created, nil
}

// dropTxnFrom removes the entries at and after index i (the undoing of an
// append, a truncation): from memory, and from the file, which is
// fdatasynced.
func (s *segment) dropTxnFrom(i int) error {
	t := &s.tix
	t.mu.Lock()
	defer t.mu.Unlock()
	if i >= len(t.entries) && i >= t.fileEnts {
		return nil
	}
	t.entries = t.entries[:min(i, len(t.entries)):min(i, len(t.entries))]
	if t.fileEnts <= i {
		return nil
	}
	if _, err := s.openTxnFileLocked(); err != nil {
		return err
	}
	if err := t.f.Truncate(int64(i) * txnEntrySize); err != nil {
		return err
	}
	if err := t.f.Datasync(); err != nil {
		return err
	}
	t.fileEnts = i
	t.synced = min(t.synced, i)
	return nil
}

// truncateTxn drops the entries of markers at or after offset.
func (s *segment) truncateTxn(offset int64) error {
	t := &s.tix
	t.mu.RLock()
	i := len(t.entries)
	for i > 0 && t.entries[i-1].LastOffset >= offset {
		i--
	}
	t.mu.RUnlock()
	return s.dropTxnFrom(i)
}

// txnCount is the number of entries.
func (s *segment) txnCount() int {
	s.tix.mu.RLock()
	defer s.tix.mu.RUnlock()
	return len(s.tix.entries)
}

// syncTxn fdatasyncs the entries written since the last sync.
func (s *segment) syncTxn() error {
	_, err := s.syncTxnCounted()
	return err
}

// syncTxnCounted is syncTxn; synced says whether it called fdatasync.
func (s *segment) syncTxnCounted() (synced bool, err error) {
	t := &s.tix
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.f == nil || t.synced >= t.fileEnts {
		return false, nil
	}
	if err := t.f.Datasync(); err != nil {
		return true, err
	}
	t.synced = t.fileEnts
	return true, nil
}

// closeTxn closes the file.
func (s *segment) closeTxn() {
	t := &s.tix
	t.mu.Lock()
	if t.f != nil {
		t.f.Close()
		t.f = nil
	}
	t.mu.Unlock()
}

// resetTxn empties the segment's index and removes its file (recovery
// rewrites it). removed reports a file removed: the directory must be
// synced before the recovery point passes the segment.
func (s *segment) resetTxn() (removed bool, err error) {
	t := &s.tix
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.f != nil {
		t.f.Close()
		t.f = nil
	}
	t.entries, t.fileEnts, t.synced = nil, 0, 0
	if err := s.fs.Remove(s.path(txnIndexSuffix)); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return false, nil
		}
		return false, err
	}
	return true, nil
}

// writeFileSynced creates path with data, fdatasynced (the cleaner's
// .txnindex.cleaned; the swap renames it).
func writeFileSynced(fsys vfs.FS, path string, data []byte) error {
	f, err := fsys.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(data, 0); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
