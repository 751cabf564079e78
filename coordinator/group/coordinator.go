package group

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/samsa-broker/samsa/coordinator/statelog"
)

// Config holds the coordinator's settings; zero fields take Apache Kafka's defaults.
type Config struct {
	// NumPartitions of __consumer_offsets (offsets.topic.num.partitions, 50).
	NumPartitions int32
	// MinSessionTimeout and MaxSessionTimeout bound a member's session timeout
	// (group.min/max.session.timeout.ms: 6 s and 30 min).
	MinSessionTimeout, MaxSessionTimeout time.Duration
	// InitialRebalanceDelay (group.initial.rebalance.delay.ms, 3 s) is how long the
	// first rebalance of an empty group waits for more members. Negative means none.
	InitialRebalanceDelay time.Duration
	// MaxGroupSize (group.max.size) caps members per group; 0 means no cap.
	MaxGroupSize int
	// OffsetRetention (offsets.retention.minutes, 7 days) and the period of the
	// expiry scan (offsets.retention.check.interval.ms, 10 min).
	OffsetRetention, RetentionCheckInterval time.Duration
	// MaxOffsetMetadata (offset.metadata.max.bytes, 4096) caps commit metadata.
	MaxOffsetMetadata int
	// MaxProtocolMetadata caps the summed protocol metadata of one JoinGroup
	// (1 MiB); larger joins are refused with INVALID_REQUEST.
	MaxProtocolMetadata int
	// NewMemberJoinTimeout: how long a new member may wait in its first join before
	// it is dropped (5 min, as Kafka).
	NewMemberJoinTimeout time.Duration
	// Clock drives every timeout. Nil means a WheelClock (timers on the purgatory's
	// timing wheel) that the coordinator owns and stops on Close.
	Clock Clock
	// Logger receives coordinator events (slog.Default() when nil).
	Logger *slog.Logger
	// NewMemberID makes a member id from a prefix (client id or instance id); the
	// default appends "-" and a random UUID, as Kafka does.
	NewMemberID func(prefix string) string

	// Consumer groups (KIP-848). ConsumerSessionTimeout
	// (group.consumer.session.timeout.ms, 45 s): a member not heard from for that long
	// is removed. ConsumerHeartbeatInterval (group.consumer.heartbeat.interval.ms,
	// 5 s) is handed to members. ConsumerMaxSize (group.consumer.max.size) caps
	// members; 0 means no cap. ConsumerAssignors (group.consumer.assignors, "uniform"
	// then "range"): the server assignors served, the first the default.
	// MigrationPolicy (group.consumer.migration.policy, "bidirectional") is recorded:
	// the conversion of an empty group between the classic and the consumer protocol
	// (offline migration) happens whatever it says, as in Kafka; the conversion of a
	// group with members (online migration) is not done.
	ConsumerSessionTimeout    time.Duration
	ConsumerHeartbeatInterval time.Duration
	ConsumerMaxSize           int
	ConsumerAssignors         []string
	MigrationPolicy           string

	// Share groups (KIP-932): ShareSessionTimeout (group.share.session.timeout.ms,
	// 45 s), ShareHeartbeatInterval (group.share.heartbeat.interval.ms, 5 s),
	// ShareMaxSize (group.share.max.size, 200).
	ShareSessionTimeout    time.Duration
	ShareHeartbeatInterval time.Duration
	ShareMaxSize           int
	// ShareGroupDeleted (may be nil) is called, with no lock held, when DeleteGroups
	// deletes a share group, so that its share-partition state can be deleted too.
	ShareGroupDeleted func(group string)
	// ShareState (may be nil: no initialization) initializes the state of the share
	// partitions a share group subscribes to, at their share coordinators
	// (share_state_init.go).
	ShareState ShareStateInitializer

	// GroupSettings (may be nil) returns a group's own settings (its GROUP configs:
	// consumer.session.timeout.ms, consumer.heartbeat.interval.ms,
	// share.session.timeout.ms, share.heartbeat.interval.ms), read at each heartbeat
	// answer and each session timer armed, so that a change applies from the next
	// one. A zero field takes the value above. Called with the group's lock held: it
	// must not block nor call the Coordinator.
	GroupSettings func(group string) GroupSettings
}

// GroupSettings are the settings a group may have of its own; zero means the
// coordinator's (Config's).
type GroupSettings struct {
	ConsumerSessionTimeout, ConsumerHeartbeatInterval time.Duration
	ShareSessionTimeout, ShareHeartbeatInterval       time.Duration
}

func (c *Config) fill() {
	if c.NumPartitions <= 0 {
		c.NumPartitions = 50
	}
	if c.MinSessionTimeout <= 0 {
		c.MinSessionTimeout = 6 * time.Second
	}
	if c.MaxSessionTimeout <= 0 {
		c.MaxSessionTimeout = 30 * time.Minute
	}
	if c.InitialRebalanceDelay == 0 {
		c.InitialRebalanceDelay = 3 * time.Second
	} else if c.InitialRebalanceDelay < 0 {
		c.InitialRebalanceDelay = 0
	}
	if c.OffsetRetention <= 0 {
		c.OffsetRetention = 7 * 24 * time.Hour
	}
	if c.RetentionCheckInterval <= 0 {
		c.RetentionCheckInterval = 10 * time.Minute
	}
	if c.MaxOffsetMetadata <= 0 {
		c.MaxOffsetMetadata = 4096
	}
	if c.MaxProtocolMetadata <= 0 {
		c.MaxProtocolMetadata = 1 << 20
	}
	if c.NewMemberJoinTimeout <= 0 {
		c.NewMemberJoinTimeout = 5 * time.Minute
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.NewMemberID == nil {
		c.NewMemberID = randomMemberID
	}
	if c.ConsumerSessionTimeout <= 0 {
		c.ConsumerSessionTimeout = 45 * time.Second
	}
	if c.ConsumerHeartbeatInterval <= 0 {
		c.ConsumerHeartbeatInterval = 5 * time.Second
	}
	if len(c.ConsumerAssignors) == 0 {
		c.ConsumerAssignors = []string{AssignorUniform, AssignorRange}
	}
	if c.MigrationPolicy == "" {
		c.MigrationPolicy = "bidirectional"
	}
	if c.ShareSessionTimeout <= 0 {
		c.ShareSessionTimeout = 45 * time.Second
	}
	if c.ShareHeartbeatInterval <= 0 {
		c.ShareHeartbeatInterval = 5 * time.Second
	}
	if c.ShareMaxSize <= 0 {
		c.ShareMaxSize = 200
	}
}

func randomMemberID(prefix string) string {
	var u [16]byte
	_, _ = rand.Read(u[:]) // crypto/rand.Read never fails on Linux
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	h := hex.EncodeToString(u[:])
	return prefix + "-" + h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

type partState int8

const (
	partLoading partState = iota + 1
	partLoaded
)

// Coordinator is the group coordinator for the __consumer_offsets partitions this
// broker leads. All methods are safe for concurrent use; callbacks run on the
// caller's goroutine, a timer's goroutine, or the Log's completion goroutine, never
// with a lock held.
type Coordinator struct {
	cfg       Config
	log       Log
	clock     Clock
	ownsClock *WheelClock // set when the coordinator made its own clock
	logger    *slog.Logger
	topics    topicsHolder // the cluster's topics (SetTopics)

	txnOffsets txnOffsets // TxnOffsetCommit's offsets waiting for their marker (txn_offsets.go)

	mu struct {
		sync.Mutex
		groups      map[string]*group
		parts       map[int32]partState
		expiryTimer Timer
		closed      bool
	}
}

// New returns a coordinator owning no partitions; LoadPartition takes them on.
func New(cfg Config, log Log) *Coordinator {
	cfg.fill()
	c := &Coordinator{cfg: cfg, log: log, logger: cfg.Logger}
	if cfg.Clock == nil {
		c.ownsClock = NewWheelClock()
		cfg.Clock = c.ownsClock
		c.cfg.Clock = c.ownsClock
	}
	c.clock = cfg.Clock
	c.mu.groups = map[string]*group{}
	c.mu.parts = map[int32]partState{}
	c.mu.expiryTimer = c.clock.AfterFunc(cfg.RetentionCheckInterval, c.expiryTick)
	return c
}

// PartitionFor returns the __consumer_offsets partition of group.
func (c *Coordinator) PartitionFor(group string) int32 {
	return PartitionFor(group, c.cfg.NumPartitions)
}

// NumPartitions is the configured partition count of __consumer_offsets.
func (c *Coordinator) NumPartitions() int32 { return c.cfg.NumPartitions }

// Status returns the Kafka error code a request for group gets before it reaches the
// group: 0 when this coordinator serves it, NOT_COORDINATOR or
// COORDINATOR_LOAD_IN_PROGRESS otherwise (FindCoordinator uses it too).
func (c *Coordinator) Status(group string) int16 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.statusLocked(c.PartitionFor(group))
}

func (c *Coordinator) statusLocked(p int32) int16 {
	if c.mu.closed {
		return kerr.NotCoordinator.Code
	}
	switch c.mu.parts[p] {
	case partLoaded:
		return 0
	case partLoading:
		return kerr.CoordinatorLoadInProgress.Code
	default:
		return kerr.NotCoordinator.Code
	}
}

// lookup returns the group named id (creating it in Empty when create is set) or the
// error code that answers the request instead. g is nil with code 0 when the group
// does not exist and create is false.
func (c *Coordinator) lookup(id string, create bool) (*group, int16) {
	if id == "" {
		return nil, kerr.InvalidGroupID.Code
	}
	p := c.PartitionFor(id)
	c.mu.Lock()
	defer c.mu.Unlock()
	if code := c.statusLocked(p); code != 0 {
		return nil, code
	}
	g := c.mu.groups[id]
	if g == nil && create {
		g = newGroup(c, id, p)
		c.mu.groups[id] = g
	}
	return g, 0
}

// dropGroupLocked removes a Dead group from the map. Called with g.mu held.
func (c *Coordinator) dropGroupLocked(g *group) {
	c.mu.Lock()
	if c.mu.groups[g.id] == g {
		delete(c.mu.groups, g.id)
	}
	c.mu.Unlock()
}

// effects collects what must happen after a group's lock is released: answers and
// appends whose completion takes the lock again.
type effects []func()

func (fx *effects) add(f func()) { *fx = append(*fx, f) }

func (fx effects) run() {
	for _, f := range fx {
		f()
	}
}

// withGroup runs fn under g.mu and then the effects it collected.
func (g *group) with(fn func(fx *effects)) {
	var fx effects
	g.mu.Lock()
	fn(&fx)
	g.mu.Unlock()
	fx.run()
}

// after arms a timer that runs fn under g.mu.
func (g *group) after(d time.Duration, fn func(fx *effects)) Timer {
	return g.c.clock.AfterFunc(d, func() { g.with(fn) })
}

// settingsLocked returns the group's settings: its own (Config.GroupSettings) where it
// has them, else the coordinator's. Called with g.mu held.
func (g *group) settingsLocked() GroupSettings {
	var s GroupSettings
	if f := g.c.cfg.GroupSettings; f != nil {
		s = f(g.id)
	}
	cfg := &g.c.cfg
	if s.ConsumerSessionTimeout <= 0 {
		s.ConsumerSessionTimeout = cfg.ConsumerSessionTimeout
	}
	if s.ConsumerHeartbeatInterval <= 0 {
		s.ConsumerHeartbeatInterval = cfg.ConsumerHeartbeatInterval
	}
	if s.ShareSessionTimeout <= 0 {
		s.ShareSessionTimeout = cfg.ShareSessionTimeout
	}
	if s.ShareHeartbeatInterval <= 0 {
		s.ShareHeartbeatInterval = cfg.ShareHeartbeatInterval
	}
	return s
}

// appendLocked appends recs to the group's partition; done runs later with no lock
// held (it takes g.mu itself). Called with g.mu held, so appends of one group reach
// the Log in the order the state machine decided them.
func (g *group) appendLocked(fx *effects, recs []Record, done func(error)) {
	if f := statelog.Deferred(func(cb func(error)) { g.c.log.Append(g.partition, recs, cb) }, done); f != nil {
		fx.add(f)
	}
}

// appendErrorCode maps a Log error to the code a client sees (Kafka's mapping).
func appendErrorCode(err error, commit bool) int16 {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, ErrNotLeader):
		return kerr.NotCoordinator.Code
	case errors.Is(err, ErrRecordTooLarge):
		if commit {
			return kerr.InvalidCommitOffsetSize.Code
		}
		return kerr.UnknownServerError.Code
	default:
		return kerr.CoordinatorNotAvailable.Code
	}
}

func (g *group) groupRecord(assign map[string][]byte) Record {
	v := g.groupValue(assign)
	return Record{
		Timestamp: g.c.clock.Now().UnixMilli(),
		Key:       AppendGroupKey(nil, g.id),
		Value:     AppendGroupValue(nil, v),
	}
}

func (g *group) groupTombstone() Record {
	return Record{Timestamp: g.c.clock.Now().UnixMilli(), Key: AppendGroupKey(nil, g.id)}
}

func (g *group) offsetTombstone(tp topicPartition) Record {
	return Record{Timestamp: g.c.clock.Now().UnixMilli(), Key: AppendOffsetKey(nil, g.id, tp.topic, tp.partition)}
}

// storeGroupLocked persists the group's metadata; done (may be nil) runs with g.mu
// held once the Log answered.
func (g *group) storeGroupLocked(fx *effects, assign map[string][]byte, done func(fx *effects, err error)) {
	rec := g.groupRecord(assign)
	g.appendLocked(fx, []Record{rec}, func(err error) {
		if err != nil {
			g.c.logger.Warn("group metadata write failed", "group", g.id, "err", err)
		}
		if done != nil {
			g.with(func(fx *effects) { done(fx, err) })
		}
	})
}

// Close stops the coordinator: every partition is unloaded (parked requests are
// answered NOT_COORDINATOR) and timers stop.
func (c *Coordinator) Close() {
	c.mu.Lock()
	c.mu.closed = true
	if c.mu.expiryTimer != nil {
		c.mu.expiryTimer.Stop()
	}
	parts := make([]int32, 0, len(c.mu.parts))
	for p := range c.mu.parts {
		parts = append(parts, p)
	}
	c.mu.Unlock()
	for _, p := range parts {
		c.UnloadPartition(p)
	}
	if c.ownsClock != nil {
		c.ownsClock.Close()
	}
}

// UnloadPartition gives up partition p (leadership moved): its groups are dropped
// from memory, their timers stop, and parked joins and syncs are answered
// NOT_COORDINATOR so the clients look for the new coordinator.
func (c *Coordinator) UnloadPartition(p int32) {
	c.mu.Lock()
	delete(c.mu.parts, p)
	var gs []*group
	for id, g := range c.mu.groups {
		if g.partition == p {
			gs = append(gs, g)
			delete(c.mu.groups, id)
		}
	}
	c.mu.Unlock()
	for _, g := range gs {
		g.with(func(fx *effects) {
			g.failParkedLocked(fx, kerr.NotCoordinator.Code)
			g.stopTimersLocked()
			g.state = stateDead
		})
	}
}

func (g *group) stopTimersLocked() {
	for _, m := range g.members {
		if m.hbTimer != nil {
			m.hbTimer.Stop()
		}
		m.hbSeq++
	}
	if g.joinTimer != nil {
		g.joinTimer.Stop()
	}
	g.joinSeq2++
	if g.syncTimer != nil {
		g.syncTimer.Stop()
	}
	g.syncSeq++
	for id := range g.pending {
		g.pending[id]++ // invalidates pending-member timers
	}
	if mg := g.modern(); mg != nil {
		mg.stopTimers()
	}
}

func (c *Coordinator) expiryTick() {
	c.ExpireOffsets()
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.mu.closed {
		c.mu.expiryTimer = c.clock.AfterFunc(c.cfg.RetentionCheckInterval, c.expiryTick)
	}
}
