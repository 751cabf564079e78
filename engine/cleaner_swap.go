package engine

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/samsa-broker/samsa/engine/vfs"
)

// The swap of a cleaned segment (Kafka's LocalLog.replaceSegments), each
// step's crash outcome in brackets (what the next Open does; see
// finishSwaps):
//
//  1. <B>.log.cleaned, .index.cleaned, .timeindex.cleaned (and
//     .txnindex.cleaned when the cleaned segment keeps abort markers) are
//     written and synced (cleanGroup). [removed]
//  2. Under Log.segMu, the group is checked to be still the log's and
//     unchanged; the .cleaned files are renamed .swap, indexes first, the
//     log last. [a .swap with a .cleaned of the same base or below:
//     both removed]
//  3. The directory is synced: the commit point. [the swap is finished:
//     the segment files whose base lies in [B, end of the .swap log) are
//     removed, the .swap files renamed to their names]
//  4. Each replaced segment's files are renamed .deleted (the log file
//     first). [as 3; .deleted files are removed]
//  5. The .swap files are renamed to their names, indexes first, the log
//     last, and the directory is synced. [as 3, or done]
//  6. Under appendMu and Log.mu (an instant) the new segment replaces
//     the group in the list; the
//     replaced segments are released after file.delete.delay.ms, their
//     files removed when the last reader lets go. [done]
//
// Renames before a directory sync may or may not survive a crash (the
// sync of another operation may make them durable), but always in order:
// the namespace survives as of some prefix of the steps, which is what the
// brackets cover. A failure before 3 removes the cleaned files and leaves
// the log as it was; a failure after 3 takes the log directory offline
// (the next Open finishes the swap).

// swapCleaned swaps the cleaned segment cs in for group, whose sizes were
// sizes when the pass read them. It returns nil without swapping when the
// group is no longer the log's (retention or DeleteRecordsBefore removed
// some of it meanwhile).
func (l *Log) swapCleaned(group []*segment, sizes []int64, cs *cleanedSeg) error {
	base := cs.base
	names := []string{segmentFileName(base, indexSuffix), segmentFileName(base, timeIndexSuffix)}
	if len(cs.aborted) > 0 {
		names = append(names, segmentFileName(base, txnIndexSuffix))
	}
	names = append(names, segmentFileName(base, logSuffix)) // the log last
	path := func(i int, suffix string) string { return filepath.Join(l.dir, names[i]+suffix) }
	discard := func(suffix string) {
		for i := range names {
			l.fs.Remove(path(i, suffix))
		}
	}
	l.segMu.Lock()
	defer l.segMu.Unlock()
	if err := l.groupStill(group, sizes); err != nil {
		discard(cleanedSuffix)
		if errors.Is(err, errGroupGone) {
			return nil
		}
		return err
	}
	if l.cleanAbort.Load() || l.m.cl.stopping() {
		discard(cleanedSuffix)
		return errCleanAborted
	}
	for i := range names {
		if err := l.fs.Rename(path(i, cleanedSuffix), path(i, swapSuffix)); err != nil {
			discard(cleanedSuffix)
			discard(swapSuffix)
			return err
		}
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		// Whether the renames are durable is not known: the directory goes
		// offline, and the next Open finishes or discards the swap.
		return l.swapFailed(err)
	}
	cfg := l.cfg.Load()
	for _, s := range group {
		// Its indexes are opened now, under their live names: once
		// renamed, a later clean of the same base may replace the
		// .deleted names (as in Kafka), and a reader still holding the
		// segment must not open another segment's index by name.
		if err := s.ensureIndexes(cfg); err != nil {
			l.logger.Warn("indexes of a cleaned-away segment", "base", s.base, "err", err)
		}
		// markDeleted holds idxMu: no index is opened by name while the
		// files move.
		if err := s.markDeleted(); err != nil {
			return l.swapFailed(err)
		}
	}
	for i := range names {
		if err := l.fs.Rename(path(i, swapSuffix), path(i, "")); err != nil {
			return l.swapFailed(err)
		}
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return l.swapFailed(err)
	}
	ns, err := openCleaned(l.m, l.dir, cs)
	if err != nil {
		return l.swapFailed(err)
	}
	l.replaceGroup(group, sizes, ns)
	for _, s := range group {
		l.m.scheduleDelete(s, cfg.FileDeleteDelayMs)
	}
	st := &l.m.cl.stats
	st.swaps.Add(1)
	st.segmentsCleaned.Add(int64(len(group)))
	return nil
}

// openCleaned opens the cleaned segment cs, swapped in under its live names in
// dir, with what the cleaner learnt writing it: its end, timestamps, whether it
// holds producer batches, and its aborted transactions (its indexes are synced).
func openCleaned(m *Manager, dir string, cs *cleanedSeg) (*segment, error) {
	ns, err := openSegment(m, dir, cs.base)
	if err != nil {
		return nil, err
	}
	ns.next.Store(cs.next)
	ns.maxTs.Store(cs.maxTs)
	ns.offMax.Store(cs.offMax)
	ns.firstTs.Store(cs.firstTs)
	ns.noProducers = !cs.producers
	ns.idxSynced = true
	ns.tix.entries = cs.aborted
	ns.tix.fileEnts, ns.tix.synced = len(cs.aborted), len(cs.aborted)
	return ns, nil
}

// replaceGroup puts ns in the place of the segments of group (of sizes) in
// the log's list, drops their damage records and counts the bytes cleaned away.
func (l *Log) replaceGroup(group []*segment, sizes []int64, ns *segment) {
	var old int64
	for _, sz := range sizes {
		old += sz
	}
	// The list changes under appendMu as well (the append path reads it
	// under appendMu alone): held for the few instructions below.
	l.appendMu.Lock()
	l.mu.Lock()
	i := 0
	for l.segs[i] != group[0] {
		i++
	}
	segs := make([]*segment, 0, len(l.segs)-len(group)+1)
	segs = append(segs, l.segs[:i]...)
	segs = append(segs, ns)
	segs = append(segs, l.segs[i+len(group):]...)
	l.segs = segs
	l.dropDamageOfLocked(group)
	l.mu.Unlock()
	l.appendMu.Unlock()
	l.size.Add(ns.size.Load() - old)
}

var errGroupGone = errors.New("engine: the segments cleaned are no longer the log's")

// groupStill checks, under segMu, that group is still a run of l's
// inactive segments with the sizes the pass read.
func (l *Log) groupStill(group []*segment, sizes []int64) error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return ErrClosed
	}
	i := 0
	for i < len(l.segs) && l.segs[i] != group[0] {
		i++
	}
	if i+len(group) >= len(l.segs) { // not found, or it reaches the active segment
		return errGroupGone
	}
	for j, s := range group {
		if l.segs[i+j] != s || s.size.Load() != sizes[j] {
			return errGroupGone
		}
	}
	return nil
}

// swapFailed takes the directory offline after a swap failed past its
// commit point: the files on disk are ahead of the segment list, and only
// the next Open can put them together again.
func (l *Log) swapFailed(err error) error {
	l.m.reportIO(l.tp.String(), err, "op", "swap")
	l.ld.setOffline(err)
	return ioFailure(fmt.Sprintf("swap cleaned segment of %s", l.tp), err)
}

// dropDamageOfLocked drops the damage recorded in the segments replaced by
// a swap (the new segment has the first one's base). Caller holds Log.mu.
func (l *Log) dropDamageOfLocked(group []*segment) {
	if len(l.dmg.list) == 0 {
		return
	}
	gone := map[int64]bool{}
	for _, s := range group {
		gone[s.base] = true
	}
	kept := l.dmg.list[:0]
	for _, d := range l.dmg.list {
		if !gone[d.Segment] {
			kept = append(kept, d)
		}
	}
	clear(l.dmg.list[len(kept):])
	l.dmg.list = kept
	l.dmg.count.Store(int32(len(kept)))
}

// segmentFileBase parses "<base><suffix>" for the three segment files; ok
// is false for other names.
func segmentFileBase(name string) (base int64, ok bool) {
	for _, suf := range segmentSuffixes {
		if strings.HasSuffix(name, suf) {
			return parseBase(name, suf)
		}
	}
	return 0, false
}

// finishSwaps finishes or discards, in the partition directory dir, a swap
// that a crash interrupted (Kafka's LogLoader, its first three passes):
//
//  1. .cleaned files are removed, and so are .swap files whose base is at
//     or above the lowest base of a .cleaned file (a swap not committed);
//  2. for each remaining <B>.log.swap, whose batches end at E, the segment
//     files (.log, .index, .timeindex, live or .deleted) whose base lies in
//     [B, E) are removed: the segments it replaces;
//  3. every remaining .swap file is renamed to its name, and the
//     directory synced.
//
// Every step can itself be cut by a crash and done again: removals come
// before renames, and a rename undone leaves the .swap that starts it
// over.
// ents is the directory's listing; finishSwaps does nothing (and returns
// false) when it holds no .cleaned or .swap file.
func finishSwaps(fsys vfs.FS, dir string, ents []os.DirEntry, rec *RecoveryStats) (changed bool, err error) {
	minCleaned := int64(math.MaxInt64)
	var swaps []string
	found := false
	for _, e := range ents {
		name := e.Name()
		switch {
		case strings.HasSuffix(name, cleanedSuffix):
			found = true
			if b, ok := segmentFileBase(strings.TrimSuffix(name, cleanedSuffix)); ok {
				minCleaned = min(minCleaned, b)
			}
			if err := fsys.Remove(filepath.Join(dir, name)); err != nil && !vfs.IsNotExist(err) {
				return true, err
			}
		case strings.HasSuffix(name, swapSuffix):
			found = true
			swaps = append(swaps, name)
		}
	}
	if !found {
		return false, nil
	}
	type span struct{ from, to int64 }
	var spans []span
	var kept []string
	for _, name := range swaps {
		live := strings.TrimSuffix(name, swapSuffix)
		b, ok := segmentFileBase(live)
		if !ok || b >= minCleaned {
			if strings.HasSuffix(live, logSuffix) {
				rec.SwapsDiscarded++
			}
			if err := fsys.Remove(filepath.Join(dir, name)); err != nil && !vfs.IsNotExist(err) {
				return true, err
			}
			continue
		}
		kept = append(kept, name)
		if strings.HasSuffix(live, logSuffix) {
			end, err := logEndOf(fsys, filepath.Join(dir, name), b)
			if err != nil {
				return true, err
			}
			spans = append(spans, span{b, max(end, b+1)})
			rec.SwapsCompleted++
		}
	}
	if len(spans) > 0 {
		for _, e := range ents {
			name := e.Name()
			if strings.HasSuffix(name, swapSuffix) || strings.HasSuffix(name, cleanedSuffix) {
				continue
			}
			b, ok := segmentFileBase(strings.TrimSuffix(name, deletedSuffix))
			if !ok {
				continue
			}
			for _, sp := range spans {
				if b >= sp.from && b < sp.to {
					if err := fsys.Remove(filepath.Join(dir, name)); err != nil && !vfs.IsNotExist(err) {
						return true, err
					}
					break
				}
			}
		}
	}
	// Indexes before the log, as in the swap: a crash between leaves the
	// log's .swap, and the swap starts over.
	sort.Slice(kept, func(i, j int) bool {
		li, lj := strings.Contains(kept[i], logSuffix+swapSuffix), strings.Contains(kept[j], logSuffix+swapSuffix)
		if li != lj {
			return lj
		}
		return kept[i] < kept[j]
	})
	for _, name := range kept {
		if err := fsys.Rename(filepath.Join(dir, name), filepath.Join(dir, strings.TrimSuffix(name, swapSuffix))); err != nil {
			return true, err
		}
	}
	return true, fsys.SyncDir(dir)
}

// logEndOf returns the offset after the last whole batch of the log file
// at path (base if it has none).
func logEndOf(fsys vfs.FS, path string, base int64) (int64, error) {
	f, err := vfs.Open(fsys, path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	sc := getScanner(f, fi.Size())
	defer putScanner(sc)
	end := base
	for pos := int64(0); pos < fi.Size(); {
		h, err := sc.header(pos)
		if err != nil {
			if errors.Is(err, ErrCorrupt) {
				break
			}
			return 0, err
		}
		end = h.LastOffset() + 1
		pos += h.Size()
	}
	return end, nil
}
