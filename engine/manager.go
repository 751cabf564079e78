package engine

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/samsa-broker/samsa/engine/vfs"
)

// checkpointInterval is how often the checkpoint files are rewritten
// (Kafka: replica.high.watermark.checkpoint.interval.ms, 5 s).
var checkpointInterval = 5 * time.Second

// Manager owns the log directories of a broker and every partition log in
// them. All methods are safe for concurrent use.
type Manager struct {
	opts Options
	// noVerify is Options.DisableTxnVerification, changed at run time by
	// SetTxnVerification.
	noVerify atomic.Bool
	fs       vfs.FS
	now      func() time.Time
	logger   *slog.Logger
	dirs     []*logDir

	mu     sync.RWMutex
	logs   map[TopicPartition]*Log
	closed bool

	stop chan struct{}
	wg   sync.WaitGroup // flushers, retention, checkpointer
	bg   sync.WaitGroup // background directory and segment removals
	rm   *remover       // deleted segments' files, at a bounded pace (remover.go)

	delMu   sync.Mutex
	pending map[*segment]*time.Timer

	unlocks []io.Closer  // directory locks
	journal *vfs.CrashFS // Options.PowerLossJournal

	fail     failures
	recovery RecoveryStats // written by Open only

	cl *cleaner

	space func(path string) (total, usable int64) // diskSpace; tests replace it

	// brokerEpoch is what Close records in the clean-shutdown markers
	// (SetBrokerEpoch; 0: none); cleanEpoch what Open read from them
	// (CleanShutdownEpoch).
	brokerEpoch atomic.Int64
	cleanEpoch  int64
}

// DirStat describes one log directory (DescribeLogDirs).
type DirStat struct {
	Path        string
	Err         error
	Logs        []LogStat
	TotalBytes  int64 // size of the file system (-1 if unknown), DescribeLogDirs v4
	UsableBytes int64 // bytes still usable (-1 if unknown)
}

// LogStat describes one partition log in a directory.
type LogStat struct {
	TP        TopicPartition
	Size      int64
	OffsetLag int64 // log end offset - high watermark
}

// Open opens (creating them if missing) the log directories and recovers
// every <topic>-<partition> directory found in them.
func Open(opts Options) (*Manager, error) {
	if len(opts.Dirs) == 0 {
		return nil, fmt.Errorf("%w: no log directory", ErrInvalidConfig)
	}
	if opts.DefaultConfig == (LogConfig{}) {
		opts.DefaultConfig = DefaultLogConfig()
	}
	opts.DefaultConfig = opts.DefaultConfig.sanitized()
	if opts.Sync < SyncFsync || opts.Sync > SyncNone {
		return nil, fmt.Errorf("%w: sync policy %d", ErrInvalidConfig, opts.Sync)
	}
	m := &Manager{
		opts:    opts,
		fs:      opts.FS,
		now:     opts.Now,
		logger:  opts.Logger,
		logs:    make(map[TopicPartition]*Log),
		stop:    make(chan struct{}),
		pending: make(map[*segment]*time.Timer),
		space:   diskSpace,
	}
	m.rm = newRemover(&m.bg)
	if m.now == nil {
		m.now = time.Now
	}
	if m.fs == nil {
		m.fs = vfs.Default
	}
	if m.logger == nil {
		m.logger = slog.New(slog.DiscardHandler)
	}
	m.noVerify.Store(opts.DisableTxnVerification)
	m.cl = newCleaner(m, opts.Cleaner)
	m.cl.manualBg = opts.manualBackground
	if opts.PowerLossJournal != "" {
		cfs, err := vfs.OpenJournal(m.fs, opts.PowerLossJournal)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
		}
		st := cfs.LastCut()
		m.logger.Warn("power-loss journal: files cut back to their last fdatasync", "journal", opts.PowerLossJournal,
			"files_cut", st.FilesCut, "bytes_lost", st.BytesLost, "names_undone", st.Undone)
		m.fs, m.journal = cfs, cfs
	}
	if err := m.lockDirs(opts.Dirs); err != nil {
		return nil, err
	}
	if err := m.loadDirs(); err != nil {
		return nil, err
	}
	m.checkFileLimit()
	for _, d := range m.dirs {
		d.openFSSync()
		d.openWriteback()
	}
	if opts.manualBackground {
		return m, nil
	}
	for _, d := range m.dirs {
		m.wg.Add(1)
		go func() { defer m.wg.Done(); d.run(m.stop) }()
	}
	m.wg.Add(1)
	go func() { defer m.wg.Done(); m.background() }()
	if m.opts.ScrubBytesPerSecond > 0 {
		m.wg.Add(1)
		go func() { defer m.wg.Done(); m.scrubber() }()
	}
	m.cl.start()
	return m, nil
}

// lockDirs creates each log directory if it is missing and takes its lock. On
// an error the directories locked are unlocked.
func (m *Manager) lockDirs(dirs []string) error {
	seen := map[string]bool{}
	for _, p := range dirs {
		abs, err := filepath.Abs(p)
		if err != nil {
			return err
		}
		if seen[abs] {
			return fmt.Errorf("%w: log directory %s listed twice", ErrInvalidConfig, p)
		}
		seen[abs] = true
		if err := m.fs.MkdirAll(abs, 0o755); err != nil {
			m.unlock()
			return err
		}
		unlock, err := lockDir(m.fs, abs)
		if err != nil {
			m.unlock()
			return err
		}
		m.unlocks = append(m.unlocks, unlock)
		m.dirs = append(m.dirs, newLogDir(m, abs))
	}
	return nil
}

// loadDirs opens the logs of every directory, recovering those that need it,
// and logs what the recovery did. On an error the Manager is abandoned.
func (m *Manager) loadDirs() error {
	t0 := time.Now()
	epochs := make([]int64, len(m.dirs))
	for i, d := range m.dirs {
		epoch, err := m.loadDir(d)
		if err != nil {
			m.abandon()
			return err
		}
		epochs[i] = epoch
	}
	m.cleanEpoch = sameEpoch(epochs)
	for _, l := range m.logs {
		m.recovery.add(l.rec)
	}
	m.recovery.Duration = time.Since(t0)
	r := m.recovery
	m.logger.Info("logs opened", "logs", r.Logs, "clean", r.CleanLogs, "recovered", r.RecoveredLogs,
		"segments_scanned", r.SegmentsScanned, "bytes_scanned", r.BytesScanned, "bytes_truncated", r.BytesTruncated,
		"segments_deleted", r.SegmentsDeleted, "indexes_rebuilt", r.IndexesRebuilt,
		"tail_bytes_verified", r.TailBytesVerified, "damaged_batches", r.DamagedBatches, "took", r.Duration)
	return nil
}

func (m *Manager) nowMs() int64 { return m.now().UnixMilli() }

func (m *Manager) unlock() {
	for _, u := range m.unlocks {
		u.Close()
	}
	m.unlocks = nil
	if m.journal != nil {
		m.journal.CloseJournal()
	}
}

// loadDir recovers every partition log of d. It returns the broker epoch of d's
// clean-shutdown marker: -1 if d was not closed cleanly, or its marker names none.
func (m *Manager) loadDir(d *logDir) (int64, error) {
	marker := filepath.Join(d.path, cleanShutdownFile)
	_, err := m.fs.Stat(marker)
	clean := err == nil
	read := func(name string) map[TopicPartition]int64 {
		cp, err := readOffsetsCheckpoint(m.fs, filepath.Join(d.path, name))
		if err != nil {
			m.logger.Warn("ignoring checkpoint", "dir", d.path, "file", name, "err", err)
			clean = false
			return nil
		}
		return cp
	}
	rps, hws, lss := read(recoveryPointFile), read(replicationFile), read(logStartOffsetFile)
	// The cleaner checkpoint is a hint (a log without an entry is cleaned
	// from its start): a bad one is ignored without a recovery.
	cleaned, err := readOffsetsCheckpoint(m.fs, filepath.Join(d.path, cleanerOffsetFile))
	if err != nil {
		m.logger.Warn("ignoring checkpoint", "dir", d.path, "file", cleanerOffsetFile, "err", err)
		cleaned = nil
	}
	d.cleanerCkpt = vfs.Exists(m.fs, filepath.Join(d.path, cleanerOffsetFile))
	for _, f := range []string{recoveryPointFile, replicationFile, logStartOffsetFile, cleanerOffsetFile} {
		m.fs.Remove(filepath.Join(d.path, f+tmpSuffix))
	}
	ents, err := m.fs.ReadDir(d.path)
	if err != nil {
		return -1, err
	}
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		name := e.Name()
		path := filepath.Join(d.path, name)
		if strings.HasSuffix(name, "-delete") {
			m.removeAsync(path)
			continue
		}
		tp, ok := parseLogDirName(name)
		if !ok {
			continue
		}
		if _, dup := m.logs[tp]; dup {
			return -1, fmt.Errorf("%w: %s found in two log directories", ErrInvalidConfig, tp)
		}
		rp, hasRP := rps[tp]
		l, err := m.loadLog(loadSpec{dir: d, path: path, tp: tp, cfg: m.opts.DefaultConfig, clean: clean,
			hasRecoveryPoint: hasRP, recoveryPoint: rp, highWatermark: hws[tp], logStart: lss[tp]})
		if err != nil {
			return -1, fmt.Errorf("load %s: %w", path, tooManyFiles(err, len(m.logs)))
		}
		if off, ok := cleaned[tp]; ok {
			l.firstDirty.Store(off)
		}
		m.logs[tp] = l
		d.nlogs++
		d.logsGen++
	}
	if clean {
		// Read before the marker goes: a directory whose checkpoint could not
		// be read was recovered as after a crash, and its epoch counts for nothing.
		epoch := readMarkerEpoch(m.fs, marker)
		if err := m.fs.Remove(marker); err != nil {
			return -1, err
		}
		return epoch, m.fs.SyncDir(d.path)
	}
	// Recovery may have cut logs below their checkpointed recovery points:
	// checkpoint the lower ones before anything is appended (see
	// Log.checkpointLowerRecoveryPoint). If that fails the directory opens
	// offline (readable, no appends) rather than not at all.
	if err := m.writeDirCheckpoints(d); err != nil {
		m.reportIO(d.path, err, "op", "checkpoint")
		d.setOffline(err)
	}
	return -1, nil
}

// parseLogDirName splits "<topic>-<partition>".
func parseLogDirName(name string) (TopicPartition, bool) {
	i := strings.LastIndexByte(name, '-')
	if i <= 0 || i == len(name)-1 {
		return TopicPartition{}, false
	}
	p, err := strconv.ParseInt(name[i+1:], 10, 32)
	if err != nil || p < 0 || strconv.FormatInt(p, 10) != name[i+1:] {
		return TopicPartition{}, false
	}
	return TopicPartition{Topic: name[:i], Partition: int32(p)}, true
}

func (m *Manager) removeAsync(path string) {
	m.bg.Add(1)
	go func() {
		defer m.bg.Done()
		if err := m.fs.RemoveAll(path); err != nil {
			m.logger.Warn("remove deleted log", "path", path, "err", err)
		}
	}()
}

// Log returns the log of tp, or nil.
func (m *Manager) Log(tp TopicPartition) *Log {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.logs[tp]
}

// Logs returns every log, sorted by topic and partition.
func (m *Manager) Logs() []*Log {
	m.mu.RLock()
	out := make([]*Log, 0, len(m.logs))
	for _, l := range m.logs {
		out = append(out, l)
	}
	m.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].tp, out[j].tp
		return a.Topic < b.Topic || a.Topic == b.Topic && a.Partition < b.Partition
	})
	return out
}

func (m *Manager) logsIn(d *logDir) []*Log {
	m.mu.RLock()
	defer m.mu.RUnlock()
	var out []*Log
	for _, l := range m.logs {
		if l.ld == d {
			out = append(out, l)
		}
	}
	return out
}

func validTopic(t string) bool {
	if t == "" || t == "." || t == ".." || len(t) > 249 {
		return false
	}
	for _, c := range t {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// CreateLog creates the log of tp in the directory with the fewest logs. For
// an existing log it applies cfg and returns the log. The new log's directory
// entry is durable when it returns.
func (m *Manager) CreateLog(tp TopicPartition, cfg LogConfig) (*Log, error) {
	logs, err := m.CreateLogs([]NewLog{{TP: tp, Config: cfg}})
	if err != nil {
		return nil, err
	}
	return logs[0], nil
}

// NewLog is one log of CreateLogs.
type NewLog struct {
	TP     TopicPartition
	Config LogConfig
}

// CreateLogs is CreateLog for several logs, with one sync of each log
// directory for all the directories it created in it (CreateLog syncs once
// per log: a topic of 10,000 partitions created one log at a time is 10,000
// syncs of the log directory). It returns the logs in the order asked, or the
// first error: the logs created before it stay (their entries synced). Each
// log is visible to Log as soon as it is made, before the sync.
func (m *Manager) CreateLogs(want []NewLog) ([]*Log, error) {
	for _, n := range want {
		if !validTopic(n.TP.Topic) || n.TP.Partition < 0 {
			return nil, fmt.Errorf("%w: topic partition %q %d", ErrInvalidConfig, n.TP.Topic, n.TP.Partition)
		}
	}
	out := make([]*Log, 0, len(want))
	var created []*logDir
	var first error
	for _, n := range want {
		// The lock is taken per log: a batch of 10,000 does not hold up
		// the lookups of the produce and fetch paths (Log) while it runs.
		m.mu.Lock()
		var l *Log
		var d *logDir
		err := ErrClosed
		if !m.closed {
			l, d, err = m.createLogLocked(n.TP, n.Config)
		}
		m.mu.Unlock()
		if err != nil {
			first = err
			break
		}
		if d != nil && !slices.Contains(created, d) {
			created = append(created, d)
		}
		out = append(out, l)
	}
	for _, d := range created {
		if err := m.fs.SyncDir(d.path); err != nil && first == nil {
			first = err
		}
	}
	if first != nil {
		return nil, first
	}
	return out, nil
}

// createLogLocked creates the log of tp (or applies cfg to the existing one)
// without syncing the log directory; d is the directory it created the log
// in (nil for an existing log). The caller holds m.mu.
func (m *Manager) createLogLocked(tp TopicPartition, cfg LogConfig) (*Log, *logDir, error) {
	if l := m.logs[tp]; l != nil {
		l.SetConfig(cfg)
		return l, nil, nil
	}
	if err := m.checkCreateLocked(); err != nil {
		return nil, nil, err
	}
	var best *logDir
	for _, d := range m.dirs {
		d.mu.Lock()
		off := d.err != nil
		d.mu.Unlock()
		if !off && (best == nil || d.nlogs < best.nlogs) {
			best = d
		}
	}
	if best == nil {
		return nil, nil, ErrLogDirOffline
	}
	path := filepath.Join(best.path, tp.String())
	if err := m.fs.MkdirAll(path, 0o755); err != nil {
		return nil, nil, tooManyFiles(err, len(m.logs))
	}
	l, err := m.loadLog(loadSpec{dir: best, path: path, tp: tp, cfg: cfg, clean: true})
	if err != nil {
		return nil, nil, tooManyFiles(err, len(m.logs))
	}
	l.rec = RecoveryStats{}
	m.logs[tp] = l
	best.nlogs++
	best.logsGen++
	return l, best, nil
}

// DeleteLog removes the log of tp: its directory is renamed to
// "<topic>-<partition>.<uuid>-delete" and removed in the background.
func (m *Manager) DeleteLog(tp TopicPartition) error {
	m.mu.Lock()
	l := m.logs[tp]
	if l == nil {
		m.mu.Unlock()
		return fmt.Errorf("%w: %s", ErrNoLog, tp)
	}
	delete(m.logs, tp)
	l.ld.nlogs--
	l.ld.logsGen++
	m.mu.Unlock()
	m.cl.abortAndPause(l) // for good: the log is gone
	l.close(closeDelete)
	var u [16]byte
	rand.Read(u[:])
	dst := l.dir + "." + hex.EncodeToString(u[:]) + "-delete"
	if err := m.fs.Rename(l.dir, dst); err != nil {
		return err
	}
	if err := m.fs.SyncDir(filepath.Dir(l.dir)); err != nil {
		return err
	}
	m.removeAsync(dst)
	return nil
}

// DirStats describes every log directory.
func (m *Manager) DirStats() []DirStat {
	out := make([]DirStat, 0, len(m.dirs))
	for _, d := range m.dirs {
		d.mu.Lock()
		st := DirStat{Path: d.path, Err: d.err}
		d.mu.Unlock()
		st.TotalBytes, st.UsableBytes = diskSpace(d.path)
		for _, l := range m.logsIn(d) {
			st.Logs = append(st.Logs, LogStat{TP: l.tp, Size: l.Size(), OffsetLag: l.LogEndOffset() - l.HighWatermark()})
		}
		sort.Slice(st.Logs, func(i, j int) bool {
			a, b := st.Logs[i].TP, st.Logs[j].TP
			return a.Topic < b.Topic || a.Topic == b.Topic && a.Partition < b.Partition
		})
		out = append(out, st)
	}
	return out
}

// background runs the retention and checkpoint timers.
func (m *Manager) background() {
	ck := time.NewTicker(checkpointInterval)
	defer ck.Stop()
	var ret <-chan time.Time
	if iv := m.opts.RetentionCheckInterval; iv > 0 {
		t := time.NewTicker(iv)
		defer t.Stop()
		ret = t.C
	}
	for {
		select {
		case <-m.stop:
			return
		case <-ck.C:
			m.writeCheckpoints()
		case <-ret:
			m.EnforceRetention()
		}
	}
}

// EnforceRetention applies every log's retention now (the background timer
// calls it every RetentionCheckInterval). It returns the number of segments
// deleted.
func (m *Manager) EnforceRetention() int {
	n := 0
	for _, l := range m.Logs() {
		k, err := l.enforceRetention()
		if err != nil && !errors.Is(err, ErrClosed) {
			m.logger.Warn("retention", "tp", l.tp, "err", err)
		}
		n += k
	}
	return n
}

// writeCheckpoints rewrites each directory's checkpoint files.
func (m *Manager) writeCheckpoints() error {
	var first error
	for _, d := range m.dirs {
		if err := m.writeDirCheckpoints(d); err != nil && first == nil {
			first = err
		}
	}
	return first
}

func (m *Manager) writeDirCheckpoints(d *logDir) error {
	d.ckptMu.Lock()
	defer d.ckptMu.Unlock()
	c := &d.ckpt
	m.mu.RLock()
	gen := d.logsGen
	m.mu.RUnlock()
	if !c.valid || c.gen != gen {
		c.reset(m.logsIn(d), gen)
	}
	c.load()
	var err error
	for i, name := range [4]string{recoveryPointFile, replicationFile, logStartOffsetFile, cleanerOffsetFile} {
		if !c.changed[i] {
			continue
		}
		if name == cleanerOffsetFile && c.cleaned == 0 && !d.cleanerCkpt {
			c.changed[i] = false
			continue // no compacted log has been cleaned in this directory
		}
		data := c.encode(i)
		if string(data) == d.lastCkpt[i] {
			c.changed[i] = false
			continue // unchanged since the last write
		}
		if e := writeFileAtomic(m.fs, filepath.Join(d.path, name), data); e != nil {
			if err == nil {
				err = e
			}
			continue // written again next time
		}
		d.lastCkpt[i] = string(data)
		c.changed[i] = false
		if name == cleanerOffsetFile {
			d.cleanerCkpt = true
		}
	}
	return err
}

// scheduleDelete drops the log's reference on a segment already renamed
// *.deleted after delayMs; the files go when the last reader releases it.
func (m *Manager) scheduleDelete(s *segment, delayMs int64) {
	if delayMs <= 0 {
		s.release()
		return
	}
	m.delMu.Lock()
	defer m.delMu.Unlock()
	m.pending[s] = time.AfterFunc(time.Duration(delayMs)*time.Millisecond, func() {
		m.delMu.Lock()
		_, ok := m.pending[s]
		delete(m.pending, s)
		m.delMu.Unlock()
		if ok {
			s.release()
		}
	})
}

// finishDeletes releases every pending deleted segment now (release=true) or
// just forgets them (a simulated crash leaves the *.deleted files behind).
func (m *Manager) finishDeletes(release bool) {
	m.delMu.Lock()
	var segs []*segment
	for s, t := range m.pending {
		if t.Stop() {
			segs = append(segs, s)
		}
		delete(m.pending, s)
	}
	m.delMu.Unlock()
	for _, s := range segs {
		if release {
			s.release()
		} else {
			s.log.Close()
		}
	}
}

// SetBrokerEpoch sets the broker epoch Close records in every clean-shutdown marker
// (Kafka's CleanShutdownFileHandler): the epoch of the broker's registration when its
// logs were closed cleanly, which the next process names as its previous broker
// epoch when it registers, so that the controller keeps it among the eligible leader
// replicas. At most 0: none is recorded.
func (m *Manager) SetBrokerEpoch(epoch int64) { m.brokerEpoch.Store(epoch) }

// CleanShutdownEpoch is the broker epoch the clean-shutdown markers recorded when
// Open found them (Kafka's readBrokerEpochFromCleanShutdownFiles): -1 unless every
// log directory was closed cleanly and records the same epoch.
func (m *Manager) CleanShutdownEpoch() int64 { return m.cleanEpoch }

// Close flushes every log, writes the checkpoints and the clean-shutdown
// marker (with the broker epoch of SetBrokerEpoch). It is idempotent.
func (m *Manager) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	m.mu.Unlock()
	close(m.stop)
	m.cl.stop()
	m.wg.Wait()
	m.stopManualFlushers()
	first, dirErr := m.closeLogs(m.Logs())
	m.rm.close()
	m.finishDeletes(true)
	m.bg.Wait()
	for _, d := range m.dirs {
		d.closeFSSync()
	}
	for _, d := range m.dirs {
		d.mu.Lock()
		bad := d.err != nil
		d.mu.Unlock()
		if err := m.writeDirCheckpoints(d); err != nil {
			bad = true
			if first == nil {
				first = err
			}
		}
		if bad || dirErr[d] {
			continue
		}
		if err := writeFileAtomic(m.fs, filepath.Join(d.path, cleanShutdownFile), markerContent(m.brokerEpoch.Load())); err != nil && first == nil {
			first = err
		}
	}
	m.unlock()
	return first
}

// closeLogs closes logs cleanly, flushParallel at a time (their syncs go to
// the file system together, as a flusher round's do). It returns the first
// error and the directories of the logs that failed.
func (m *Manager) closeLogs(logs []*Log) (error, map[*logDir]bool) {
	var mu sync.Mutex
	var first error
	dirErr := map[*logDir]bool{}
	var next atomic.Int64
	work := func() {
		for {
			i := next.Add(1) - 1
			if i >= int64(len(logs)) {
				return
			}
			l := logs[i]
			if err := l.close(closeClean); err != nil {
				m.logger.Error("close log", "tp", l.tp, "err", err)
				mu.Lock()
				dirErr[l.ld] = true
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
		}
	}
	var wg sync.WaitGroup
	for range min(len(logs), flushParallel) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			work()
		}()
	}
	wg.Wait()
	return first, dirErr
}

// abandon stops the goroutines and closes the files without flushing,
// checkpointing or marking a clean shutdown: what a crash leaves behind.
func (m *Manager) abandon() {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return
	}
	m.closed = true
	m.mu.Unlock()
	close(m.stop)
	m.cl.stop()
	m.wg.Wait()
	m.stopManualFlushers()
	for _, l := range m.Logs() {
		l.close(closeCrash)
	}
	m.finishDeletes(false)
	m.bg.Wait()
	for _, d := range m.dirs {
		d.closeFSSync()
	}
	m.unlock()
}

// flushRound runs one group-commit round of every directory on the calling
// goroutine (Options.manualBackground).
func (m *Manager) flushRound() {
	var logs []*Log
	var ws []*waiter
	for _, d := range m.dirs {
		d.round(&logs, &ws, monoNow())
	}
}

// stopManualFlushers does what the flusher goroutines do when stopped: a
// last round, then every waiter left fails.
func (m *Manager) stopManualFlushers() {
	if !m.opts.manualBackground {
		return
	}
	m.flushRound()
	for _, d := range m.dirs {
		d.failWaiters(ErrClosed)
	}
}
