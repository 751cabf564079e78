package tiered

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/samsa-broker/samsa/engine"
	"github.com/samsa-broker/samsa/engine/remote"
	"github.com/samsa-broker/samsa/replication"
)

// Metadata is the remote log metadata manager the copies are recorded in
// (coordinator/remotelog's Manager, Kafka's RemoteLogMetadataManager).
type Metadata interface {
	AddRemoteLogSegmentMetadata(ctx context.Context, md *remote.SegmentMetadata) error
	UpdateRemoteLogSegmentMetadata(ctx context.Context, u *remote.SegmentMetadataUpdate) error
	ListRemoteLogSegments(tp remote.TopicIDPartition) ([]remote.SegmentMetadata, error)
	PutRemotePartitionDeleteMetadata(ctx context.Context, d *remote.PartitionDeleteMetadata) error
	// PartitionDeletions lists the partitions whose deletion is marked or
	// started, not finished, that this node is to finish (coordinator/remotelog:
	// those of the metadata partitions it leads).
	PartitionDeletions() ([]remote.TopicIDPartition, error)
}

// Config is a Manager's: Kafka's broker keys where it has them.
type Config struct {
	NodeID   int32
	Replicas *replication.Manager
	Storage  *remote.StorageManager
	Metadata Metadata
	// Interval is remote.log.manager.task.interval.ms (30 s).
	Interval time.Duration
	// CopyBytesPerSecond is remote.log.manager.copy.max.bytes.per.second
	// (≤ 0: unlimited).
	CopyBytesPerSecond int64
	// ReaderThreads is remote.log.reader.threads (10): reads from remote
	// storage running at once; more wait.
	ReaderThreads int
	// FetchBytesPerSecond is remote.log.manager.fetch.max.bytes.per.second
	// (≤ 0: unlimited): over it, a consumer's fetch reads nothing from
	// remote storage (fetch.go).
	FetchBytesPerSecond int64
	// FetchMaxWait is remote.fetch.max.wait.ms (500 ms): how long a
	// consumer's fetch waits for its read from remote storage (fetch.go).
	FetchMaxWait time.Duration
	// ChunkCache keeps the segment bytes read from remote storage
	// (fetch.chunk.cache.*); nil: the built-in one, defaultCacheChunks
	// chunks of defaultChunk bytes in memory, reading defaultReadAhead ahead.
	ChunkCache *ChunkCache
	// ChunkSize is the unit of reads and of the chunk cache
	// (rsm.config.chunk.size with ChunkCache; defaultChunk without).
	ChunkSize int64
	// PrefetchBytes is how far past a read the chunks are read ahead into
	// ChunkCache (fetch.chunk.cache.prefetch.max.size).
	PrefetchBytes int64
	// TempDir holds an empty producer snapshot for a segment that has none
	// on disk ("": the system's).
	TempDir string
	// EnsureMetadata, if set, makes the metadata's store ready (creates the
	// __remote_log_metadata topic): called by the task before its first
	// partition, until it succeeds. The topic is created on first need, not
	// when the broker starts, so that its replication factor counts the
	// brokers of a cluster that is up.
	EnsureMetadata func(ctx context.Context) error
	Logger         *slog.Logger
	Now            func() time.Time
}

// Manager is the remote log manager. Start runs its task; Read may be
// called from any goroutine.
type Manager struct {
	cfg      Config
	log      *slog.Logger
	readers  chan struct{}
	copyLim  *limiter
	fetchLim *limiter

	stats stats // counts by topic (stats.go)

	deleted map[remote.TopicIDPartition]bool // partitions deleted here whose copies are to go; true once marked (under mu)

	runMu    sync.Mutex                            // one RunOnce at a time
	ensured  bool                                  // EnsureMetadata succeeded (under runMu)
	lastErrs map[engine.TopicPartition]loggedError // the last task error logged per partition (under runMu)

	mu       sync.Mutex
	parts    map[engine.TopicPartition]*partState
	idx      map[indexKey][]byte // indexes of copies read lately (offset, transaction)
	idxLRU   []indexKey
	inflight map[chunkKey]chan struct{} // chunks being read from the store, closed when the read ends (chunks.go)
	fetches  map[fetchKey]*pendingFetch // consumers' reads under way (fetch.go)
	closed   bool                       // Close began: no more read-ahead

	cache     *ChunkCache // segment bytes read lately (chunks.go)
	pool      *chunkPool  // the buffers of chunks no longer held, for the next chunks read
	chunkSize int64
	prefetch  int // chunks read ahead of a read

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// partState is what the manager knows of a tiered partition's copies, as of
// its last listing.
type partState struct {
	copies    []remote.SegmentMetadata // COPY_SEGMENT_FINISHED, by start offset
	remoteEnd int64                    // the end of the last finished copy (0: none)
	copyLag   int64                    // bytes of sealed segments left to copy, as of the leader's last task
}

// loggedError is a task error logged, kept so that the same error repeating
// every task interval is logged once a minute.
type loggedError struct {
	msg string
	at  time.Time
}

// New returns a Manager; it does nothing until Start or RunOnce.
func New(cfg Config) *Manager {
	if cfg.Interval <= 0 {
		cfg.Interval = 30 * time.Second
	}
	if cfg.ReaderThreads <= 0 {
		cfg.ReaderThreads = 10
	}
	if cfg.FetchMaxWait <= 0 {
		cfg.FetchMaxWait = 500 * time.Millisecond
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	m := &Manager{cfg: cfg, log: cfg.Logger, readers: make(chan struct{}, cfg.ReaderThreads), copyLim: newLimiter(cfg.CopyBytesPerSecond),
		parts: map[engine.TopicPartition]*partState{}, idx: map[indexKey][]byte{}, lastErrs: map[engine.TopicPartition]loggedError{},
		deleted: map[remote.TopicIDPartition]bool{}, inflight: map[chunkKey]chan struct{}{}, cache: cfg.ChunkCache, chunkSize: cfg.ChunkSize}
	m.fetches = map[fetchKey]*pendingFetch{}
	m.fetchLim = newLimiter(cfg.FetchBytesPerSecond)
	if m.cache == nil {
		m.cache, _ = NewChunkCache(ChunkCacheConfig{Size: defaultCacheChunks * defaultChunk}) // in memory: no error
		m.chunkSize, m.prefetch = defaultChunk, defaultReadAhead
	} else {
		if m.chunkSize <= 0 {
			m.chunkSize = defaultChunk
		}
		m.prefetch = int((max(cfg.PrefetchBytes, 0) + m.chunkSize - 1) / m.chunkSize)
	}
	m.pool = newChunkPool(m.chunkSize)
	m.ctx, m.cancel = context.WithCancel(context.Background())
	return m
}

// Start runs the task every Interval until Close.
func (m *Manager) Start() {
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		t := time.NewTicker(m.cfg.Interval)
		defer t.Stop()
		for {
			select {
			case <-m.ctx.Done():
				return
			case <-t.C:
				m.RunOnce(m.ctx)
			}
		}
	}()
}

// Close stops the task (a copy under way is cancelled and cleaned up by the
// next leader's task) and the reads ahead, and waits for them.
func (m *Manager) Close() {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	m.cancel()
	m.wg.Wait()
}

// Enabled implements replication.RemoteLog.
func (m *Manager) Enabled(p *replication.Partition) bool {
	el := p.EngineLog()
	return el != nil && el.Config().RemoteStorage
}

// LogStartOffset implements replication.RemoteLog.
func (m *Manager) LogStartOffset(p *replication.Partition) (int64, bool) {
	st := m.state(p)
	if st == nil || len(st.copies) == 0 {
		return 0, false
	}
	return st.copies[0].StartOffset, true
}

// RemoteEnd implements replication.RemoteLog.
func (m *Manager) RemoteEnd(p *replication.Partition) int64 {
	if st := m.state(p); st != nil {
		return st.remoteEnd
	}
	return 0
}

// state returns p's known copies, listing them first if they never were.
func (m *Manager) state(p *replication.Partition) *partState {
	m.mu.Lock()
	st := m.parts[p.TopicPartition()]
	m.mu.Unlock()
	if st != nil {
		return st
	}
	st, err := m.refresh(p)
	if err != nil {
		// Unreadable metadata (no replica of its partition here, or not yet):
		// no copies until the task's next listing, so that the fetches that ask
		// for the log start do not read the metadata each time.
		st = &partState{}
		m.mu.Lock()
		if m.parts[p.TopicPartition()] == nil {
			m.parts[p.TopicPartition()] = st
		}
		m.mu.Unlock()
	}
	return st
}

// refresh lists p's copies and records the finished ones.
func (m *Manager) refresh(p *replication.Partition) (*partState, error) {
	all, err := m.cfg.Metadata.ListRemoteLogSegments(topicIDPartition(p))
	if err != nil {
		return nil, err
	}
	st := &partState{}
	for _, md := range all {
		if md.State == remote.CopySegmentFinished {
			st.copies = append(st.copies, md)
			st.remoteEnd = max(st.remoteEnd, md.EndOffset+1)
		}
	}
	m.mu.Lock()
	if old := m.parts[p.TopicPartition()]; old != nil {
		st.copyLag = old.copyLag
	}
	m.parts[p.TopicPartition()] = st
	m.mu.Unlock()
	if el := p.EngineLog(); el != nil && st.remoteEnd > 0 {
		el.SetRemoteEnd(st.remoteEnd)
	}
	return st, nil
}

func topicIDPartition(p *replication.Partition) remote.TopicIDPartition {
	tp := p.TopicPartition()
	return remote.TopicIDPartition{TopicID: remote.Uuid(p.TopicID()), Topic: tp.Topic, Partition: tp.Partition}
}

// RunOnce runs the task once over every tiered partition here: for those this
// node leads, clean-up, copies, local and remote retention (see the package
// doc); for the others, the remote end the leader's copies reached, and local
// retention up to it. The errors of each partition are logged and joined.
func (m *Manager) RunOnce(ctx context.Context) error {
	m.runMu.Lock()
	defer m.runMu.Unlock()
	var errs []error
	if err := m.deleteDeleted(ctx); err != nil {
		errs = append(errs, err)
	}
	for _, p := range m.cfg.Replicas.Partitions() {
		if !m.Enabled(p) {
			if err := m.deleteDisabled(ctx, p); err != nil {
				m.logTaskError(p.TopicPartition(), err)
				errs = append(errs, fmt.Errorf("%s: %w", p.TopicPartition(), err))
			}
			continue
		}
		if !m.ensured && m.cfg.EnsureMetadata != nil {
			if err := m.cfg.EnsureMetadata(ctx); err != nil {
				m.logTaskError(p.TopicPartition(), fmt.Errorf("preparing the remote log metadata: %w", err))
				return err
			}
		}
		m.ensured = true
		run := m.runPartition
		if p.Role() != replication.RoleLeader {
			run = m.followPartition
		}
		if err := run(ctx, p); err != nil {
			m.logTaskError(p.TopicPartition(), err)
			errs = append(errs, fmt.Errorf("%s: %w", p.TopicPartition(), err))
		} else {
			delete(m.lastErrs, p.TopicPartition())
		}
	}
	return errors.Join(errs...)
}

// PartitionDeleted implements replication.RemoteLog: the deletion is marked
// in the remote log metadata at once (DELETE_PARTITION_MARKED, on its own
// goroutine: the caller must not block), and the next task deletes the
// partition's copies.
func (m *Manager) PartitionDeleted(p *replication.Partition) {
	tp := topicIDPartition(p)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.deleted[tp] = false
	delete(m.parts, p.TopicPartition())
	if m.closed {
		return
	}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		ctx, cancel := context.WithTimeout(m.ctx, 30*time.Second)
		defer cancel()
		if err := m.putPartitionDelete(ctx, tp, remote.DeletePartitionMarked); err != nil {
			m.log.Debug("marking a deleted partition's copies for deletion", "partition", tp, "err", err)
			return // the task marks it
		}
		m.mu.Lock()
		if _, ok := m.deleted[tp]; ok {
			m.deleted[tp] = true
		}
		m.mu.Unlock()
	}()
}

func (m *Manager) putPartitionDelete(ctx context.Context, tp remote.TopicIDPartition, st remote.PartitionDeleteState) error {
	return m.cfg.Metadata.PutRemotePartitionDeleteMetadata(ctx, &remote.PartitionDeleteMetadata{Partition: tp, BrokerID: m.cfg.NodeID,
		EventTimestamp: m.cfg.Now().UnixMilli(), State: st})
}

// deleteDeleted (under runMu) deletes the copies of the partitions deleted here (every
// replica of a deleted topic tries: a copy another one deleted first is
// gone from the listing), and of those whose deletion the metadata shows
// unfinished (Metadata.PartitionDeletions: begun by a node that stopped
// before it finished, this one included), as Kafka's RemoteLogManager
// deletes a partition's remote log: DELETE_PARTITION_MARKED (unless
// PartitionDeleted marked it), DELETE_PARTITION_STARTED, each copy,
// DELETE_PARTITION_FINISHED. A partition whose copies cannot all be deleted
// is tried again by the next task.
func (m *Manager) deleteDeleted(ctx context.Context) error {
	m.mu.Lock()
	todo := maps.Clone(m.deleted)
	m.mu.Unlock()
	var errs []error
	pending, err := m.cfg.Metadata.PartitionDeletions()
	if err != nil {
		errs = append(errs, fmt.Errorf("listing the unfinished deletions of partitions: %w", err))
	}
	for _, tp := range pending {
		if _, ok := todo[tp]; !ok {
			todo[tp] = true
		}
	}
	for tp, marked := range todo {
		n, err := m.deletePartition(ctx, tp, marked)
		if err != nil {
			err = fmt.Errorf("deleting the copies of deleted partition %s: %w", tp, err)
			m.logTaskError(engine.TopicPartition{Topic: tp.Topic, Partition: tp.Partition}, err)
			errs = append(errs, err)
			continue
		}
		m.log.Info("deleted the copies of a deleted partition", "partition", tp, "copies", n)
		m.mu.Lock()
		delete(m.deleted, tp)
		m.mu.Unlock()
	}
	return errors.Join(errs...)
}

// deletePartition deletes tp's copies between DELETE_PARTITION_STARTED and
// DELETE_PARTITION_FINISHED, marking the deletion first unless marked; it
// returns the number of copies deleted.
func (m *Manager) deletePartition(ctx context.Context, tp remote.TopicIDPartition, marked bool) (int, error) {
	if !marked {
		if err := m.putPartitionDelete(ctx, tp, remote.DeletePartitionMarked); err != nil {
			return 0, err
		}
		m.mu.Lock()
		if _, ok := m.deleted[tp]; ok {
			m.deleted[tp] = true
		}
		m.mu.Unlock()
	}
	if err := m.putPartitionDelete(ctx, tp, remote.DeletePartitionStarted); err != nil {
		return 0, err
	}
	segs, err := m.cfg.Metadata.ListRemoteLogSegments(tp)
	if err != nil {
		return 0, err
	}
	for i := range segs {
		if err := m.deleteCopy(ctx, &segs[i]); err != nil {
			return i, err
		}
	}
	return len(segs), m.putPartitionDelete(ctx, tp, remote.DeletePartitionFinished)
}

// deleteDisabled (under runMu), on the leader of a partition whose
// remote.storage.enable was turned off with remote.log.delete.on.disable,
// deletes the copies made while it was on, as a deleted partition's
// (deletePartition; Kafka's stopPartitions with deleteRemoteLog): its log
// starts at the local log start from then on. Nothing is listed for the
// other partitions that are not tiered.
func (m *Manager) deleteDisabled(ctx context.Context, p *replication.Partition) error {
	el := p.EngineLog()
	if el == nil || !el.Config().RemoteLogDeleteOnDisable || p.Role() != replication.RoleLeader {
		return nil
	}
	tp := topicIDPartition(p)
	segs, err := m.cfg.Metadata.ListRemoteLogSegments(tp)
	if err != nil || len(segs) == 0 {
		return nil // no metadata readable here (no copy ever made), or nothing left
	}
	n, err := m.deletePartition(ctx, tp, false)
	if err != nil {
		return fmt.Errorf("deleting the copies, remote storage disabled: %w", err)
	}
	m.mu.Lock()
	delete(m.parts, p.TopicPartition())
	m.mu.Unlock()
	m.log.Info("deleted the copies of a partition whose remote storage was disabled", "partition", tp, "copies", n)
	return nil
}

// logTaskError logs a partition's task error, the same one at most once a
// minute. Caller holds runMu.
func (m *Manager) logTaskError(tp engine.TopicPartition, err error) {
	now := time.Now()
	if last, ok := m.lastErrs[tp]; ok && last.msg == err.Error() && now.Sub(last.at) < time.Minute {
		return
	}
	m.lastErrs[tp] = loggedError{err.Error(), now}
	m.log.Warn("tiered storage task", "partition", tp, "err", err)
}

// followPartition is the task of a follower replica (Kafka's RLMFollowerTask): it
// learns how far the leader's copies reach, so that local retention deletes the
// segments copied by the leader here too.
func (m *Manager) followPartition(_ context.Context, p *replication.Partition) error {
	if _, err := m.refresh(p); err != nil {
		// No replica of the metadata partition here (or not yet): the local
		// segments stay, as when nothing is copied. Not worth a warning per task.
		m.log.Debug("tiered storage: follower cannot list the copies", "partition", p.TopicPartition(), "err", err)
		return nil
	}
	_, err := p.EngineLog().EnforceRetention()
	return err
}

// leading reports whether this node still leads p at epoch.
func leading(p *replication.Partition, epoch int32) bool {
	return p.Role() == replication.RoleLeader && p.LeaderEpoch() == epoch
}

func (m *Manager) runPartition(ctx context.Context, p *replication.Partition) error {
	epoch := p.LeaderEpoch()
	el := p.EngineLog()
	all, err := m.cfg.Metadata.ListRemoteLogSegments(topicIDPartition(p))
	if err != nil {
		return err
	}
	// 2. Copies a leader left unfinished, and deletions left half done.
	for i := range all {
		md := &all[i]
		if md.State != remote.CopySegmentStarted && md.State != remote.DeleteSegmentStarted {
			continue
		}
		if !leading(p, epoch) {
			return nil
		}
		if err := m.deleteCopy(ctx, md); err != nil {
			return err
		}
	}
	st, err := m.refresh(p)
	if err != nil {
		return err
	}
	// 3. Copies (none under remote.log.copy.disable).
	upTo := min(el.HighWatermark(), el.LastStableOffset())
	if el.Config().RemoteCopyDisable {
		upTo = 0
	}
	m.noteCopyLag(p, el, upTo)
	for _, s := range el.SealedSegments(upTo) {
		if s.Next <= st.remoteEnd {
			continue
		}
		if !leading(p, epoch) {
			return nil
		}
		if err := m.copySegment(ctx, p, epoch, el, s); err != nil {
			return err
		}
		if st, err = m.refresh(p); err != nil {
			return err
		}
	}
	m.noteCopyLag(p, el, upTo)
	// 4. Local retention, now that the copies moved the remote end.
	if _, err := el.EnforceRetention(); err != nil {
		return err
	}
	// 5. Remote retention.
	if !leading(p, epoch) {
		return nil
	}
	return m.remoteRetention(ctx, p, el, st)
}

// noteCopyLag records the bytes of p's sealed segments below upTo not copied
// yet [RemoteCopyLagBytes].
func (m *Manager) noteCopyLag(p *replication.Partition, el *engine.Log, upTo int64) {
	end := el.RemoteEnd()
	var lag int64
	for _, s := range el.SealedSegments(upTo) {
		if s.Next > end {
			lag += s.Size
		}
	}
	m.mu.Lock()
	if st := m.parts[p.TopicPartition()]; st != nil {
		st.copyLag = lag
	}
	m.mu.Unlock()
}

// copySegment copies one sealed segment and records it.
func (m *Manager) copySegment(ctx context.Context, p *replication.Partition, epoch int32, el *engine.Log, s engine.SealedSegment) error {
	var epochs []remote.EpochEntry
	all := el.LeaderEpochs()
	for _, e := range engine.EpochsIn(all, s.Base, s.Next) {
		epochs = append(epochs, remote.EpochEntry{Epoch: e.Epoch, StartOffset: e.StartOffset})
	}
	if len(epochs) == 0 {
		return fmt.Errorf("segment %d: no leader epoch covers it", s.Base)
	}
	var upToEnd []engine.EpochStart
	for _, e := range all {
		if e.StartOffset < s.Next {
			upToEnd = append(upToEnd, e)
		}
	}
	md := &remote.SegmentMetadata{
		ID: remote.NewSegmentID(topicIDPartition(p)), StartOffset: s.Base, EndOffset: s.Next - 1, MaxTimestamp: s.MaxTimestamp,
		BrokerID: m.cfg.NodeID, EventTimestamp: m.cfg.Now().UnixMilli(), SegmentSize: s.Size, LeaderEpochs: epochs,
		State: remote.CopySegmentStarted,
	}
	data := &remote.LogSegmentData{LogSegment: s.Log, OffsetIndex: s.OffsetIndex, TimeIndex: s.TimeIndex, TransactionIndex: s.TxnIndex,
		ProducerSnapshot: s.ProducerSnapshot, LeaderEpochIndex: engine.EncodeEpochCheckpoint(upToEnd)}
	if data.ProducerSnapshot == "" {
		f, err := m.emptySnapshot()
		if err != nil {
			return err
		}
		defer os.Remove(f)
		data.ProducerSnapshot = f
	}
	if err := m.cfg.Metadata.AddRemoteLogSegmentMetadata(ctx, md); err != nil {
		return err
	}
	if err := m.copyLim.wait(ctx, s.Size); err != nil {
		return err // the copy is left STARTED: the next task cleans it up
	}
	start := time.Now()
	if err := m.cfg.Storage.CopyLogSegmentData(ctx, md, data); err != nil {
		m.stats.topic(md.ID.Topic).copyErrors.Add(1)
		if derr := m.deleteCopy(ctx, md); derr != nil {
			m.log.Warn("cleaning up a failed copy", "segment", md.ID, "err", derr)
		}
		return fmt.Errorf("copy segment %d: %w", s.Base, err)
	}
	if !leading(p, epoch) {
		// Deposed mid-copy: the copy is not ours to finish.
		return m.deleteCopy(ctx, md)
	}
	if err := m.cfg.Metadata.UpdateRemoteLogSegmentMetadata(ctx, &remote.SegmentMetadataUpdate{ID: md.ID, BrokerID: m.cfg.NodeID,
		EventTimestamp: m.cfg.Now().UnixMilli(), State: remote.CopySegmentFinished}); err != nil {
		return err
	}
	el.SetRemoteEnd(s.Next)
	m.stats.topic(md.ID.Topic).copyBytes.Add(s.Size)
	m.log.Info("copied segment to remote storage", "partition", p.TopicPartition(), "base", s.Base, "next", s.Next,
		"bytes", s.Size, "took", time.Since(start), "segment", md.ID.ID)
	return nil
}

// emptySnapshot writes an empty producer snapshot to stand for a missing one.
func (m *Manager) emptySnapshot() (string, error) {
	f, err := os.CreateTemp(m.cfg.TempDir, "empty-*.snapshot")
	if err != nil {
		return "", err
	}
	name := f.Name()
	return filepath.Clean(name), f.Close()
}

// deleteCopy deletes a copy: DELETE_SEGMENT_STARTED (unless it is already),
// the objects, DELETE_SEGMENT_FINISHED.
func (m *Manager) deleteCopy(ctx context.Context, md *remote.SegmentMetadata) error {
	if md.State != remote.DeleteSegmentStarted {
		if err := m.cfg.Metadata.UpdateRemoteLogSegmentMetadata(ctx, &remote.SegmentMetadataUpdate{ID: md.ID, BrokerID: m.cfg.NodeID,
			EventTimestamp: m.cfg.Now().UnixMilli(), State: remote.DeleteSegmentStarted}); err != nil {
			return err
		}
	}
	if err := m.cfg.Storage.DeleteLogSegmentData(ctx, md); err != nil {
		m.stats.topic(md.ID.Topic).deleteErrors.Add(1)
		return err
	}
	m.forgetIndex(md.ID.ID)
	return m.cfg.Metadata.UpdateRemoteLogSegmentMetadata(ctx, &remote.SegmentMetadataUpdate{ID: md.ID, BrokerID: m.cfg.NodeID,
		EventTimestamp: m.cfg.Now().UnixMilli(), State: remote.DeleteSegmentFinished})
}

// remoteRetention deletes the copies wholly below the log start DeleteRecords
// raised, then the oldest copies beyond retention.bytes (the whole log: the
// copies and the local bytes not copied) or older than retention.ms (by their
// largest timestamp), as Kafka's RLMExpirationTask.
// A copy is deleted only if every later offset stays readable: locally or
// in a later copy.
func (m *Manager) remoteRetention(ctx context.Context, p *replication.Partition, el *engine.Log, st *partState) error {
	cfg := el.Config()
	// The log start DeleteRecords raised: the copies wholly below it go first.
	if start := el.RemoteLogStart(); start > 0 {
		kept := st.copies[:0:0]
		for i := range st.copies {
			c := &st.copies[i]
			if c.EndOffset >= start {
				kept = append(kept, *c)
				continue
			}
			if err := m.deleteCopy(ctx, c); err != nil {
				return err
			}
			m.log.Info("deleted remote segment below the log start", "partition", p.TopicPartition(), "base", c.StartOffset, "end", c.EndOffset, "log_start", start)
		}
		if len(kept) < len(st.copies) {
			var err error
			if st, err = m.refresh(p); err != nil {
				return err
			}
		}
	}
	if cfg.RetentionMs < 0 && cfg.RetentionBytes < 0 {
		return nil
	}
	var total int64
	for _, c := range st.copies {
		total += c.SegmentSize
	}
	for _, s := range el.SealedSegments(el.LogEndOffset()) {
		if s.Base >= st.remoteEnd {
			total += s.Size
		}
	}
	total += activeSize(el)
	now := m.cfg.Now().UnixMilli()
	deleted := false
	for i := range st.copies {
		c := &st.copies[i]
		byTime := cfg.RetentionMs >= 0 && now-c.MaxTimestamp > cfg.RetentionMs
		bySize := cfg.RetentionBytes >= 0 && total-c.SegmentSize >= cfg.RetentionBytes
		if !byTime && !bySize {
			break
		}
		if err := m.deleteCopy(ctx, c); err != nil {
			return err
		}
		total -= c.SegmentSize
		deleted = true
		m.log.Info("deleted remote segment by retention", "partition", p.TopicPartition(), "base", c.StartOffset, "end", c.EndOffset)
	}
	if deleted {
		_, err := m.refresh(p)
		return err
	}
	return nil
}

// activeSize is the size of the local bytes past the sealed segments.
func activeSize(el *engine.Log) int64 {
	var sealed int64
	for _, s := range el.SealedSegments(el.LogEndOffset()) {
		sealed += s.Size
	}
	return max(el.Size()-sealed, 0)
}

// copyOf returns the finished copy holding offset, by the latest listing.
func (m *Manager) copyOf(p *replication.Partition, offset int64) (remote.SegmentMetadata, bool, int64) {
	st := m.state(p)
	if st == nil || len(st.copies) == 0 {
		return remote.SegmentMetadata{}, false, -1
	}
	i, _ := slices.BinarySearchFunc(st.copies, offset, func(c remote.SegmentMetadata, off int64) int {
		switch {
		case c.EndOffset < off:
			return -1
		case c.StartOffset > off:
			return 1
		}
		return 0
	})
	if i < len(st.copies) && st.copies[i].StartOffset <= offset && offset <= st.copies[i].EndOffset {
		return st.copies[i], true, st.copies[0].StartOffset
	}
	return remote.SegmentMetadata{}, false, st.copies[0].StartOffset
}
