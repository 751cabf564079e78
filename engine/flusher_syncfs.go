package engine

import (
	"errors"

	"github.com/samsa-broker/samsa/engine/vfs"
)

// Group commit by syncfs(2): a round of at least Options.FlushSyncfsMinLogs
// logs makes them durable with one syncfs of the directory's file system
// instead of an fdatasync per dirty file. At partitions-10k's load (one small
// batch per log per round) one syncfs of 64 files took 2.7 ms against 8.9 ms
// for their fdatasyncs 8 at a time, and 512 files 11.2 against 42.7 ms, with
// 5-10x less CPU (BenchmarkManyFilesSync, BENCHMARKS.md).
//
// What it costs, and why it is opt-in:
//   - syncfs writes back every dirty file of the file system, other
//     processes' too: on a shared disk a round takes their time as well;
//   - its error names no file (it may be another process's): a round that
//     gets one flushes its logs again the usual way, file by file, and only
//     their failure takes the directory offline;
//   - it reports write-back errors only from Linux 5.8 on (vfs.OpenFSSync
//     refuses older kernels, and the directory keeps fdatasync).
//
// A round plans every log first (under its flushMu, taken with TryLock so
// that two rounds never wait on each other), then syncs once, then advances
// each log's recovery point to the end it read before the sync. A new
// segment's name and a new leader epoch's checkpoint (written and renamed
// with no fsync) go to the same syncfs: a log's first flush would otherwise
// cost an fsync of the checkpoint and two of the log's directory. A log the
// plan cannot cover (a flush already in progress, a rolled segment whose
// indexes were never synced) is flushed the usual way after the others, with
// no flushMu held.

// fsPlan is one log's share of a syncfs round: what was written before the
// sync, read under the log's locks.
type fsPlan struct {
	l        *Log
	leo      int64 // the log end offset before the sync: the new recovery point
	dirty    int64 // dirtyBytes before the sync
	segs     []*segment
	txn      []txnMark // per segment: its transaction index before the sync
	dirDirty bool      // the log's directory had a new name to sync
	epochs   bool      // the leader-epoch checkpoint was written for this sync
}

// txnMark is a segment's transaction index file and the entries written to it.
type txnMark struct {
	f    vfs.File // nil if none
	ents int
}

// openFSSync opens the directory's syncfs handle when the options ask for
// one; a file system or kernel that cannot have it keeps fdatasync, said once
// in the log.
func (d *logDir) openFSSync() {
	if d.m.opts.FlushSyncfsMinLogs <= 0 {
		return
	}
	s, err := vfs.OpenFSSync(d.m.fs, d.path)
	if err != nil {
		reason := err.Error()
		if errors.Is(err, vfs.ErrFSSyncUnsupported) {
			reason = "not supported here (Linux 5.8 or later is needed)"
		}
		d.m.logger.Warn("group commit by syncfs is off for this log directory: it keeps an fdatasync per file",
			"dir", d.path, "reason", reason)
		return
	}
	d.fsSync = s
}

func (d *logDir) closeFSSync() {
	if d.fsSync != nil {
		d.fsSync.Close()
		d.fsSync = nil
	}
}

// useFSSync says whether a round of n logs syncs them with syncfs.
func (d *logDir) useFSSync(n int) bool {
	return d.fsSync != nil && n >= d.m.opts.FlushSyncfsMinLogs
}

// flushLogsFS makes a round's logs durable with one syncfs and returns the
// files synced (the syncfs counts as one, plus the usual syncs of the logs
// flushed the usual way).
func (d *logDir) flushLogsFS(logs []*Log) int {
	plans := make([]fsPlan, 0, len(logs))
	var rest []*Log
	for _, l := range logs {
		p, ok, empty := l.planFS()
		switch {
		case !ok:
			rest = append(rest, l)
		case !empty:
			plans = append(plans, p)
		}
	}
	files := 0
	if len(plans) > 0 {
		err := d.fsSync.Sync()
		d.flushStats.syncs[SyncKindFS].Add(1)
		files++
		for i := range plans {
			plans[i].l.finishFS(&plans[i], err)
		}
		if err != nil {
			// The error names no file and may be another process's: the
			// round's logs are flushed the usual way, whose fdatasyncs
			// report their own files' write-back errors (each descriptor
			// samples the file's error sequence, which the syncfs did not
			// advance). finishFS left them as dirty as before; a
			// checkpoint the syncfs carried is written again, with its
			// fsync. Only if that fails does the directory go offline.
			d.m.reportIO(d.path, err, "op", "syncfs", "then", "the round's logs synced file by file")
			d.flushStats.syncfsFallbacks.Add(1)
			for i := range plans {
				rest = append(rest, plans[i].l)
			}
		}
	}
	if len(rest) > 0 {
		files += d.flushLogs(rest)
	}
	return files
}

// planFS reads what a syncfs now would make durable of l. ok is false when
// l must be flushed the usual way (see above); empty when there is nothing
// to sync (flushMu is then released). On ok and !empty, flushMu is held and
// the segments are pinned until finishFS.
func (l *Log) planFS() (p fsPlan, ok, empty bool) {
	if !l.flushMu.TryLock() {
		return p, false, false
	}
	l.mu.RLock()
	leo := l.leo.Load()
	dirty := l.dirtyBytes.Load()
	if l.closed || leo <= l.recoveryPoint.Load() && dirty == 0 {
		l.mu.RUnlock()
		l.flushMu.Unlock()
		return p, true, true
	}
	i := l.segmentForLocked(l.recoveryPoint.Load())
	active := l.segs[len(l.segs)-1]
	for _, s := range l.segs[i:] {
		if s != active && !s.idxSynced && !s.deleted.Load() {
			l.mu.RUnlock()
			l.flushMu.Unlock()
			return p, false, false
		}
	}
	p = fsPlan{l: l, leo: leo, dirty: dirty, segs: append([]*segment(nil), l.segs[i:]...)}
	for _, s := range p.segs {
		s.pin()
	}
	l.mu.RUnlock()
	// A leader epoch begun since the last flush: its checkpoint goes to the
	// same syncfs (a log's first flush otherwise costs an fsync of the new
	// file and one of its directory).
	wrote, err := l.epochs.writeUnsynced()
	if err != nil {
		releaseAll(p.segs)
		l.flushMu.Unlock()
		return fsPlan{}, false, false // the usual flush retries and reports it
	}
	p.epochs = wrote
	p.txn = make([]txnMark, len(p.segs))
	for j, s := range p.segs {
		t := &s.tix
		t.mu.RLock()
		p.txn[j] = txnMark{t.f, t.fileEnts}
		t.mu.RUnlock()
	}
	p.dirDirty = l.dirDirty.Swap(false)
	return p, true, false
}

// finishFS ends l's share of a syncfs round that returned err: on success
// what the plan read is durable, as Log.flush would leave it.
func (l *Log) finishFS(p *fsPlan, err error) {
	defer l.flushMu.Unlock()
	defer releaseAll(p.segs)
	if err != nil {
		if p.dirDirty {
			l.dirDirty.Store(true)
		}
		if p.epochs {
			l.epochs.setDirty()
		}
		return
	}
	for j, s := range p.segs {
		t := &s.tix
		t.mu.Lock()
		if m := p.txn[j]; t.f != nil && t.f == m.f && t.synced < m.ents {
			t.synced = m.ents
		}
		t.mu.Unlock()
	}
	l.flushed(p.dirty, p.leo)
}
