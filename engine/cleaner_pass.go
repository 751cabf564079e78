package engine

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"
	"path/filepath"

	"github.com/samsa-broker/samsa/engine/vfs"
)

// cleanerThread is what one cleaner goroutine (or Manager.Compact) owns:
// its offset map, codecs and buffers, reused from pass to pass.
type cleanerThread struct {
	c     *cleaner
	id    int
	opts  CleanerOptions  // the options it was made with (reconfigure makes new threads)
	quit  <-chan struct{} // closed when a reconfiguration retires it (nil: never)
	omap  *offsetMap      // allocated on the first pass
	codec *codecs
	rd    batchReader
	wbuf  []byte   // the cleaned log, before it is written
	rec   record   // the record being decoded
	plain []byte   // a batch's records, decompressed
	recs  []byte   // the records a batch keeps
	comp  []byte   // ... compressed again
	kept  []record // the records a batch keeps (slices into plain or the read buffer)
}

func (c *cleaner) newThread(id int, o *CleanerOptions, quit <-chan struct{}) *cleanerThread {
	return &cleanerThread{c: c, id: id, opts: *o, quit: quit, codec: newCodecs(o.MaxDecompressedBytes)}
}

func (t *cleanerThread) close() { t.codec.close() }

// retired reports whether a reconfiguration has retired t (it ends after its pass).
func (t *cleanerThread) retired() bool {
	select {
	case <-t.quit:
		return true
	default:
		return false
	}
}

func (t *cleanerThread) offsetMap() *offsetMap {
	if t.omap == nil {
		t.omap = newOffsetMap(t.opts.DedupeBufferSize/int64(t.opts.Threads), t.opts.LoadFactor)
	}
	return t.omap
}

// pass is one cleaning of one log.
type pass struct {
	ctx         context.Context // ends when the pass is aborted or the Manager closes
	t           *cleanerThread
	l           *Log
	cfg         *LogConfig
	now         int64
	segs        []*segment // the cleanable segments, pinned
	ends        []int64    // ends[i]: the offset after segs[i] (the next segment's base)
	sizes       []int64    // their sizes when the pass began
	producers   map[int64]int64
	abortedTxns []AbortedTxn // of the whole log, by first offset
	omap        *offsetMap
	// groupAborted collects the index entries of the abort markers the
	// group being cleaned keeps.
	groupAborted []AbortedTxn
}

// clean runs one pass over l (Kafka's Cleaner.doClean): build the offset
// map of the dirty segments, then rewrite the cleanable segments, group by
// group, each group swapped in as soon as it is written. cleaned is false
// when there was nothing to clean. Without force, the log must still be
// past its dirty ratio (or max.compaction.lag.ms).
func (t *cleanerThread) clean(ctx context.Context, l *Log, now int64, force bool) (cleaned bool, err error) {
	segs := l.pinAll()
	defer releaseAll(segs)
	r, err := l.cleanableRangeOf(segs, now)
	if err != nil {
		return false, err
	}
	cfg := l.cfg.Load()
	if !force && !(r.dirtyBytes > 0 && (r.needNow || r.ratio() > cfg.MinCleanableDirtyRatio)) || r.cleanable == 0 {
		return false, nil
	}
	p := &pass{ctx: ctx, t: t, l: l, cfg: cfg, now: now}
	n := r.cleanable
	if err := l.damageBelow(segs[n].base); err != nil {
		return false, err
	}
	p.producers = l.producerLastOffsets()
	p.abortedTxns = abortedOf(segs)
	p.segs = segs[:n]
	for i := range p.segs {
		p.ends = append(p.ends, segs[i+1].base)
		p.sizes = append(p.sizes, segs[i].size.Load())
	}
	p.omap = t.offsetMap()
	end, err := p.buildOffsetMap(r.firstDirty)
	if err != nil {
		return false, err
	}
	tm := &txnMeta{aborted: p.abortedTxns}
	for _, g := range p.groups(end) {
		if err := p.cleanGroup(g[0], g[1], tm); err != nil {
			return false, err
		}
	}
	l.firstDirty.Store(end)
	if err := l.m.writeDirCheckpoints(l.ld); err != nil {
		l.logger.Warn("cleaner checkpoint", "err", err)
	}
	l.logger.Info("log cleaned", "first_dirty", r.firstDirty, "cleaned_to", end, "segments", n,
		"map_keys", p.omap.n, "map_utilization", p.omap.utilization())
	return true, nil
}

// damageBelow returns an error wrapping ErrCorrupt when damage is recorded
// below offset (the cleaner does not rewrite damaged segments).
func (l *Log) damageBelow(offset int64) error {
	for _, d := range l.Damage() {
		if d.Segment < offset {
			return fmt.Errorf("%w: damage recorded at %s", ErrCorrupt, d)
		}
	}
	return nil
}

// producerLastOffsets returns, for each producer the log knows, the last
// offset of its last batch: that batch is kept (empty if need be) so that
// its sequence and epoch survive compaction.
func (l *Log) producerLastOffsets() map[int64]int64 {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	out := make(map[int64]int64, len(l.prod.m))
	for pid, e := range l.prod.m {
		if lb := e.last(); lb != nil {
			out[pid] = lb.lastOffs
		}
	}
	return out
}

// aborted reports whether the pass was asked to stop.
func (p *pass) aborted() error {
	if p.l.cleanAbort.Load() || p.ctx.Err() != nil {
		return errCleanAborted
	}
	return nil
}

// pace accounts n bytes of cleaner I/O against the rate limit.
func (p *pass) pace(n int64) error {
	if r := p.t.c.limit.Load(); r != nil {
		if err := r.wait(p.ctx, n); err != nil {
			return errCleanAborted
		}
	}
	return nil
}

// buildOffsetMap puts the key of every record of the dirty segments (from
// firstDirty) in the offset map, in offset order, skipping control batches
// and aborted transactional data (Kafka's buildOffsetMap). It stops before
// a batch that might not fit. It returns the offset after the last batch
// mapped (after the segment's end when the whole segment was): the end of
// this pass's cleaning.
func (p *pass) buildOffsetMap(firstDirty int64) (int64, error) {
	m := p.omap
	m.clear()
	tm := &txnMeta{aborted: p.abortedTxns}
	for i, s := range p.segs {
		if p.ends[i] <= firstDirty {
			continue
		}
		var pos int64
		if s.base < firstDirty {
			sc := getScanner(s.log, p.sizes[i])
			pos = s.lookupPos(firstDirty, sc, p.cfg)
			putScanner(sc)
		}
		p.t.rd.reset(s.log, p.sizes[i], p)
		for pos < p.sizes[i] {
			if err := p.aborted(); err != nil {
				return 0, err
			}
			h, b, err := p.t.rd.batch(pos)
			if err != nil {
				return 0, fmt.Errorf("segment %d at %d: %w", s.base, pos, err)
			}
			pos += h.Size()
			if h.LastOffset() < firstDirty {
				continue
			}
			if h.Control() {
				ct, err := p.controlType(&h, b)
				if err != nil {
					return 0, err
				}
				tm.onControl(&h, ct)
			} else if !tm.onBatch(&h) && h.NumRecords > 0 {
				if int(h.NumRecords) > m.free() {
					if m.latest < firstDirty {
						return 0, errMapTooSmall
					}
					return m.latest + 1, nil
				}
				err := p.forEachRecordOf(&h, b, func(r *record) error {
					if !r.keyNull && h.BaseOffset+r.offDelta >= firstDirty {
						m.put(r.key, h.BaseOffset+r.offDelta)
					}
					return nil
				})
				if err != nil {
					return 0, fmt.Errorf("segment %d at %d: %w", s.base, pos-h.Size(), err)
				}
			}
			m.latest = max(m.latest, h.LastOffset())
		}
		// The whole segment is mapped: the map covers up to its end (a
		// segment may end in a hole).
		m.latest = max(m.latest, p.ends[i]-1)
	}
	// Nothing dirty: the pass goes over the clean part again (expiring
	// tombstones), with an empty map that covers it.
	m.latest = max(m.latest, firstDirty-1)
	return m.latest + 1, nil
}

// groups splits the cleanable segments that start below end into runs
// that fit one segment: at most segment.bytes, and offsets within 2^31 of
// the first base (Kafka's groupSegmentsBySize; the index sizes are not
// counted: the cleaned indexes are built for what is written, and inactive
// indexes have no fixed capacity here). A group is [from, to).
func (p *pass) groups(end int64) [][2]int {
	n := 0
	for n < len(p.segs) && p.segs[n].base < end {
		n++
	}
	var out [][2]int
	for i := 0; i < n; {
		j, size := i+1, p.sizes[i]
		for j < n && size+p.sizes[j] <= p.cfg.SegmentBytes && p.ends[j]-1-p.segs[i].base <= math.MaxInt32 {
			size += p.sizes[j]
			j++
		}
		out = append(out, [2]int{i, j})
		i = j
	}
	return out
}

// forEachRecordOf decodes the records of the batch b (decompressing them
// into the thread's buffer) and calls fn for each.
func (p *pass) forEachRecordOf(h *BatchHeader, b []byte, fn func(*record) error) error {
	payload := b[BatchHeaderSize:]
	if c := h.Compression(); c != codecNone {
		var err error
		p.t.plain, _, err = p.t.codec.decompress(c, payload, p.t.plain)
		if err != nil {
			return err
		}
		payload = p.t.plain
	}
	return forEachRecordInto(payload, h.NumRecords, h.LastOffsetDelta, &p.t.rec, fn)
}

// controlType is the type of the marker in a control batch (-1: none).
func (p *pass) controlType(h *BatchHeader, b []byte) (int, error) {
	ct := -1
	if h.NumRecords == 0 {
		return ct, nil
	}
	err := p.forEachRecordOf(h, b, func(r *record) error {
		if ct == -1 {
			ct = controlRecordType(r)
		}
		return nil
	})
	return ct, err
}

// cleanedSuffix and swapSuffix are the temporary names of a cleaned
// segment's files (Kafka's): written as "<name>.cleaned", renamed
// "<name>.swap" when complete, and to "<name>" once the segments it
// replaces are renamed "<name>.deleted".
const (
	cleanedSuffix = ".cleaned"
	swapSuffix    = ".swap"
)

// cleanedSeg is a cleaned segment written and synced under its .cleaned
// names.
type cleanedSeg struct {
	base, next    int64 // its base (the group's first) and end (the group's)
	size          int64
	maxTs, offMax int64
	firstTs       int64
	producers     bool
	aborted       []AbortedTxn // its .txnindex (none: no file)
}

// cleanGroup rewrites the segments [from, to) into one cleaned segment
// and swaps it in (Kafka's cleanSegments).
func (p *pass) cleanGroup(from, to int, tm *txnMeta) (err error) {
	l := p.l
	base := p.segs[from].base
	names := [4]string{segmentFileName(base, logSuffix), segmentFileName(base, indexSuffix), segmentFileName(base, timeIndexSuffix),
		segmentFileName(base, txnIndexSuffix)}
	o := &groupOut{p: p}
	p.groupAborted = p.groupAborted[:0]
	defer func() {
		for _, f := range o.files {
			if f != nil {
				f.Close()
			}
		}
		if err != nil {
			for _, n := range names {
				if n != "" {
					l.fs.Remove(filepath.Join(l.dir, n+cleanedSuffix))
				}
			}
		}
	}()
	for i, n := range names[:3] {
		if o.files[i], err = l.fs.OpenFile(filepath.Join(l.dir, n+cleanedSuffix), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644); err != nil {
			return err
		}
	}
	o.cs = &cleanedSeg{base: base, next: p.ends[to-1], maxTs: -1, offMax: base, firstTs: -1}
	o.ib = newIndexBuilder(base, p.cfg.IndexIntervalBytes)
	p.t.wbuf = p.t.wbuf[:0]
	for i := from; i < to; i++ {
		if err := o.copySegment(i, tm); err != nil {
			return err
		}
	}
	if err := o.finish(); err != nil {
		return err
	}
	cs := o.cs
	if len(p.groupAborted) > 0 {
		cs.aborted = append([]AbortedTxn(nil), p.groupAborted...)
		if err := writeFileSynced(l.fs, filepath.Join(l.dir, names[3]+cleanedSuffix), encodeTxnIndex(cs.aborted)); err != nil {
			return err
		}
	}
	if err := p.aborted(); err != nil {
		return err
	}
	// From here the swap owns the files: it removes them if it gives up
	// before its commit point.
	names = [4]string{}
	return l.swapCleaned(p.segs[from:to], p.sizes[from:to], cs)
}

// groupOut is the cleaned segment of one group being written: its log, offset
// index and time index files, the bytes written to the log (the thread's wbuf
// holds those not yet written), and the indexes built over them.
type groupOut struct {
	p     *pass
	files [3]vfs.File
	pos   int64
	ib    *indexBuilder
	cs    *cleanedSeg
}

// copySegment filters the batches of segment i into the cleaned log, indexing
// those kept, and writes the buffer out whenever it reaches IOBufferSize.
func (o *groupOut) copySegment(i int, tm *txnMeta) error {
	p, t := o.p, o.p.t
	s := p.segs[i]
	t.rd.reset(s.log, p.sizes[i], p)
	for pos := int64(0); pos < p.sizes[i]; {
		if err := p.aborted(); err != nil {
			return err
		}
		h, b, err := t.rd.batch(pos)
		if err != nil {
			return fmt.Errorf("segment %d at %d: %w", s.base, pos, err)
		}
		pos += h.Size()
		// The round's last batch (the one before the first segment the
		// round does not clean) keeps its header, as Kafka's
		// upperBoundOffsetOfCleaningRound; the last batches of the other
		// groups go when emptied.
		last := i == len(p.segs)-1 && pos >= p.sizes[i]
		at := len(t.wbuf)
		if t.wbuf, err = p.filterBatch(&h, b, last, tm, t.wbuf); err != nil {
			return fmt.Errorf("segment %d at %d: %w", s.base, pos-h.Size(), err)
		}
		t.c.stats.batchesRead.Add(1)
		if len(t.wbuf) > at {
			nh := parseHeaderUnchecked(t.wbuf[at:])
			o.ib.add(&nh, o.pos+int64(at))
			o.cs.note(&nh)
			t.c.stats.batchesRetained.Add(1)
			if nh.NumRecords == 0 {
				t.c.stats.batchesEmpt.Add(1)
			}
		}
		if len(t.wbuf) >= t.opts.IOBufferSize {
			if err := o.flush(); err != nil {
				return err
			}
		}
	}
	return nil
}

// flush writes the buffered bytes to the cleaned log, paced by the cleaner's
// I/O limit.
func (o *groupOut) flush() error {
	t := o.p.t
	if len(t.wbuf) == 0 {
		return nil
	}
	if _, err := o.files[0].WriteAt(t.wbuf, o.pos); err != nil {
		return err
	}
	o.pos += int64(len(t.wbuf))
	t.c.stats.bytesWritten.Add(int64(len(t.wbuf)))
	n := int64(len(t.wbuf))
	t.wbuf = t.wbuf[:0]
	return o.p.pace(n)
}

// finish writes the rest of the log and syncs it, writes and syncs both
// indexes, and closes the three files.
func (o *groupOut) finish() error {
	if err := o.flush(); err != nil {
		return err
	}
	ib, cs := o.ib, o.cs
	ib.finish()
	cs.size = o.pos
	cs.maxTs, cs.offMax = ib.maxTs, ib.offMax
	if err := o.files[0].Datasync(); err != nil {
		return err
	}
	for i, data := range [][]byte{ib.oidx, ib.tidx} {
		if len(data) > 0 {
			if _, err := o.files[i+1].WriteAt(data, 0); err != nil {
				return err
			}
		}
		if err := o.files[i+1].Sync(); err != nil {
			return err
		}
	}
	for i := range o.files {
		err := o.files[i].Close()
		o.files[i] = nil
		if err != nil {
			return err
		}
	}
	return nil
}

// note accounts a batch written to the cleaned segment.
func (cs *cleanedSeg) note(h *BatchHeader) {
	if cs.firstTs == -1 {
		cs.firstTs = h.MaxTimestamp
	}
	if h.ProducerID >= 0 {
		cs.producers = true
	}
}

// filterBatch appends to out what the cleaned segment keeps of the batch
// b: nothing, the batch as it is, the batch with fewer records (and a
// delete horizon), or its header alone (Kafka's MemoryRecords.filterTo
// with the cleaner's RecordFilter). keepHeader is set for the last batch
// of the round.
func (p *pass) filterBatch(h *BatchHeader, b []byte, keepHeader bool, tm *txnMeta, out []byte) ([]byte, error) {
	t := p.t
	var canDiscard bool
	if h.Control() {
		ct, err := p.controlType(h, b)
		if err != nil {
			return out, err
		}
		var kept *AbortedTxn
		canDiscard, kept = tm.onControl(h, ct)
		if kept != nil {
			p.groupAborted = append(p.groupAborted, *kept)
		}
	} else {
		canDiscard = tm.onBatch(h)
	}
	horizon, hasHorizon := h.DeleteHorizon()
	discardRecords := canDiscard
	if h.Control() {
		// A marker stays until its transaction has no data left and its
		// delete horizon has passed.
		discardRecords = canDiscard && hasHorizon && horizon <= p.now
	}
	// A producer's last batch keeps its header, for its sequence and
	// epoch; so does the round's last batch, so that the log keeps a batch
	// that ends where the cleaned part ends (Kafka keeps the last batch of a
	// cleaning round, and no other empty batch: readers such as
	// librdkafka 2.0 take a run of empty batches for a message too large).
	if last, ok := p.producers[h.ProducerID]; ok && h.ProducerID >= 0 && last == h.LastOffset() {
		keepHeader = true
	}
	t.c.stats.recordsRead.Add(int64(h.NumRecords))
	if discardRecords || h.NumRecords == 0 {
		if keepHeader {
			if h.NumRecords == 0 {
				return append(out, b...), nil
			}
			return appendEmptyBatch(out, h), nil
		}
		return out, nil
	}
	t.kept = t.kept[:0]
	tombstones := false
	err := p.forEachRecordOf(h, b, func(r *record) error {
		if h.Control() || p.retain(h, r, hasHorizon, horizon) {
			t.kept = append(t.kept, *r)
			// Only a tombstone the map has seen starts its horizon: one past
			// the map (a partial pass) may still have older values of its
			// key before it, which go when it is mapped.
			tombstones = tombstones || r.valueNull && !h.Control() && h.BaseOffset+r.offDelta <= p.omap.latest
		}
		return nil
	})
	if err != nil {
		return out, err
	}
	t.c.stats.recordsRetained.Add(int64(len(t.kept)))
	needHorizon := !hasHorizon && (tombstones || h.Control() && canDiscard)
	if len(t.kept) == int(h.NumRecords) && !needHorizon {
		return append(out, b...), nil
	}
	if len(t.kept) == 0 {
		if keepHeader {
			return appendEmptyBatch(out, h), nil
		}
		return out, nil
	}
	return p.appendRewritten(out, h, b, needHorizon)
}

// appendRewritten appends batch h (b, as read) rewritten with only the records
// kept (the thread's kept), compressed with the batch's codec, and with a
// delete horizon stamped on it if needHorizon: the base timestamp becomes the
// horizon and the records' timestamp deltas are shifted to match.
func (p *pass) appendRewritten(out []byte, h *BatchHeader, b []byte, needHorizon bool) ([]byte, error) {
	t := p.t
	attrs, baseTs, shift := h.Attributes, h.BaseTimestamp, int64(0)
	if needHorizon {
		hz := int64(math.MaxInt64)
		if p.cfg.DeleteRetentionMs < math.MaxInt64-p.now {
			hz = p.now + p.cfg.DeleteRetentionMs
		}
		attrs |= attrDeleteHorizon
		shift, baseTs = h.BaseTimestamp-hz, hz
	}
	maxTs := int64(-1)
	t.recs = t.recs[:0]
	for i := range t.kept {
		r := &t.kept[i]
		maxTs = max(maxTs, h.BaseTimestamp+r.tsDelta)
		t.recs = appendRecordShifted(t.recs, r, shift)
	}
	if h.LogAppendTimeType() || h.Control() {
		maxTs = h.MaxTimestamp
	}
	payload := t.recs
	if c := h.Compression(); c != codecNone {
		// The framing of the original (snappy: xerial or not) is kept.
		var xerialFramed bool
		if c == codecSnappy {
			xerialFramed = len(b) >= BatchHeaderSize+len(xerialMagic) && string(b[BatchHeaderSize:BatchHeaderSize+len(xerialMagic)]) == string(xerialMagic)
		}
		var err error
		t.comp, err = t.codec.compress(c, t.recs, t.comp[:0], xerialFramed)
		if err != nil {
			return out, err
		}
		payload = t.comp
	}
	return appendBatch(out, h, attrs, baseTs, maxTs, int32(len(t.kept)), payload), nil
}

// retain is the cleaner's rule for a data record (Kafka's
// shouldRetainRecord): past the map, kept; without a key, dropped (a
// compacted log requires keys); else kept if it is the key's latest
// record, and, for a tombstone, while its batch's delete horizon (set the
// first time the cleaner keeps it) has not passed.
func (p *pass) retain(h *BatchHeader, r *record, hasHorizon bool, horizon int64) bool {
	off := h.BaseOffset + r.offDelta
	if off > p.omap.latest {
		return true
	}
	if r.keyNull {
		return false
	}
	if off < p.omap.get(r.key) {
		return false
	}
	if r.valueNull {
		return !hasHorizon || p.now < horizon
	}
	return true
}

// batchReader reads whole batches of one segment file through a buffer
// (grown to the largest batch), checking each one's framing, CRC and
// record count before it is used.
type batchReader struct {
	f     vfs.File
	p     *pass
	buf   []byte
	start int64
	n     int
	limit int64
}

func (r *batchReader) reset(f vfs.File, limit int64, p *pass) {
	if r.buf == nil {
		r.buf = make([]byte, p.t.opts.IOBufferSize)
	}
	r.f, r.limit, r.p, r.n = f, limit, p, 0
}

// at returns the n bytes at pos, reading ahead when they are not buffered.
func (r *batchReader) at(pos int64, n int) ([]byte, error) {
	if pos >= r.start && pos+int64(n) <= r.start+int64(r.n) {
		return r.buf[pos-r.start : pos-r.start+int64(n)], nil
	}
	if n > len(r.buf) {
		r.buf = make([]byte, n)
	}
	want := min(int64(len(r.buf)), r.limit-pos)
	if want < int64(n) {
		return nil, errTruncated
	}
	m, err := r.f.ReadAt(r.buf[:want], pos)
	if err != nil && !(errors.Is(err, io.EOF) && m >= n) {
		r.n = 0
		if errors.Is(err, io.EOF) {
			return nil, errTruncated
		}
		return nil, err
	}
	r.start, r.n = pos, m
	r.p.t.c.stats.bytesRead.Add(int64(m))
	if err := r.p.pace(int64(m)); err != nil {
		return nil, err
	}
	return r.buf[:n], nil
}

// batch returns the header and bytes of the batch at pos.
func (r *batchReader) batch(pos int64) (BatchHeader, []byte, error) {
	hb, err := r.at(pos, BatchHeaderSize)
	if err != nil {
		return BatchHeader{}, nil, err
	}
	h, err := ParseBatchHeader(hb)
	if err != nil {
		return h, nil, storedBatchError(err)
	}
	maxBatch := int64(max(int(r.p.cfg.MaxMessageBytes), r.p.t.opts.MaxDecompressedBytes, r.p.t.opts.IOBufferSize))
	if pos+h.Size() > r.limit || h.Size() > maxBatch {
		return h, nil, fmt.Errorf("%w: batch of %d bytes at %d (segment of %d, at most %d)", ErrCorruptBatch, h.Size(), pos, r.limit, maxBatch)
	}
	b, err := r.at(pos, int(h.Size()))
	if err != nil {
		return h, nil, err
	}
	if crc32.Checksum(b[offAttributes:], castagnoli) != h.CRC {
		return h, nil, fmt.Errorf("%w: batch %d..%d fails its CRC", ErrCorruptBatch, h.BaseOffset, h.LastOffset())
	}
	if err := checkStoredBatchContent(&h, b[BatchHeaderSize:]); err != nil {
		return h, nil, err
	}
	return h, b, nil
}
