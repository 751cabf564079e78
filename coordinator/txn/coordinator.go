package txn

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/samsa-broker/samsa/coordinator/statelog"
)

// Config holds the coordinator's settings; zero fields take Apache Kafka's
// defaults.
type Config struct {
	// NumPartitions of __transaction_state
	// (transaction.state.log.num.partitions, 50).
	NumPartitions int32
	// OffsetsPartitions of __consumer_offsets (offsets.topic.num.partitions,
	// 50): AddOffsetsToTxn adds the group's partition to the transaction.
	OffsetsPartitions int32
	// MaxTimeout bounds a producer's transaction.timeout.ms
	// (transaction.max.timeout.ms, 15 min).
	MaxTimeout time.Duration
	// IDExpiration is how long an idle transactional id is kept
	// (transactional.id.expiration.ms, 7 days).
	IDExpiration time.Duration
	// AbortInterval is the period of the scan that aborts timed-out
	// transactions (transaction.abort.timed.out.transaction.cleanup.interval.ms,
	// 10 s).
	AbortInterval time.Duration
	// ExpirationInterval is the period of the scan that expires idle
	// transactional ids (transaction.remove.expired.transaction.cleanup.interval.ms,
	// 1 h).
	ExpirationInterval time.Duration
	// RetryBackoff is the pause before a marker or a completion is tried
	// again (100 ms).
	RetryBackoff time.Duration
	// TransactionVersion is the finalized transaction.version feature the
	// coordinator starts at (0 or 1: KIP-890 part 1 only; 2: part 2, an
	// epoch bump at every EndTxn of the clients that send EndTxn v5+);
	// SetTransactionVersion changes it when the cluster's level changes.
	// Records are written in TransactionLogValue version 1 under 2, version 0
	// otherwise.
	TransactionVersion int16
	// MaxTombstonesPerAppend bounds one append of expired ids (1000).
	MaxTombstonesPerAppend int
	// Clock drives every timer. Nil: the system clock.
	Clock Clock
	// Logger receives the coordinator's events (slog.Default() when nil).
	Logger *slog.Logger
}

func (c *Config) fill() {
	if c.NumPartitions <= 0 {
		c.NumPartitions = 50
	}
	if c.OffsetsPartitions <= 0 {
		c.OffsetsPartitions = 50
	}
	if c.MaxTimeout <= 0 {
		c.MaxTimeout = 15 * time.Minute
	}
	if c.IDExpiration <= 0 {
		c.IDExpiration = 7 * 24 * time.Hour
	}
	if c.AbortInterval <= 0 {
		c.AbortInterval = 10 * time.Second
	}
	if c.ExpirationInterval <= 0 {
		c.ExpirationInterval = time.Hour
	}
	if c.RetryBackoff <= 0 {
		c.RetryBackoff = 100 * time.Millisecond
	}
	if c.MaxTombstonesPerAppend <= 0 {
		c.MaxTombstonesPerAppend = 1000
	}
	if c.Clock == nil {
		c.Clock = SystemClock{}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Clock is the coordinator's source of time and timers. Tests inject a
// fake whose timers fire when the test advances it.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f on its own goroutine (or the fake's advancing
	// caller) once d has passed; Stop prevents a call not yet started.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending AfterFunc call.
type Timer interface{ Stop() bool }

// SystemClock is the wall clock with time.AfterFunc timers.
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }

// AfterFunc wraps time.AfterFunc.
func (SystemClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// ProducerIDs hands out producer ids that are never handed out twice in
// the cluster (the broker's blocks from AllocateProducerIds).
// NextProducerID may block briefly (waiting for a block); the coordinator
// calls it with no lock held, on the goroutine of the request (or of a
// timer) that needs one.
type ProducerIDs interface {
	NextProducerID() (int64, error)
}

// ProducerIDFunc adapts a function to ProducerIDs.
type ProducerIDFunc func() (int64, error)

// NextProducerID calls f.
func (f ProducerIDFunc) NextProducerID() (int64, error) { return f() }

// Coordinator is the transaction coordinator of the __transaction_state
// partitions this broker leads. All methods are safe for concurrent use;
// answers go to callbacks, run with no lock held on the caller's
// goroutine, a timer's, or the Log's or MarkerChannel's completion
// goroutine.
//
// Lock order: Coordinator.mu is taken alone; the Log, the MarkerChannel
// and ProducerIDs are called with it held only for Log.Append (whose done
// may run inline: it is then deferred until the lock is released).
type Coordinator struct {
	cfg     Config
	log     Log
	markers MarkerChannel
	pids    ProducerIDs
	clock   Clock
	logger  *slog.Logger
	tv      atomic.Int32 // the finalized transaction.version (SetTransactionVersion)

	mu struct {
		sync.Mutex
		parts       map[int32]*partition
		closed      bool
		abortTimer  Timer
		expireTimer Timer
	}
}

// partition is a __transaction_state partition this coordinator owns (or
// is loading).
type partition struct {
	id      int32
	epoch   int32 // the coordinator epoch: the partition's leader epoch
	loading bool
	txns    map[string]*txnMeta
}

// New returns a coordinator owning no partitions; LoadPartition takes them
// on. It starts the timers of the timeout and expiration scans.
func New(cfg Config, log Log, markers MarkerChannel, pids ProducerIDs) *Coordinator {
	cfg.fill()
	c := &Coordinator{cfg: cfg, log: log, markers: markers, pids: pids, clock: cfg.Clock, logger: cfg.Logger}
	c.tv.Store(int32(cfg.TransactionVersion))
	c.mu.parts = map[int32]*partition{}
	// Under the lock: a timer that fires at once re-arms itself under it.
	c.mu.Lock()
	c.mu.abortTimer = c.clock.AfterFunc(cfg.AbortInterval, c.abortTick)
	c.mu.expireTimer = c.clock.AfterFunc(cfg.ExpirationInterval, c.expireTick)
	c.mu.Unlock()
	return c
}

// Close stops the timers and drops every partition: requests get
// NOT_COORDINATOR, appends and markers in flight are dropped when they
// finish.
func (c *Coordinator) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.closed = true
	c.mu.abortTimer.Stop()
	c.mu.expireTimer.Stop()
	clear(c.mu.parts)
}

// SetTransactionVersion sets the finalized transaction.version the coordinator acts
// on from now on (the broker calls it when its metadata image changes the level, as
// Kafka's coordinator reads the level of its metadata cache at each request): an
// EndTxn or a timeout that completes a transaction later bumps the epoch per
// transaction only at 2; a transaction already under way keeps the version it
// recorded for its markers.
func (c *Coordinator) SetTransactionVersion(v int16) { c.tv.Store(int32(v)) }

// TransactionVersion returns the finalized transaction.version the coordinator acts
// on.
func (c *Coordinator) TransactionVersion() int16 { return int16(c.tv.Load()) }

// PartitionFor returns the __transaction_state partition of id.
func (c *Coordinator) PartitionFor(id string) int32 { return PartitionFor(id, c.cfg.NumPartitions) }

// NumPartitions is the configured partition count of __transaction_state.
func (c *Coordinator) NumPartitions() int32 { return c.cfg.NumPartitions }

// Status returns the error code a request for id gets before it reaches
// its state: 0 when this coordinator serves it, NOT_COORDINATOR or
// COORDINATOR_LOAD_IN_PROGRESS otherwise (FindCoordinator uses it too).
func (c *Coordinator) Status(id string) int16 {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, code := c.partitionLocked(c.PartitionFor(id))
	return code
}

func (c *Coordinator) partitionLocked(p int32) (*partition, int16) {
	if c.mu.closed {
		return nil, kerr.NotCoordinator.Code
	}
	part := c.mu.parts[p]
	switch {
	case part == nil:
		return nil, kerr.NotCoordinator.Code
	case part.loading:
		return nil, kerr.CoordinatorLoadInProgress.Code
	}
	return part, 0
}

// lookupLocked returns id's partition and metadata (nil when unknown), or
// the error code that answers instead.
func (c *Coordinator) lookupLocked(id string) (*partition, *txnMeta, int16) {
	part, code := c.partitionLocked(c.PartitionFor(id))
	if code != 0 {
		return nil, nil, code
	}
	return part, part.txns[id], 0
}

// current reports whether m is still the metadata of its id in the
// partition p as loaded at coordinator epoch epoch.
func (c *Coordinator) currentLocked(p, epoch int32, m *txnMeta) (*partition, bool) {
	part, code := c.partitionLocked(p)
	if code != 0 || part.epoch != epoch || part.txns[m.id] != m {
		return nil, false
	}
	return part, true
}

func (c *Coordinator) nowMs() int64 { return c.clock.Now().UnixMilli() }

// valueVersion is the TransactionLogValue version the coordinator writes.
func (c *Coordinator) valueVersion() int16 {
	if c.TransactionVersion() >= 2 {
		return 1
	}
	return 0
}

// effects collects what runs once Coordinator.mu is released: answers,
// marker sends, and completions a Log delivered inline.
type effects []func()

func (fx *effects) add(f func()) { *fx = append(*fx, f) }

func (fx effects) run() {
	for _, f := range fx {
		f()
	}
}

// withLock runs fn under the lock, then its effects.
func (c *Coordinator) withLock(fn func(fx *effects)) {
	var fx effects
	c.mu.Lock()
	fn(&fx)
	c.mu.Unlock()
	fx.run()
}

// appendLocked logs t, m's pending transition, to m's partition; once the
// Log answers, the transition is completed (or its pending state reset,
// unless retry says the caller tries again) and then runs under the lock
// with the answer's error code (0: m took t). Kafka's
// appendTransactionToLog.
func (c *Coordinator) appendLocked(fx *effects, part *partition, m *txnMeta, t transit, retry func(code int16) bool,
	then func(fx *effects, code int16)) {
	now := c.nowMs()
	var recs []Record
	if t.state == Dead {
		recs = []Record{{Key: AppendKey(nil, m.id), Timestamp: now}}
	} else {
		recs = []Record{{Key: AppendKey(nil, m.id), Value: AppendValue(nil, t.value(c.valueVersion())), Timestamp: now}}
	}
	p, epoch := part.id, part.epoch
	c.logAppend(fx, p, recs, func(err error) {
		c.withLock(func(fx *effects) {
			code := appendCode(err)
			if err != nil {
				c.logger.Info("transaction state append failed", "transactional_id", m.id, "state", t.state, "err", err)
			}
			_, cur := c.currentLocked(p, epoch, m)
			switch {
			case code == 0 && !cur:
				code = kerr.NotCoordinator.Code
			case code == 0:
				if cerr := m.complete(&t); cerr != nil {
					c.logger.Error("transaction state transition refused", "transactional_id", m.id, "err", cerr)
					m.pending = noState
					code = kerr.UnknownServerError.Code
				}
			case cur && (retry == nil || !retry(code)):
				m.pending = noState
			}
			then(fx, code)
			m.wakeLocked(fx)
		})
	})
}

// logAppend calls Log.Append with Coordinator.mu held; a done the Log runs
// before Append returns is deferred to fx (it takes the lock).
func (c *Coordinator) logAppend(fx *effects, p int32, recs []Record, done func(error)) {
	if f := statelog.Deferred(func(cb func(error)) { c.log.Append(p, recs, cb) }, done); f != nil {
		fx.add(f)
	}
}

// appendCode maps a Log error to the coordinator's answer (Kafka's
// appendTransactionToLog mapping).
func appendCode(err error) int16 {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, ErrNotLeader):
		return kerr.NotCoordinator.Code
	case errors.Is(err, ErrRecordTooLarge):
		return kerr.UnknownServerError.Code
	}
	return kerr.CoordinatorNotAvailable.Code
}

// LoadPartition replays partition p of __transaction_state and starts
// serving its transactional ids at coordinator epoch epoch (the leader
// epoch this broker leads p in). Meanwhile their requests get
// COORDINATOR_LOAD_IN_PROGRESS. Transactions found in PrepareCommit or
// PrepareAbort get their markers written again and complete; those found
// Ongoing time out (or end) as usual. Undecodable records are logged and
// skipped; a Replay error leaves p unowned. A partition already loaded
// at an older epoch is replaced.
func (c *Coordinator) LoadPartition(p, epoch int32) error {
	if p < 0 || p >= c.cfg.NumPartitions {
		return fmt.Errorf("%w: partition %d of %d", ErrNotCoordinator, p, c.cfg.NumPartitions)
	}
	c.mu.Lock()
	if c.mu.closed {
		c.mu.Unlock()
		return fmt.Errorf("%w: closed", ErrNotCoordinator)
	}
	if old := c.mu.parts[p]; old != nil && old.epoch >= epoch {
		c.mu.Unlock()
		return nil // loaded (or loading) at this epoch or a newer one
	}
	part := &partition{id: p, epoch: epoch, loading: true, txns: map[string]*txnMeta{}}
	c.mu.parts[p] = part
	c.mu.Unlock()
	return c.load(part)
}

// StartLoading marks p loading at epoch and replays it on a new
// goroutine; done (may be nil) gets LoadPartition's result.
func (c *Coordinator) StartLoading(p, epoch int32, done func(error)) {
	if p < 0 || p >= c.cfg.NumPartitions {
		if done != nil {
			done(fmt.Errorf("%w: partition %d of %d", ErrNotCoordinator, p, c.cfg.NumPartitions))
		}
		return
	}
	c.mu.Lock()
	if c.mu.closed || c.mu.parts[p] != nil && c.mu.parts[p].epoch >= epoch {
		c.mu.Unlock()
		if done != nil {
			done(nil)
		}
		return
	}
	part := &partition{id: p, epoch: epoch, loading: true, txns: map[string]*txnMeta{}}
	c.mu.parts[p] = part
	c.mu.Unlock()
	go func() {
		err := c.load(part)
		if done != nil {
			done(err)
		}
	}()
}

// load replays part's records (Kafka's loadTransactionMetadata and
// addLoadedTransactionsToCache).
func (c *Coordinator) load(part *partition) error {
	loaded := map[string]*Value{}
	skipped := 0
	err := c.log.Replay(part.id, func(rec Record) error {
		id, err := DecodeKey(rec.Key)
		if err != nil {
			skipped++
			return nil
		}
		if rec.Value == nil {
			delete(loaded, id)
			return nil
		}
		v, err := DecodeValue(rec.Value)
		if err != nil {
			skipped++
			return nil
		}
		loaded[id] = &v
		return nil
	})
	if err != nil {
		c.mu.Lock()
		if c.mu.parts[part.id] == part {
			delete(c.mu.parts, part.id)
		}
		c.mu.Unlock()
		return fmt.Errorf("txn: load %s-%d: %w", StateTopic, part.id, err)
	}
	if skipped > 0 {
		c.logger.Warn("skipped undecodable transaction state records", "partition", part.id, "count", skipped)
	}
	var failed error
	c.withLock(func(fx *effects) {
		if c.mu.parts[part.id] != part || c.mu.closed {
			failed = fmt.Errorf("%w: %s-%d unloaded while it loaded", ErrNotCoordinator, StateTopic, part.id)
			return
		}
		for id, v := range loaded {
			part.txns[id] = metaFromValue(id, v)
		}
		part.loading = false
		for _, m := range part.txns {
			if m.state != PrepareCommit && m.state != PrepareAbort {
				continue
			}
			t, err := m.prepareComplete(c.nowMs())
			if err != nil {
				c.logger.Error("loaded transaction cannot complete", "transactional_id", m.id, "err", err)
				continue
			}
			c.startMarkersLocked(fx, part, m, m.state == PrepareCommit, t)
		}
		c.logger.Log(context.Background(), logLevel(len(loaded)), "loaded transaction state partition", "partition", part.id,
			"coordinator_epoch", part.epoch, "transactional_ids", len(loaded))
	})
	return failed
}

func logLevel(n int) slog.Level {
	if n == 0 {
		return slog.LevelDebug
	}
	return slog.LevelInfo
}

// UnloadPartition stops serving p (this broker no longer leads it, or its
// leader epoch moved past epoch; epoch < 0: whatever its epoch). Requests
// for its ids get NOT_COORDINATOR; appends and markers in flight are
// dropped when they come back.
func (c *Coordinator) UnloadPartition(p, epoch int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if part := c.mu.parts[p]; part != nil && (epoch < 0 || part.epoch <= epoch) {
		delete(c.mu.parts, p)
	}
}

// Owned returns the partitions loaded or loading, for the wiring's checks.
func (c *Coordinator) Owned() map[int32]int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[int32]int32, len(c.mu.parts))
	for p, part := range c.mu.parts {
		out[p] = part.epoch
	}
	return out
}
