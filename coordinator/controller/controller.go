package controller

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/configs"
	"github.com/samsa-broker/samsa/coordinator/metadata"
)

// Defaults of Config's zero fields.
const (
	DefaultTickInterval = 100 * time.Millisecond
	// DefaultMaxPartitionsPerOp is Kafka's MAX_RECORDS_PER_USER_OP: the partitions one
	// CreateTopics or CreatePartitions request may create.
	DefaultMaxPartitionsPerOp = 10000
	// rebalanceBatch bounds the elections of one automatic rebalance (Kafka's
	// maxElectionsPerImbalance).
	rebalanceBatch = 1000
	// producerIDBlock is the size of the producer-id blocks AllocateProducerIds hands
	// out (Kafka's).
	producerIDBlock = 1000
)

// Config configures a Controller.
type Config struct {
	// NodeID is this controller's node id; its broker keys (num.partitions,
	// default.replication.factor, ...) are resolved as that node's.
	NodeID int32
	// ClusterID, when set, must be the cluster id brokers register with
	// (INCONSISTENT_CLUSTER_ID otherwise).
	ClusterID string
	// Static holds the node's explicitly set keys (server.properties, environment,
	// flags): the defaults of broker keys below the metadata's dynamic configs.
	Static map[string]string
	// Clock gives sessions and timers their time (nil: SystemClock).
	Clock Clock
	// Logger (nil: discard).
	Logger *slog.Logger
	// SessionTimeout overrides broker.session.timeout.ms (0: the key).
	SessionTimeout time.Duration
	// HeartbeatInterval overrides broker.heartbeat.interval.ms (0: the key): the
	// brokers' heartbeat interval, from which the grace after a closed heartbeat
	// connection is derived (liveness.go).
	HeartbeatInterval time.Duration
	// CheckListener, when set, tries a connection to a broker's endpoint and says
	// what it found (liveness.go: a broker whose endpoint accepted this controller
	// once in its epoch and now refuses, with no heartbeat connection open, is gone).
	// It is called on a goroutine of its own, never with the controller's lock held,
	// with a ctx bounded by ListenerCheckTimeout. Nil: no checks (simulations).
	CheckListener func(ctx context.Context, e metadata.Endpoint) ListenerState
	// CheckListenerName names the endpoint CheckListener is given
	// (inter.broker.listener.name; "": a broker's first endpoint).
	CheckListenerName string
	// RebalanceInterval overrides leader.imbalance.check.interval.seconds (0: the key).
	RebalanceInterval time.Duration
	// TickInterval is how often timers are checked (0: DefaultTickInterval).
	TickInterval time.Duration
	// MaxPartitionsPerOp bounds the partitions one request creates (0:
	// DefaultMaxPartitionsPerOp).
	MaxPartitionsPerOp int
	// NewTopicID returns a new topic id (nil: metadata.NewUUID); simulations pass a
	// seeded one.
	NewTopicID func() metadata.UUID
	// VoterListeners lists the voters' controller listeners for DescribeQuorum v2
	// (optional).
	VoterListeners map[int32][]kmsg.DescribeQuorumResponseNodeListener
}

// Controller is the active-controller logic of one voter. It acts only while its
// voter leads the quorum and is ready for writes; otherwise every request is
// answered NOT_CONTROLLER. See the package doc for the request flow and the
// invariants it keeps.
//
// Goroutines: every method is safe from any goroutine. Requests are processed one at
// a time in arrival order under c.mu; response callbacks run without c.mu held, on
// the goroutine that observed the outcome (Submit's, Poll's, Run's or a timer's).
type Controller struct {
	cfg      Config
	q        Quorum
	log      *slog.Logger
	clock    Clock
	newTopic func() metadata.UUID
	kick     chan struct{} // wakes Run: a proposal was added
	// closeGrace: how long a broker whose heartbeat connection closed has to
	// heartbeat on another before it is fenced (liveness.go).
	closeGrace time.Duration
	// checkCtx ends at Close: it bounds the listener checks.
	checkCtx    context.Context
	checkCancel context.CancelFunc
	// inlineChecks runs listener checks on the goroutine that starts them, after the
	// lock is released (deterministic tests).
	inlineChecks bool

	mu struct {
		sync.Mutex
		closed    bool
		draining  bool          // Drain: no new requests
		drained   chan struct{} // closed once draining with nothing in flight
		active    bool
		term      uint64
		pending   *metadata.Image // committed image + this term's in-flight proposals
		inflight  []*proposal     // every unresolved proposal, oldest first, any term
		termCount int             // unresolved proposals of the current term
		// quiescing: a proposal of this term failed, so pending cannot be trusted;
		// requests wait in deferred until this term's proposals resolve, then
		// pending restarts from the committed image.
		quiescing     bool
		deferred      []deferredReq
		sessions      map[int32]*session
		activatedAt   uint64    // committed offset when this term's leadership began
		activatedTime time.Time // when this term's leadership began
		// closedConns are the heartbeat connections known closed, with when (pruned
		// after a session timeout): a heartbeat that arrives on one after its close
		// was noticed leaves its broker detached.
		closedConns map[uint64]time.Time
		// reach is what listener checks found of each registered broker epoch
		// (liveness.go), kept by every voter's controller, active or not.
		reach         map[brokerKey]*reachState
		checks        int // listener checks running
		nextRebalance time.Time
		timer         Timer
	}
}

// proposal is one entry in flight.
type proposal struct {
	ch    <-chan ProposeResult
	term  uint64
	op    *op
	after []func(ok bool) // responses that read the pending image this proposal built
	res   *ProposeResult  // set once received
}

// op is what a request asks of the log: records to propose (none for a read or a
// refusal) and how to answer.
type op struct {
	recs []metadata.Record
	// resp answers a request without records.
	resp kmsg.Response
	// finish answers once recs committed at offset (c.mu held; it must not block).
	finish func(offset uint64) kmsg.Response
	// req answers NOT_CONTROLLER when the proposal fails.
	req kmsg.Request
	// done receives the response (without c.mu held); nil for internal proposals.
	done func(kmsg.Response)
	// what names an internal proposal in logs.
	what string
}

type deferredReq struct {
	req  kmsg.Request
	conn uint64
	done func(kmsg.Response)
}

// session is a registered broker's session with this active controller.
type session struct {
	epoch    int64
	expires  time.Time
	lastSeen time.Time
	// required is the metadata offset the broker must have applied to be unfenced
	// (its registration's offset; the activation's committed offset for brokers
	// registered before this controller became active; noOffset until known).
	required uint64
	// offset is the last metadata offset the broker reported.
	offset uint64
	// features are the ranges of feature levels the broker sent with its
	// registration or heartbeats (featuresKnown: it sent them), for a registration
	// written without them (FeaturesTag).
	features      []metadata.BrokerFeature
	featuresKnown bool
	// heard: the broker registered with, or sent a heartbeat to, this controller.
	heard bool
	// shutdownOffset is the offset of its controlled-shutdown records (noOffset until
	// committed): it may shut down once every active broker has reached it.
	shutdownOffset uint64
	// lost: this controller fenced the broker for an expired session (or found it
	// gone); it must register again (a new epoch) to be unfenced.
	lost bool
	// unfencedAt: when this controller unfenced the broker (zero: not since it
	// became active); the preferred-leader rebalance moves no leadership to it
	// within RebalanceInterval of that.
	unfencedAt time.Time
	// restarted: the registration of this session replaced an earlier one of the
	// broker id (a restart). Within RebalanceInterval of its unfencing, the fence of
	// another broker elects it leader only where no other ISR member may lead
	// (returnedLocked).
	restarted bool

	// conn is the connection its last heartbeat or registration arrived on (0: in
	// process, or not known).
	conn uint64
	// detached is since when the broker has had no heartbeat connection open to
	// this controller: its connection closed (closed), or it has not heartbeated
	// since this controller became active. Zero: attached.
	detached time.Time
	closed   bool
	// checking: a listener check of the broker is under way; checked counts the
	// checks made since it was detached, nextCheck is when the next is due.
	checking  bool
	checked   int
	nextCheck time.Time
}

const noOffset = ^uint64(0)

// New returns a controller over q. Call Start (or Run) to arm its timers.
func New(cfg Config, q Quorum) (*Controller, error) {
	if q == nil {
		return nil, fmt.Errorf("controller: New needs a quorum")
	}
	if cfg.NodeID < 0 {
		return nil, fmt.Errorf("controller: node id %d", cfg.NodeID)
	}
	if cfg.Clock == nil {
		cfg.Clock = SystemClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Static == nil {
		cfg.Static = map[string]string{}
	}
	if cfg.TickInterval <= 0 {
		cfg.TickInterval = DefaultTickInterval
	}
	if cfg.MaxPartitionsPerOp <= 0 {
		cfg.MaxPartitionsPerOp = DefaultMaxPartitionsPerOp
	}
	l := configs.Layers{Static: cfg.Static}
	if cfg.SessionTimeout <= 0 {
		cfg.SessionTimeout = time.Duration(l.BrokerInt("broker.session.timeout.ms")) * time.Millisecond
	}
	if cfg.RebalanceInterval <= 0 {
		cfg.RebalanceInterval = time.Duration(l.BrokerInt("leader.imbalance.check.interval.seconds")) * time.Second
	}
	if cfg.HeartbeatInterval <= 0 {
		cfg.HeartbeatInterval = time.Duration(l.BrokerInt("broker.heartbeat.interval.ms")) * time.Millisecond
	}
	c := &Controller{cfg: cfg, q: q, log: cfg.Logger, clock: cfg.Clock, newTopic: cfg.NewTopicID, kick: make(chan struct{}, 1)}
	if c.newTopic == nil {
		c.newTopic = metadata.NewUUID
	}
	c.closeGrace = CloseGrace(cfg.HeartbeatInterval)
	c.checkCtx, c.checkCancel = context.WithCancel(context.Background())
	c.mu.sessions = map[int32]*session{}
	c.mu.closedConns = map[uint64]time.Time{}
	c.mu.reach = map[brokerKey]*reachState{}
	return c, nil
}

// Start arms the controller's timer (session expiry, rebalance, leadership checks
// every TickInterval). Run calls it.
func (c *Controller) Start() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.closed || c.mu.timer != nil {
		return
	}
	c.mu.timer = c.clock.AfterFunc(c.cfg.TickInterval, c.onTimer)
}

// Close stops the timer; later requests are answered NOT_CONTROLLER. Proposals in
// flight still answer when their outcome is observed (Poll).
func (c *Controller) Close() {
	c.mu.Lock()
	c.mu.closed = true
	if c.mu.timer != nil {
		c.mu.timer.Stop()
	}
	c.checkCancel()
	var out callbacks
	c.deactivateLocked(&out)
	c.mu.Unlock()
	out.run()
}

// Drain stops taking requests (later ones are answered NOT_CONTROLLER: the broker's
// channel tries the other voters) and waits until every proposal in flight has
// resolved, so that the requests waiting for them are answered with their outcome,
// or until ctx ends. A node stopping calls it before it stops serving the CONTROLLER
// listener: the listener must still carry the raft messages that commit them. It
// needs Run (or Poll) to observe the proposals.
func (c *Controller) Drain(ctx context.Context) {
	c.mu.Lock()
	c.mu.draining = true
	if c.mu.drained == nil {
		c.mu.drained = make(chan struct{})
	}
	var out callbacks
	c.settleLocked(&out)
	ch := c.mu.drained
	c.mu.Unlock()
	out.run()
	select {
	case <-ch:
	case <-ctx.Done():
	}
}

// Run is the controller's loop in a real process: it arms the timers and observes
// the outcome of every proposal as the quorum resolves it, until ctx ends. Handle
// needs it (or a caller of Poll).
func (c *Controller) Run(ctx context.Context) error {
	c.Start()
	defer c.Close()
	for {
		head := c.head()
		var ch <-chan ProposeResult
		if head != nil {
			ch = head.ch
		}
		select {
		case <-ctx.Done():
			return nil
		case r := <-ch:
			c.observe(head, r)
		case <-c.kick:
		}
		c.Poll()
	}
}

func (c *Controller) head() *proposal {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.mu.inflight {
		if p.res == nil {
			return p
		}
	}
	return nil
}

// observe records a result received from p's channel and processes what it settles.
func (c *Controller) observe(p *proposal, r ProposeResult) {
	c.mu.Lock()
	p.res = &r
	var out callbacks
	c.settleLocked(&out)
	c.mu.Unlock()
	out.run()
}

// Poll observes the outcome of every proposal the quorum has resolved and the
// quorum's leadership, answering what they settle. It never blocks. Run calls it; a
// simulation calls it after stepping the quorum.
func (c *Controller) Poll() {
	c.mu.Lock()
	var out callbacks
	for _, p := range c.mu.inflight {
		if p.res != nil {
			continue
		}
		select {
		case r := <-p.ch:
			p.res = &r
		default:
		}
	}
	c.settleLocked(&out)
	c.refreshLocked(&out)
	c.mu.Unlock()
	out.run()
}

// callbacks collects responses to deliver once c.mu is released, in order.
type callbacks []func()

func (cb *callbacks) add(f func()) { *cb = append(*cb, f) }
func (cb callbacks) run() {
	for _, f := range cb {
		f()
	}
}

// Submit processes req and calls done with the response once it is known: at once
// for refusals and reads, after the records commit for changes (Poll or Run observe
// it). done is called exactly once, without the controller's lock held, and must
// not block. Requests are processed in the order Submit is called.
func (c *Controller) Submit(req kmsg.Request, done func(kmsg.Response)) { c.SubmitConn(0, req, done) }

// SubmitConn is Submit for a request that arrived on connection conn of the
// CONTROLLER listener (0: in process, or unknown): a broker's heartbeats are tied to
// the connection they arrive on, whose close ConnClosed reports (liveness.go).
func (c *Controller) SubmitConn(conn uint64, req kmsg.Request, done func(kmsg.Response)) {
	c.mu.Lock()
	var out callbacks
	c.refreshLocked(&out)
	c.submitLocked(req, conn, done, &out)
	c.mu.Unlock()
	out.run()
}

// Handle processes req and returns its response, blocking until the records it
// makes commit or ctx ends (then the response carries REQUEST_TIMED_OUT; the change
// may still commit). It needs Run (or Poll) to observe the proposals. A request type
// the controller does not serve returns ErrUnsupported.
func (c *Controller) Handle(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	return c.HandleConn(ctx, 0, req)
}

// HandleConn is Handle for a request that arrived on connection conn (see
// SubmitConn).
func (c *Controller) HandleConn(ctx context.Context, conn uint64, req kmsg.Request) (kmsg.Response, error) {
	if !Serves(req) {
		return nil, fmt.Errorf("%w: api key %d", ErrUnsupported, req.Key())
	}
	ch := make(chan kmsg.Response, 1)
	c.SubmitConn(conn, req, func(r kmsg.Response) { ch <- r })
	select {
	case r := <-ch:
		return r, nil
	case <-ctx.Done():
		return ErrorResponse(req, kerr.RequestTimedOut.Code, "the change did not commit in time; it may still commit"), nil
	}
}

// Active reports whether this controller is the active one.
func (c *Controller) Active() bool {
	c.mu.Lock()
	var out callbacks
	c.refreshLocked(&out)
	active := c.mu.active
	c.mu.Unlock()
	out.run()
	return active
}

// Leader returns the active controller's id as this voter knows it (-1: unknown):
// what DescribeCluster and Metadata report as the controller.
func (c *Controller) Leader() int32 {
	return c.q.CurrentLeadership().Leader
}

func (c *Controller) submitLocked(req kmsg.Request, conn uint64, done func(kmsg.Response), out *callbacks) {
	if c.mu.closed || c.mu.draining || !c.mu.active {
		r := ErrorResponse(req, kerr.NotController.Code, "")
		out.add(func() { done(r) })
		return
	}
	if c.mu.quiescing {
		c.mu.deferred = append(c.mu.deferred, deferredReq{req, conn, done})
		return
	}
	o := c.dispatchLocked(req, conn)
	o.req, o.done = req, done
	c.runLocked(o, out)
}

// runLocked proposes o's records against the pending image, or answers o at once —
// after the proposal that built the pending image it read, if one is in flight.
func (c *Controller) runLocked(o *op, out *callbacks) {
	if len(o.recs) == 0 {
		if o.done == nil {
			return
		}
		resp := o.resp
		if last := c.lastOfTermLocked(); last != nil {
			req, done := o.req, o.done
			last.after = append(last.after, func(ok bool) {
				if !ok {
					resp = ErrorResponse(req, kerr.NotController.Code, "")
				}
				done(resp)
			})
			return
		}
		done := o.done
		out.add(func() { done(resp) })
		return
	}
	prev := c.mu.pending
	next, err := prev.Apply(o.recs...)
	if err != nil {
		// The handlers validate against the pending image: this is a bug.
		c.log.Error("controller: records do not apply to the pending image", "op", o.name(), "err", err)
		if o.done != nil {
			r := ErrorResponse(o.req, kerr.UnknownServerError.Code, "internal error: "+err.Error())
			done := o.done
			out.add(func() { done(r) })
		}
		return
	}
	c.mu.pending = next
	if c.log.Enabled(context.Background(), slog.LevelDebug) {
		c.log.Debug("controller: proposing", "op", o.name(), "term", c.mu.term, "records", len(o.recs), "first", fmt.Sprintf("%T%+v", o.recs[0], o.recs[0]))
	}
	p := &proposal{ch: c.q.Propose(o.recs), term: c.mu.term, op: o}
	select {
	case r := <-p.ch:
		p.res = &r
		if r.Err != nil {
			// Nothing was appended (not the leader, busy, invalid): nothing else was
			// built on next, so prev is exact.
			c.mu.pending = prev
			c.log.Warn("controller: proposal refused", "op", o.name(), "err", r.Err)
			c.answerFailedLocked(p, out)
			return
		}
	default:
	}
	c.mu.inflight = append(c.mu.inflight, p)
	c.mu.termCount++
	select {
	case c.kick <- struct{}{}:
	default:
	}
	c.settleLocked(out)
}

func (o *op) name() string {
	if o.what != "" {
		return o.what
	}
	if o.req != nil {
		return fmt.Sprintf("api %d", o.req.Key())
	}
	return "internal"
}

// lastOfTermLocked returns the newest unresolved proposal of the current term.
func (c *Controller) lastOfTermLocked() *proposal {
	for i := len(c.mu.inflight) - 1; i >= 0; i-- {
		if p := c.mu.inflight[i]; p.term == c.mu.term && p.res == nil {
			return p
		}
	}
	return nil
}

// settleLocked answers, in order, the proposals whose results were observed.
func (c *Controller) settleLocked(out *callbacks) {
	kept := c.mu.inflight[:0]
	for _, p := range c.mu.inflight {
		if p.res == nil {
			kept = append(kept, p)
			continue
		}
		current := p.term == c.mu.term && c.mu.active
		if current {
			c.mu.termCount--
		}
		if p.res.Err != nil {
			if current && !c.mu.quiescing {
				c.log.Warn("controller: proposal failed; waiting for the proposals in flight before validating again",
					"op", p.op.name(), "err", p.res.Err)
				c.mu.quiescing = true
			}
			c.answerFailedLocked(p, out)
			continue
		}
		o := p.op
		if o.finish != nil {
			r := o.finish(p.res.Offset)
			if o.done != nil {
				done := o.done
				out.add(func() { done(r) })
			}
		}
		for _, f := range p.after {
			out.add(func() { f(true) })
		}
	}
	clear(c.mu.inflight[len(kept):])
	c.mu.inflight = kept
	if c.mu.draining && len(kept) == 0 && c.mu.drained != nil {
		select {
		case <-c.mu.drained:
		default:
			close(c.mu.drained)
		}
	}
	if c.mu.quiescing && c.mu.termCount == 0 && c.mu.active {
		_, im := c.q.Committed()
		c.mu.pending = im
		c.mu.quiescing = false
		deferred := c.mu.deferred
		c.mu.deferred = nil
		for _, d := range deferred {
			c.submitLocked(d.req, d.conn, d.done, out)
		}
	}
}

func (c *Controller) answerFailedLocked(p *proposal, out *callbacks) {
	if p.op.done != nil {
		r := ErrorResponse(p.op.req, kerr.NotController.Code, "")
		done := p.op.done
		out.add(func() { done(r) })
	}
	for _, f := range p.after {
		out.add(func() { f(false) })
	}
}

// refreshLocked follows the quorum's leadership: it activates this controller when
// its voter becomes ready for writes in a new term, and deactivates it when the
// voter stops leading.
func (c *Controller) refreshLocked(out *callbacks) {
	if c.mu.closed {
		return
	}
	lead := c.q.CurrentLeadership()
	if c.mu.active && (!lead.IsLeader || lead.Term != c.mu.term) {
		c.log.Info("controller: no longer active", "term", c.mu.term, "leader", lead.Leader, "new term", lead.Term)
		c.deactivateLocked(out)
	}
	if !c.mu.active && lead.ReadyForWrites {
		c.activateLocked(lead.Term)
		c.checkDetachedLocked(out)
	}
}

// activateLocked starts a term of leadership: the pending image is the committed
// one, and every registered broker gets a fresh session.
func (c *Controller) activateLocked(term uint64) {
	off, im := c.q.Committed()
	now := c.clock.Now()
	c.mu.active, c.mu.term, c.mu.pending = true, term, im
	c.mu.termCount, c.mu.quiescing, c.mu.activatedAt = 0, false, off
	// Raft never makes a voter leader twice in one term, but should this voter's
	// proposals of this term still be in flight, the committed image lacks them:
	// wait for them before validating anything.
	for _, p := range c.mu.inflight {
		if p.term == term && p.res == nil {
			c.mu.termCount++
		}
	}
	c.mu.quiescing = c.mu.termCount > 0
	c.mu.sessions = map[int32]*session{}
	c.mu.activatedTime = now
	for _, b := range im.Brokers() {
		// Detached until it heartbeats to this controller (liveness.go).
		c.mu.sessions[b.ID] = &session{epoch: b.Epoch, expires: now.Add(c.cfg.SessionTimeout), lastSeen: now,
			required: off, shutdownOffset: off, detached: now, nextCheck: now}
	}
	c.mu.nextRebalance = now.Add(c.cfg.RebalanceInterval)
	c.log.Info("controller: active", "node", c.cfg.NodeID, "term", term, "offset", off, "brokers", len(c.mu.sessions))
}

func (c *Controller) deactivateLocked(out *callbacks) {
	if !c.mu.active {
		return
	}
	c.mu.active, c.mu.pending, c.mu.quiescing, c.mu.termCount = false, nil, false, 0
	c.mu.sessions = map[int32]*session{}
	for _, d := range c.mu.deferred {
		r := ErrorResponse(d.req, kerr.NotController.Code, "")
		done := d.done
		out.add(func() { done(r) })
	}
	c.mu.deferred = nil
}

// onTimer is the periodic check: leadership, broker sessions, rebalance.
func (c *Controller) onTimer() {
	c.mu.Lock()
	if c.mu.closed {
		c.mu.Unlock()
		return
	}
	var out callbacks
	for _, p := range c.mu.inflight {
		if p.res == nil {
			select {
			case r := <-p.ch:
				p.res = &r
			default:
			}
		}
	}
	c.settleLocked(&out)
	c.refreshLocked(&out)
	c.pruneLivenessLocked()
	c.checkReachLocked(&out)
	if c.mu.active && !c.mu.quiescing && !c.mu.draining {
		c.expireSessionsLocked(&out)
		c.checkDetachedLocked(&out)
		c.maybeRebalanceLocked(&out)
	}
	c.mu.timer = c.clock.AfterFunc(c.cfg.TickInterval, c.onTimer)
	c.mu.Unlock()
	out.run()
}

// expireSessionsLocked fences every unfenced broker whose session expired, or whose
// heartbeat connection closed longer than closeGrace ago with no heartbeat since
// (liveness.go).
func (c *Controller) expireSessionsLocked(out *callbacks) {
	now := c.clock.Now()
	for _, id := range c.sessionIDsLocked() {
		s := c.mu.sessions[id]
		b, ok := c.mu.pending.Broker(id)
		if !ok || b.Epoch != s.epoch {
			delete(c.mu.sessions, id)
			continue
		}
		if b.Fenced {
			continue
		}
		switch {
		case now.After(s.expires):
			c.fenceLostLocked(id, s, out, "controller: broker session expired: fencing it",
				"last heartbeat", now.Sub(s.lastSeen))
		case s.closed && now.After(s.detached.Add(c.closeGrace)):
			c.fenceLostLocked(id, s, out, "controller: the broker's heartbeat connection closed and it has not heartbeated on another: fencing it",
				"closed", now.Sub(s.detached), "grace", c.closeGrace)
		}
	}
}

// sessionIDsLocked returns the ids of the sessions, sorted.
func (c *Controller) sessionIDsLocked() []int32 {
	ids := make([]int32, 0, len(c.mu.sessions))
	for id := range c.mu.sessions {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// fenceLostLocked fences broker id for the loss of its session s (it must register
// again to be unfenced), logging msg with args.
func (c *Controller) fenceLostLocked(id int32, s *session, out *callbacks, msg string, args ...any) {
	recs := FenceBrokerRecordsReturned(c.mu.pending, id, c.policyFunc(c.mu.pending), c.returnedLocked())
	if len(recs) == 0 {
		return
	}
	s.lost = true
	c.log.Warn(msg, append([]any{"broker", id, "epoch", s.epoch, "partition changes", len(recs) - 1}, args...)...)
	c.runLocked(&op{recs: recs, what: "fence broker " + strconv.Itoa(int(id))}, out)
}

// returnedLocked returns since when each broker is back from a restart, for
// FenceBrokerRecordsReturned: a broker this controller unfenced after a restart less
// than RebalanceInterval (leader.imbalance.check.interval.seconds) ago, since its
// unfencing; nil when there is none. The leaders a fence elects are then, where the
// ISR allows, brokers that did not just return, to which clients are connected; the
// preferred-leader rebalance moves leaderships back once the interval has passed,
// as it would anyway.
func (c *Controller) returnedLocked() func(int32) time.Time {
	now := c.clock.Now()
	back := map[int32]time.Time{}
	for id, s := range c.mu.sessions {
		if s.restarted && !s.unfencedAt.IsZero() && now.Sub(s.unfencedAt) < c.cfg.RebalanceInterval {
			back[id] = s.unfencedAt
		}
	}
	if len(back) == 0 {
		return nil
	}
	return func(id int32) time.Time { return back[id] }
}

// maybeRebalanceLocked runs the automatic preferred-leader rebalance when due.
func (c *Controller) maybeRebalanceLocked(out *callbacks) {
	now := c.clock.Now()
	if now.Before(c.mu.nextRebalance) {
		return
	}
	c.mu.nextRebalance = now.Add(c.cfg.RebalanceInterval)
	l := c.layers(c.mu.pending, "")
	if l.BrokerValue("auto.leader.rebalance.enable") != "true" {
		return
	}
	pct := int(l.BrokerInt("leader.imbalance.per.broker.percentage"))
	if recs := c.afterReturnsLocked(RebalanceRecords(c.mu.pending, pct, rebalanceBatch, c.policyFunc(c.mu.pending)), now); len(recs) > 0 {
		c.log.Info("controller: moving leadership back to preferred replicas", "partitions", len(recs))
		c.runLocked(&op{recs: recs, what: "preferred leader rebalance"}, out)
	}
}

// afterReturnsLocked drops from the rebalance's records those that would move a
// leadership to a broker this controller unfenced less than RebalanceInterval ago
// (leader.imbalance.check.interval.seconds), and brings the next rebalance forward
// to when the first of those brokers is past it. A restarted broker joins the ISRs
// as it catches up; moving leaderships to it at once would cost every producer of
// those partitions a leader change right after its return, and a second one if it
// fails again soon (Kafka moves them at the next check, however close to the
// return).
func (c *Controller) afterReturnsLocked(recs []metadata.Record, now time.Time) []metadata.Record {
	out := recs[:0]
	for _, r := range recs {
		if pc, ok := r.(*metadata.PartitionChangeRecord); ok && pc.Leader >= 0 {
			if s := c.mu.sessions[pc.Leader]; s != nil && !s.unfencedAt.IsZero() && now.Sub(s.unfencedAt) < c.cfg.RebalanceInterval {
				if at := s.unfencedAt.Add(c.cfg.RebalanceInterval); at.Before(c.mu.nextRebalance) {
					c.mu.nextRebalance = at
				}
				continue
			}
		}
		out = append(out, r)
	}
	return out
}

// layers returns the config layers of this node in im, for topic ("" for broker
// keys only).
func (c *Controller) layers(im *metadata.Image, topic string) configs.Layers {
	return configs.ForImage(im, c.cfg.NodeID, c.cfg.Static, topic)
}

// policyFunc resolves a topic's ElectionPolicy in im (Kafka's
// getTopicEffectiveMinIsr and, for the strategy, KIP-966's rule): min.insync.replicas
// by the usual layers; with unclean.recovery.manager.enabled, the topic's
// unclean.recovery.strategy, else unclean.leader.election.enable (true: Aggressive,
// false: Balanced).
func (c *Controller) policyFunc(im *metadata.Image) PolicyFunc {
	manager := c.layers(im, "").BrokerValue("unclean.recovery.manager.enabled") == "true"
	return func(topic string) ElectionPolicy {
		l := c.layers(im, topic)
		p := ElectionPolicy{MinISR: 1, Recovery: RecoveryBalanced}
		if n, err := strconv.Atoi(l.TopicValue("min.insync.replicas")); err == nil && n > 0 {
			p.MinISR = n
		}
		switch {
		case manager:
			p.Recovery = ParseRecoveryStrategy(l.TopicValue("unclean.recovery.strategy"))
		case l.TopicValue("unclean.leader.election.enable") == "true":
			p.Recovery = RecoveryAggressive
		}
		return p
	}
}

// dispatchLocked builds the op of a request that arrived on connection conn.
func (c *Controller) dispatchLocked(req kmsg.Request, conn uint64) *op {
	switch r := req.(type) {
	case *kmsg.BrokerRegistrationRequest:
		return c.brokerRegistrationLocked(r, conn)
	case *kmsg.BrokerHeartbeatRequest:
		return c.brokerHeartbeatLocked(r, conn)
	case *kmsg.AlterPartitionRequest:
		return c.alterPartitionLocked(r)
	case *kmsg.AllocateProducerIDsRequest:
		return c.allocateProducerIDsLocked(r)
	case *kmsg.CreateTopicsRequest:
		return c.createTopicsLocked(r)
	case *kmsg.DeleteTopicsRequest:
		return c.deleteTopicsLocked(r)
	case *kmsg.CreatePartitionsRequest:
		return c.createPartitionsLocked(r)
	case *kmsg.AlterConfigsRequest:
		return c.alterConfigsLocked(r)
	case *kmsg.IncrementalAlterConfigsRequest:
		return c.incrementalAlterConfigsLocked(r)
	case *kmsg.ElectLeadersRequest:
		return c.electLeadersLocked(r)
	case *kmsg.AlterPartitionAssignmentsRequest:
		return c.alterReassignmentsLocked(r)
	case *kmsg.ListPartitionReassignmentsRequest:
		return c.listReassignmentsLocked(r)
	case *kmsg.DescribeQuorumRequest:
		return c.describeQuorumLocked(r)
	case *kmsg.CreateACLsRequest:
		return c.createACLsLocked(r)
	case *kmsg.DeleteACLsRequest:
		return c.deleteACLsLocked(r)
	case *kmsg.DescribeACLsRequest:
		return c.describeACLsLocked(r)
	case *kmsg.AlterUserSCRAMCredentialsRequest:
		return c.alterScramLocked(r)
	case *kmsg.DescribeUserSCRAMCredentialsRequest:
		return c.describeScramLocked(r)
	case *kmsg.AlterClientQuotasRequest:
		return c.alterQuotasLocked(r)
	case *kmsg.DescribeClientQuotasRequest:
		return c.describeQuotasLocked(r)
	case *kmsg.UpdateFeaturesRequest:
		return c.updateFeaturesLocked(r)
	}
	return &op{resp: ErrorResponse(req, kerr.UnsupportedVersion.Code, "not a controller API")}
}

// Serves reports whether the controller answers req's API.
func Serves(req kmsg.Request) bool {
	switch req.(type) {
	case *kmsg.BrokerRegistrationRequest, *kmsg.BrokerHeartbeatRequest, *kmsg.AlterPartitionRequest,
		*kmsg.AllocateProducerIDsRequest, *kmsg.CreateTopicsRequest, *kmsg.DeleteTopicsRequest,
		*kmsg.CreatePartitionsRequest, *kmsg.AlterConfigsRequest, *kmsg.IncrementalAlterConfigsRequest,
		*kmsg.ElectLeadersRequest, *kmsg.AlterPartitionAssignmentsRequest, *kmsg.ListPartitionReassignmentsRequest,
		*kmsg.DescribeQuorumRequest,
		*kmsg.CreateACLsRequest, *kmsg.DeleteACLsRequest, *kmsg.DescribeACLsRequest,
		*kmsg.AlterUserSCRAMCredentialsRequest, *kmsg.DescribeUserSCRAMCredentialsRequest,
		*kmsg.AlterClientQuotasRequest, *kmsg.DescribeClientQuotasRequest,
		*kmsg.UpdateFeaturesRequest:
		return true
	}
	return false
}
