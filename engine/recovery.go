package engine

import (
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/samsa-broker/samsa/engine/vfs"
	"github.com/samsa-broker/samsa/internal/invariants"
)

// recoverBufSize is the read size of the recovery scan.
const recoverBufSize = 1 << 20

// loadSpec is what loadLog opens: a partition directory of a log directory,
// the configuration to open it with, and what the directory's checkpoints
// say of it.
type loadSpec struct {
	dir  *logDir        // the log directory that holds it
	path string         // the partition directory
	tp   TopicPartition // its partition
	cfg  LogConfig      // its configuration (sanitized by loadLog)
	// clean: the log directory was shut down cleanly (or the log is new):
	// nothing is scanned but the active segment's tail.
	clean bool
	// hasRecoveryPoint: the recovery-point checkpoint names the log, at
	// recoveryPoint; without it a recovery scans every segment.
	hasRecoveryPoint bool
	recoveryPoint    int64
	highWatermark    int64 // checkpointed (0 if none)
	logStart         int64 // checkpointed log start offset (0 if none)
}

// loadLog opens the partition directory spec.path, recovering it if the
// last shutdown was not clean.
//
// Clean: only the active segment's indexes are opened (and checked); older
// segments' indexes are opened on first use. After a crash: every segment
// from the one holding the recovery point is scanned batch by batch (framing,
// offsets, CRC); the first bad batch and everything after it are cut off
// (later segments deleted); the scanned segments' indexes are rebuilt; the
// recovery point stays at the checkpoint's value until the flusher has
// synced the recovered bytes. In both cases *.deleted and temporary files are removed (finishing an
// interrupted deletion), orphan indexes are removed, and producer state is
// rebuilt from the newest snapshot plus the batches after it.
//
// Its phases, in order: list the directory (listLogDir: interrupted swaps
// finished, leftovers removed), open the segments (openSegments: the first
// one created in an empty directory), recover them after a crash
// (recoverSegments) or open the active one's indexes, set the offsets
// (setLoadedOffsets), load the leader epochs (loadEpochs), the transaction
// indexes (loadTxnIndexes) and the producer state (loadProducerState). On
// an error the segments opened are released.
func (m *Manager) loadLog(spec loadSpec) (*Log, error) {
	c := spec.cfg.sanitized()
	l := &Log{rec: RecoveryStats{Logs: 1}, tp: spec.tp, dir: spec.path, m: m, ld: spec.dir, fs: m.fs,
		logger: m.logger.With("tp", spec.tp.String()), prod: newProducerStates(), snapAt: -1}
	l.prod.attach(&l.txns)
	l.cfg.Store(&c)
	l.firstDirty.Store(-1)

	files, err := l.listLogDir()
	if err != nil {
		return nil, err
	}
	segs, created, err := l.openSegments(files.bases, spec.logStart)
	fail := func(err error) (*Log, error) {
		releaseAll(segs)
		return nil, err
	}
	if err != nil {
		return fail(err)
	}
	clean := spec.clean || created
	// rebuildFrom is the base of the first segment whose transaction index
	// is rebuilt from the log: the first one scanned after a crash, or
	// one whose index does not hold together.
	rebuildFrom := int64(math.MaxInt64)
	switch {
	case !clean:
		if segs, rebuildFrom, err = l.recoverSegments(segs, spec.hasRecoveryPoint, spec.recoveryPoint); err != nil {
			return fail(err)
		}
		l.rec.RecoveredLogs = 1
	case !created: // a new segment's indexes are already open, empty and writable
		l.rec.CleanLogs = 1
		if err := l.openActive(segs[len(segs)-1]); err != nil {
			return fail(err)
		}
	}
	l.segs = segs

	leo, start := l.setLoadedOffsets(spec, !clean)
	if err := l.loadEpochs(leo, start); err != nil {
		return fail(err)
	}
	if rebuildFrom, err = l.loadTxnIndexes(files.txnFiles, rebuildFrom, leo); err != nil {
		return fail(err)
	}
	if created && !files.snapshots {
		// A new, empty log: the state is empty, as a rebuild would find it
		// (no snapshot, no record), without listing the directory three times.
		return l, nil
	}
	if err := l.loadProducerState(leo, rebuildFrom); err != nil {
		return fail(err)
	}
	return l, nil
}

// logDirFiles is what listLogDir found in a partition directory.
type logDirFiles struct {
	bases     []int64        // the segments' base offsets, in order
	txnFiles  map[int64]bool // the bases of the segments with a .txnindex
	snapshots bool           // the directory holds producer snapshots
}

// listLogDir lists the log's directory, once a swap of cleaned segments
// that a crash cut is finished (or, before its commit point, undone), and
// removes what nothing will read: files renamed *.deleted (an interrupted
// deletion), temporary files, and indexes without their segment. It counts
// the swaps in the recovery stats.
func (l *Log) listLogDir() (logDirFiles, error) {
	fs, dir := l.fs, l.dir
	ents, err := fs.ReadDir(dir)
	if err != nil {
		return logDirFiles{}, err
	}
	changed, err := finishSwaps(fs, dir, ents, &l.rec)
	if err != nil {
		return logDirFiles{}, fmt.Errorf("finish the swap of cleaned segments: %w", err)
	}
	if changed {
		l.logger.Warn("interrupted swap of cleaned segments", "completed", l.rec.SwapsCompleted, "discarded", l.rec.SwapsDiscarded)
		if ents, err = fs.ReadDir(dir); err != nil {
			return logDirFiles{}, err
		}
	}
	f := logDirFiles{txnFiles: map[int64]bool{}}
	logs := map[int64]bool{}
	var indexes []string
	for _, e := range ents {
		name := e.Name()
		if e.IsDir() {
			continue
		}
		f.snapshots = f.snapshots || strings.HasSuffix(name, snapshotSuffix)
		switch {
		case strings.HasSuffix(name, deletedSuffix), strings.HasSuffix(name, tmpSuffix):
			fs.Remove(dir + "/" + name)
		case strings.HasSuffix(name, logSuffix):
			if b, ok := parseBase(name, logSuffix); ok {
				f.bases = append(f.bases, b)
				logs[b] = true
			}
		case strings.HasSuffix(name, indexSuffix), strings.HasSuffix(name, timeIndexSuffix), strings.HasSuffix(name, txnIndexSuffix):
			indexes = append(indexes, name)
		}
	}
	for _, name := range indexes {
		suf := indexSuffix
		switch {
		case strings.HasSuffix(name, timeIndexSuffix):
			suf = timeIndexSuffix
		case strings.HasSuffix(name, txnIndexSuffix):
			suf = txnIndexSuffix
		}
		b, ok := parseBase(name, suf)
		if !ok || !logs[b] {
			fs.Remove(dir + "/" + name)
		} else if suf == txnIndexSuffix {
			f.txnFiles[b] = true
		}
	}
	sort.Slice(f.bases, func(i, j int) bool { return f.bases[i] < f.bases[j] })
	return f, nil
}

// openSegments opens the segments of bases (in order), each one's next
// offset the next one's base; in an empty directory it creates the first
// segment, at the checkpointed log start logStart (created: a new log). On
// an error it returns the segments it opened, for the caller to release.
func (l *Log) openSegments(bases []int64, logStart int64) (segs []*segment, created bool, err error) {
	for _, b := range bases {
		s, err := openSegment(l.m, l.dir, b)
		if err != nil {
			return segs, false, err
		}
		segs = append(segs, s)
	}
	for i := 0; i+1 < len(segs); i++ {
		segs[i].next.Store(segs[i+1].base)
	}
	if len(segs) > 0 {
		return segs, false, nil
	}
	s, err := createSegment(l.m, l.dir, max(logStart, 0), l.cfg.Load(), true)
	if err != nil {
		return segs, false, err
	}
	l.dirDirty.Store(true)
	return append(segs, s), true, nil
}

// recoverSegments scans segs after a crash, from the segment holding the
// checkpointed recovery point rp (hasRP false: from the first): each batch
// is checked (recoverSegment) and the first bad one cut off with all that
// follows, later segments deleted; a segment that ends short of the next
// one lost its tail. It returns the segments kept (on an error, those still
// held, for the caller to release) and the base of the first segment
// scanned, from which the transaction indexes are rebuilt.
func (l *Log) recoverSegments(segs []*segment, hasRP bool, rp int64) ([]*segment, int64, error) {
	start := 0
	if hasRP {
		l.segs = segs
		start = l.segmentForLocked(rp)
	}
	rebuildFrom := segs[start].base
	buf := make([]byte, recoverBufSize)
	for i := start; i < len(segs); i++ {
		last := i == len(segs)-1
		cut, err := l.recoverSegment(segs[i], last, buf)
		if err != nil {
			return segs, 0, err
		}
		// A segment that now ends short of the next one lost its tail
		// in the crash (the offsets of a log are dense): what follows
		// cannot have been acknowledged, since a flush syncs every
		// segment from the recovery point on before moving it.
		if !last && !cut && segs[i].next.Load() != segs[i+1].base {
			l.logger.Warn("segment ends short of the next one after a crash", "base", segs[i].base,
				"end", segs[i].next.Load(), "next_base", segs[i+1].base)
			cut = true
		}
		if cut && !last {
			for _, s := range segs[i+1:] {
				l.logger.Warn("deleting segment after corrupt or lost data", "base", s.base)
				l.rec.SegmentsDeleted++
				l.rec.BytesTruncated += s.size.Load()
				if err := s.markDeleted(); err != nil {
					return segs, 0, err
				}
			}
			releaseAll(segs[i+1:])
			segs = segs[:i+1]
			if err := segs[i].makeWritable(l.cfg.Load()); err != nil {
				return segs, 0, err
			}
			break
		}
	}
	return segs, rebuildFrom, nil
}

// setLoadedOffsets sets the offsets of the log whose segments are loaded:
// the log end, size, log start (the checkpoint's, within the segments), high
// watermark (the checkpoint's, within [log start, log end]) and recovery
// point. After a recovery the recovered bytes may still be only in the page
// cache: the recovery point stays where the checkpoint put it (as in Kafka)
// and the flusher, queued here, advances it later. It returns the log end
// and the log start offsets.
func (l *Log) setLoadedOffsets(spec loadSpec, recovered bool) (leo, start int64) {
	segs := l.segs
	act := segs[len(segs)-1]
	leo = act.next.Load()
	if leo < act.base {
		leo = act.base
	}
	l.leo.Store(leo)
	var total int64
	for _, s := range segs {
		total += s.size.Load()
	}
	l.size.Store(total)
	start = max(spec.logStart, segs[0].base)
	start = min(start, leo)
	l.logStart.Store(start)
	l.hw.Store(min(max(spec.highWatermark, start), leo))
	if invariants.Enabled {
		l.checkHWLocked("load")
	}

	rpAfter := leo
	if recovered {
		rpAfter = 0
		if spec.hasRecoveryPoint {
			rpAfter = min(spec.recoveryPoint, leo)
		}
		rpAfter = max(rpAfter, start)
		if rpAfter < leo {
			l.ld.queueFlush(l)
		}
	}
	l.recoveryPoint.Store(rpAfter)
	return leo, start
}

// loadEpochs loads the leader-epoch checkpoint (an unreadable one: empty),
// cuts it to the log's offsets [start, leo), adds the epochs of the records
// a recovery kept, which the checkpoint may lack (the append path leaves
// its writing to the next flush), and writes it again if that changed it.
func (l *Log) loadEpochs(leo, start int64) error {
	var err error
	l.epochs, err = loadEpochCache(l.fs, l.dir)
	if err != nil {
		l.logger.Warn("leader epoch checkpoint unreadable; starting empty", "err", err)
	}
	if err := l.epochs.truncateFromEnd(leo); err != nil {
		return err
	}
	if err := l.epochs.truncateFromStart(start); err != nil {
		return err
	}
	for _, e := range l.recEpochs {
		if e.start < leo && e.epoch > l.epochs.latest() {
			l.epochs.assignLater(e.epoch, e.start)
		}
	}
	l.recEpochs = nil
	if err := l.epochs.persistIfDirty(); err != nil {
		return ioFailure(fmt.Sprintf("leader epoch checkpoint of %s", l.tp), err)
	}
	return nil
}

// loadTxnIndexes reads the .txnindex of each segment below rebuildFrom that
// has one (txnFiles). The first that does not hold together is rebuilt from
// the log, with every segment after it: it returns the base to rebuild the
// transaction indexes from (rebuildFrom, or that segment's).
func (l *Log) loadTxnIndexes(txnFiles map[int64]bool, rebuildFrom, leo int64) (int64, error) {
	segs := l.segs
	for i, s := range segs {
		if !txnFiles[s.base] || s.base >= rebuildFrom {
			continue
		}
		end := leo
		if i+1 < len(segs) {
			end = segs[i+1].base
		}
		if err := s.loadTxnIndex(end); err != nil {
			if !errors.Is(err, ErrCorrupt) {
				return rebuildFrom, ioFailure(fmt.Sprintf("transaction index of %s segment %d", l.tp, s.base), err)
			}
			l.logger.Warn("transaction index does not hold together; rebuilding it from the log", "base", s.base, "err", err)
			l.rec.IndexesRebuilt++
			return s.base, nil
		}
	}
	return rebuildFrom, nil
}

// loadProducerState rebuilds the producer state from the newest snapshot
// below leo and the batches after it (rewriting the transaction indexes
// from rebuildFrom on), and removes the snapshots past the log end and,
// after, those below the first segment.
func (l *Log) loadProducerState(leo, rebuildFrom int64) error {
	removeSnapshots(l.fs, l.dir, 0, leo)
	if err := l.rebuildProducerState(leo, rebuildFrom); err != nil {
		return ioFailure(fmt.Sprintf("rebuild the transaction index of %s", l.tp), err)
	}
	removeSnapshots(l.fs, l.dir, l.segs[0].base, leo)
	return nil
}

// restoreProducerBatches gives each producer back the batches before its
// oldest known one, up to producerBatches, from the end of the active
// segment. A snapshot holds only a producer's newest batch (Kafka's format;
// Kafka's ProducerStateManager loads no more): after a restart, the retry
// of an earlier batch whose answer the restart lost was answered
// OUT_OF_ORDER_SEQUENCE_NUMBER although the log held it, and a client that
// takes that answer for a rejection renumbers the batch under a new epoch
// and writes it a second time (franz-go does; so does Kafka's producer
// for the batch it expects next). With the batches back, such a retry is
// the duplicate it was before the restart, answered with its offsets.
//
// Only batch headers are read, of the active segment's end: the last 16
// KiB, then twice as much before it, and so on while a producer's batches
// may go on further back, up to tailVerifyBytes (the bytes Open has just
// CRC-checked after a clean shutdown). A producer's batches further back or
// in the segment before stay unknown, as in Kafka. A batch is restored only
// where the sequences join: it ends right before the oldest known batch,
// at the same epoch, with no batch or marker of another epoch between.
// Called at the end of rebuildProducerState (Open, a truncation, an append
// undone): while loading or with appendMu held. The snapshots on disk are
// unchanged (they hold the newest batch only, whatever the state holds
// before it).
func (l *Log) restoreProducerBatches() {
	s := l.segs[len(l.segs)-1]
	if s.noProducers {
		return
	}
	need := map[int64]*producerEntry{}
	for pid, e := range l.prod.m {
		if e.n > 0 && e.n < producerBatches && e.batches[e.head].firstOffset > s.base {
			need[pid] = e
		}
	}
	if len(need) == 0 {
		return
	}
	// Each producer's batches and markers before its oldest known batch, in
	// log order, from the part of the segment read so far.
	found := map[int64][]restoreItem{}
	sc := getScanner(s.log, s.size.Load())
	defer putScanner(sc)
	end := sc.limit
	for window := int64(16 << 10); len(need) > 0 && end > 0; window *= 2 {
		window = min(window, tailVerifyBytes)
		var start int64
		s.idxMu.RLock()
		if s.oidx != nil {
			if _, p, has := s.oidx.lookupBound(sc.limit-window, math.MaxInt64); has && p < end {
				start = p
			}
		}
		s.idxMu.RUnlock()
		chunk := map[int64][]restoreItem{}
		for pos := start; pos < end; {
			h, err := sc.header(pos)
			if err != nil {
				break
			}
			pos += h.Size()
			if e := need[h.ProducerID]; e != nil && h.BaseOffset < e.batches[e.head].firstOffset {
				chunk[h.ProducerID] = append(chunk[h.ProducerID], restoreItem{epoch: h.ProducerEpoch, control: h.Control(),
					b: batchMeta{firstSeq: h.BaseSequence, lastSeq: h.LastSequence(), firstOffset: h.BaseOffset, lastOffs: h.LastOffset(), timestamp: h.MaxTimestamp}})
			}
		}
		for pid, items := range chunk {
			found[pid] = append(items, found[pid]...)
		}
		for pid, e := range need {
			if _, settled := restoreChain(e, found[pid]); settled {
				delete(need, pid)
			}
		}
		end = start
		if window == tailVerifyBytes {
			break
		}
	}
	for pid, items := range found {
		e := l.prod.m[pid]
		chain, _ := restoreChain(e, items)
		for _, b := range chain {
			e.prepend(b)
		}
	}
}

// restoreItem is a batch or marker of a producer that restoreProducerBatches read.
type restoreItem struct {
	epoch   int16
	control bool
	b       batchMeta
}

// restoreChain walks items (a producer's batches and markers before e's
// oldest batch, in log order) back from the end: the batches whose
// sequences join, newest first, up to what e has room for. settled is
// false when every item joined and more may lie before them.
func restoreChain(e *producerEntry, items []restoreItem) (chain []batchMeta, settled bool) {
	next := e.batches[e.head].firstSeq
	for i := len(items) - 1; i >= 0; i-- {
		it := items[i]
		if it.epoch != e.epoch {
			return chain, true
		}
		if it.control {
			continue // a marker of the same epoch: the sequences go on across it
		}
		if it.b.firstSeq < 0 || nextSequence(it.b.lastSeq) != next {
			return chain, true
		}
		chain = append(chain, it.b)
		if e.n+len(chain) == producerBatches {
			return chain, true
		}
		next = it.b.firstSeq
	}
	return chain, false
}

func parseBase(name, suffix string) (int64, bool) {
	s := strings.TrimSuffix(name, suffix)
	if len(s) != 20 {
		return 0, false
	}
	b, err := strconv.ParseInt(s, 10, 64)
	return b, err == nil && b >= 0
}

// rebuildProducerState loads the newest snapshot at or below upTo (and
// rebuildFrom) and replays the batch headers after it, markers read
// whole. The transaction indexes of the segments from rebuildFrom on
// (MaxInt64: none) are rewritten from the markers replayed; those below
// are taken as they are (durable, as everything below the recovery
// point). The indexes rewritten are synced (with the directory) before it
// returns: the recovery point may already lie past them. Each producer
// then gets back its batches before the oldest one known
// (restoreProducerBatches). Called while loading, or with appendMu held.
func (l *Log) rebuildProducerState(upTo, rebuildFrom int64) error {
	ps, from := loadLatestSnapshot(l.fs, l.dir, min(upTo, rebuildFrom))
	ps.attach(&l.txns)
	l.prod = ps
	l.snapAt = -1
	if from >= 0 && from == upTo {
		l.snapAt = from // nothing to replay: the snapshot is the state
	}
	if from < 0 {
		from = l.segs[0].base
	}
	var ioErr error
	dirChanged := false
	for _, s := range l.segs {
		if s.base >= rebuildFrom {
			removed, err := s.resetTxn()
			ioErr = errors.Join(ioErr, err)
			dirChanged = dirChanged || removed
		}
	}
	cfg := l.cfg.Load()
	var cod *codecs
	defer func() {
		if cod != nil {
			cod.close()
		}
	}()
	for _, s := range l.segs {
		if s.next.Load() <= from || s.noProducers {
			continue
		}
		sc := getScanner(s.log, s.size.Load())
		var pos int64
		if s.base < from {
			pos = s.lookupPos(from, sc, cfg)
		}
		var aborted []AbortedTxn
		for pos < sc.limit {
			h, err := sc.header(pos)
			if err != nil {
				break
			}
			if h.BaseOffset >= from && h.ProducerID >= 0 {
				var ctl controlInfo
				if h.Control() {
					ctl = l.readControl(s, pos, &h, &cod)
				}
				if ct, ok := l.prod.update(&h, ctl); ok {
					if s.base >= rebuildFrom {
						aborted = l.completeTxn(ct, aborted)
					} else {
						l.completeTxn(ct, nil)
					}
				}
			}
			pos += h.Size()
		}
		putScanner(sc)
		if len(aborted) > 0 {
			created, err := s.appendTxn(aborted)
			if err == nil {
				err = s.syncTxn()
			}
			ioErr = errors.Join(ioErr, err)
			dirChanged = dirChanged || created
		}
	}
	l.restoreProducerBatches()
	if dirChanged {
		ioErr = errors.Join(ioErr, l.fs.SyncDir(l.dir))
	}
	return ioErr
}

// readControl reads the marker of the control batch h at pos of s; a
// marker that cannot be read is logged and changes no state.
func (l *Log) readControl(s *segment, pos int64, h *BatchHeader, cod **codecs) controlInfo {
	if h.NumRecords == 0 {
		return controlInfo{}
	}
	if h.Size() > 1<<20 {
		l.logger.Warn("oversized control batch ignored", "offset", h.BaseOffset, "size", h.Size())
		return controlInfo{}
	}
	b := make([]byte, h.Size())
	if _, err := s.log.ReadAt(b, pos); err != nil {
		l.logger.Warn("transaction marker unreadable", "offset", h.BaseOffset, "err", err)
		return controlInfo{}
	}
	if h.Compression() != codecNone && *cod == nil {
		*cod = newCodecs(1 << 20)
	}
	ctl, err := decodeControl(h, b, *cod)
	if err != nil {
		l.logger.Warn("transaction marker unreadable", "offset", h.BaseOffset, "err", err)
		return controlInfo{}
	}
	return ctl
}

// openActive opens the active segment after a clean shutdown: indexes
// writable and checked, then the batches after the last index entry scanned
// to find the log end. Anything inconsistent sends it to recoverSegment.
func (l *Log) openActive(s *segment) error {
	cfg := l.cfg.Load()
	s.idxMu.Lock()
	sound, err := s.openIndexesLocked(true, cfg.SegmentIndexBytes)
	if err != nil {
		s.idxMu.Unlock()
		return err
	}
	ok := sound && s.checkIndexesLocked()
	var pos, lastIdxPos int64
	if ok {
		s.oidx.rebuildSumLocked()
		s.tidx.rebuildSumLocked()
		if _, p, has := s.oidx.lastEntry(); has {
			pos, lastIdxPos = p, p
		}
		if ts, off, has := s.tidx.lastEntry(); has {
			s.maxTs.Store(ts)
			s.offMax.Store(off)
		} else {
			s.maxTs.Store(-1)
		}
	}
	s.idxMu.Unlock()
	if ok {
		sc := getScanner(s.log, s.size.Load())
		next := s.base
		for pos < sc.limit {
			h, err := sc.header(pos)
			if err != nil || h.BaseOffset < next {
				ok = false
				break
			}
			if h.MaxTimestamp > s.maxTs.Load() {
				s.maxTs.Store(h.MaxTimestamp)
				s.offMax.Store(h.LastOffset())
			}
			next = h.LastOffset() + 1
			pos += h.Size()
		}
		putScanner(sc)
		if ok {
			// The tail batches' CRCs: damage from outside (a cleanly closed
			// file has no torn tail of its own) is recorded, not cut.
			from := int64(0)
			s.idxMu.RLock()
			if _, p, has := s.oidx.lookupBound(s.size.Load()-tailVerifyBytes, math.MaxInt64); has {
				from = p
			}
			s.idxMu.RUnlock()
			res, err := verifyBatches(s, from, s.size.Load(), s.base, math.MaxInt64, make([]byte, 64<<10), nil)
			if err != nil {
				return ioFailure(fmt.Sprintf("verify %s segment %d", l.tp, s.base), err)
			}
			l.rec.TailBytesVerified += res.checked
			if res.broken {
				ok = false
			}
			for _, d := range res.damage {
				if !res.broken {
					d.FoundBy = foundByOpen
					l.recordDamage(d)
					l.rec.DamagedBatches++
				}
			}
		}
		if ok {
			// Entries past the data (a log cut behind the indexes' back).
			s.idxMu.RLock()
			if o, _, has := s.oidx.lastEntry(); has && o >= next {
				ok = false
			}
			if _, o, has := s.tidx.lastEntry(); has && o >= next {
				ok = false
			}
			s.idxMu.RUnlock()
		}
		if ok {
			s.next.Store(next)
			s.bytesSinceIndex = s.size.Load() - lastIdxPos
			return nil
		}
	}
	l.logger.Warn("active segment inconsistent after clean shutdown; recovering", "base", s.base)
	_, err = l.recoverSegmentKeeping(s, true, true, make([]byte, recoverBufSize))
	return err
}

// tailVerifyBytes is how much of the active segment's end Open CRC-checks
// after a clean shutdown: every batch that starts in the last 256 KiB, from
// the index entry before them (so at most index.interval.bytes more), and
// at least the last batch.
const tailVerifyBytes = 256 << 10

// makeWritable maps a segment's indexes for appends (it became active).
func (s *segment) makeWritable(cfg *LogConfig) error {
	s.idxMu.Lock()
	defer s.idxMu.Unlock()
	if s.oidx == nil {
		if _, err := s.openIndexesLocked(true, cfg.SegmentIndexBytes); err != nil {
			return err
		}
		if !s.checkIndexesLocked() {
			s.oidx.setEntriesLocked(0)
			s.tidx.setEntriesLocked(0)
			return s.rebuildIndexesLocked(cfg)
		}
		s.oidx.rebuildSumLocked()
		s.tidx.rebuildSumLocked()
		return nil
	}
	if s.writable {
		return nil
	}
	if err := s.oidx.mapWritableLocked(cfg.SegmentIndexBytes); err != nil {
		return err
	}
	if err := s.tidx.mapWritableLocked(cfg.SegmentIndexBytes); err != nil {
		return err
	}
	s.writable = true
	return nil
}

// window is a read-ahead buffer over a file for the recovery scan.
type window struct {
	f     vfs.File
	buf   []byte
	start int64
	n     int
	limit int64
}

// at returns the n bytes at pos (n <= len(buf)).
func (w *window) at(pos int64, n int) ([]byte, error) {
	if pos < w.start || pos+int64(n) > w.start+int64(w.n) {
		want := int64(len(w.buf))
		if rem := w.limit - pos; rem < want {
			want = rem
		}
		if want < int64(n) {
			return nil, io.ErrUnexpectedEOF
		}
		m, err := w.f.ReadAt(w.buf[:want], pos)
		if err != nil && !(errors.Is(err, io.EOF) && m >= n) {
			w.n = 0
			if errors.Is(err, io.EOF) {
				return nil, io.ErrUnexpectedEOF
			}
			return nil, err
		}
		w.start, w.n = pos, m
	}
	off := int(pos - w.start)
	return w.buf[off : off+n], nil
}

// recoverSegment scans every batch of s, checking framing, offsets and CRC,
// cuts the file at the first bad batch and rebuilds both indexes (writable
// for the active segment). cut reports whether bytes were dropped.
func (l *Log) recoverSegment(s *segment, active bool, buf []byte) (cut bool, err error) {
	return l.recoverSegmentKeeping(s, active, false, buf)
}

// recoverSegmentKeeping is recoverSegment; with keepDamaged (a segment
// closed cleanly, so that no write of its own can be torn) a batch whose
// framing holds but whose CRC or records do not is recorded as damage and
// kept, not cut.
func (l *Log) recoverSegmentKeeping(s *segment, active, keepDamaged bool, buf []byte) (cut bool, err error) {
	cfg := l.cfg.Load()
	size := s.size.Load()
	w := &window{f: s.log, buf: buf, limit: size}
	b := newIndexBuilder(s.base, cfg.IndexIntervalBytes)
	pos, next, err := l.scanBatches(s, w, b, size, active, keepDamaged)
	if err != nil {
		return false, err
	}
	s.firstTs.Store(unknownTimestamp)
	l.rec.SegmentsScanned++
	l.rec.BytesScanned += pos
	l.rec.IndexesRebuilt++
	s.fail.indexRebuilds.Add(1)
	if pos < size {
		if err := l.cutTail(s, w, pos, size, active); err != nil {
			return false, err
		}
		cut = true
	}
	s.size.Store(pos)
	s.next.Store(next)
	if !active {
		b.finish()
	}
	err = s.installIndexes(b, active, cfg)
	return cut, err
}

// scanBatches reads s's batches up to size, adding each intact one to b and
// its leader epoch to the recovered epochs, and stops at the first batch that
// is torn, out of order or (without keepDamaged) damaged. It returns the
// position it stopped at and the offset after the last batch kept.
func (l *Log) scanBatches(s *segment, w *window, b *indexBuilder, size int64, active, keepDamaged bool) (pos, next int64, err error) {
	segEnd := int64(math.MaxInt64) // a batch reaching the next segment's base is not this segment's
	if !active && s.next.Load() > s.base {
		segEnd = s.next.Load()
	}
	next = s.base
	producers := false
	var pending *Damage // a damaged batch kept, recorded once the batch after it bounds it
	for pos < size {
		hb, err := w.at(pos, BatchHeaderSize)
		if err != nil {
			if !errors.Is(err, io.ErrUnexpectedEOF) {
				return 0, 0, err
			}
			break
		}
		h, err := ParseBatchHeader(hb)
		if err != nil || pos+h.Size() > size {
			break
		}
		outOfOrder := h.BaseOffset < next || h.LastOffsetDelta < 0 || h.LastOffset()-s.base > math.MaxInt32 || h.LastOffset() >= segEnd
		if outOfOrder && !keepDamaged {
			break
		}
		ok, err := batchIntact(w, pos, &h)
		if err != nil {
			return 0, 0, err
		}
		if (!ok && !keepDamaged) || (ok && outOfOrder) {
			break
		}
		if !ok {
			// Kept as damage. The CRC covers lastOffsetDelta, so this header's
			// offsets are not believed: it adds no index entry and does not move
			// next (the batch after it may start from next; verifyBatches bounds
			// the damage by it). A damaged last batch moves next past its header's
			// last offset, when that is ahead, so no offset it may hold is reused.
			last := h.LastOffset()
			if outOfOrder || last < next {
				last = next
			}
			if pending != nil {
				l.recordDamage(*pending)
			}
			pending = &Damage{Segment: s.base, Pos: pos, Size: h.Size(), FirstOffset: next, LastOffset: last,
				FoundBy: foundByOpen, Err: fmt.Errorf("%w: batch %d..%d fails its CRC or record framing", ErrCorruptBatch, h.BaseOffset, h.LastOffset())}
			l.rec.DamagedBatches++
			pos += h.Size()
			if pos >= size {
				next = max(next, last+1)
			}
			continue
		}
		if pending != nil {
			// The damage ends where this intact batch starts.
			if h.BaseOffset > pending.FirstOffset {
				pending.LastOffset = h.BaseOffset - 1
			}
			l.recordDamage(*pending)
			pending = nil
		}
		b.add(&h, pos)
		if h.ProducerID >= 0 {
			producers = true
		}
		if n := len(l.recEpochs); h.PartitionLeaderEpoch >= 0 && (n == 0 || h.PartitionLeaderEpoch > l.recEpochs[n-1].epoch) {
			l.recEpochs = append(l.recEpochs, epochEntry{h.PartitionLeaderEpoch, h.BaseOffset})
		}
		next = h.LastOffset() + 1
		pos += h.Size()
	}
	if pending != nil {
		l.recordDamage(*pending)
	}
	s.noProducers = !producers
	return pos, next, nil
}

// cutTail cuts s's file at pos, the end of its last good batch, below size:
// blocks allocated ahead of the appends (zeros in the active segment), or a
// corrupt or torn tail.
func (l *Log) cutTail(s *segment, w *window, pos, size int64, active bool) error {
	zeros, err := zeroTail(w, pos, size)
	if err != nil {
		return err
	}
	if zeros && active {
		l.rec.PreallocatedBytesCut += size - pos
		l.logger.Debug("cutting the blocks allocated ahead of the appends", "base", s.base, "valid", pos, "size", size)
	} else {
		l.rec.BytesTruncated += size - pos
		l.logger.Warn("truncating corrupt or torn tail", "base", s.base, "valid", pos, "size", size)
	}
	return s.cutFile(pos)
}

// installIndexes writes the indexes b built over s's index files (opened if
// they are not, writable for the active segment).
func (s *segment) installIndexes(b *indexBuilder, active bool, cfg *LogConfig) error {
	s.idxMu.Lock()
	defer s.idxMu.Unlock()
	if s.oidx == nil {
		if _, err := s.openIndexesLocked(active, cfg.SegmentIndexBytes); err != nil {
			return err
		}
	}
	s.writable = active
	if err := s.oidx.rewriteLocked(b.oidx, active, cfg.SegmentIndexBytes); err != nil {
		return err
	}
	if err := s.tidx.rewriteLocked(b.tidx, active, cfg.SegmentIndexBytes); err != nil {
		return err
	}
	s.maxTs.Store(b.maxTs)
	s.offMax.Store(b.offMax)
	s.bytesSinceIndex = b.bytesSinceIndex
	return nil
}

// batchIntact checks the CRC (and, when the batch fits the buffer, the
// record framing) of the batch at pos.
func batchIntact(w *window, pos int64, h *BatchHeader) (bool, error) {
	size := h.Size()
	if size <= int64(len(w.buf)) {
		bb, err := w.at(pos, int(size))
		if err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) {
				return false, nil
			}
			return false, err
		}
		if crc32.Checksum(bb[offAttributes:], castagnoli) != h.CRC {
			return false, nil
		}
		return checkStoredBatchContent(h, bb[BatchHeaderSize:]) == nil, nil
	}
	// Larger than the buffer: stream the CRC.
	var crc uint32
	for p := pos + offAttributes; p < pos+size; {
		n := int64(len(w.buf))
		if rem := pos + size - p; rem < n {
			n = rem
		}
		chunk, err := w.at(p, int(n))
		if err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) {
				return false, nil
			}
			return false, err
		}
		crc = crc32.Update(crc, castagnoli, chunk)
		p += n
	}
	if crc != h.CRC {
		return false, nil
	}
	return h.NumRecords >= 0 && int64(h.NumRecords) <= int64(h.LastOffsetDelta)+1, nil
}
