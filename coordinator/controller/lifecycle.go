package controller

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/configs"
	"github.com/samsa-broker/samsa/coordinator/metadata"
)

// BrokerState is a broker's lifecycle state, Kafka's BrokerState (the values are
// Kafka's).
type BrokerState int8

// The states, as KRaft's BrokerLifecycleManager moves through them:
//
//	STARTING ──registered──▶ RECOVERY ──unfenced──▶ RUNNING
//	   ▲  fenced (session lost), stale epoch,  │       │ BeginControlledShutdown
//	   └─────────── not registered ────────────┴───────┤
//	                                                    ▼
//	            SHUTTING_DOWN ◀──ShouldShutDown── PENDING_CONTROLLED_SHUTDOWN
const (
	StateNotRunning                BrokerState = 0
	StateStarting                  BrokerState = 1
	StateRecovery                  BrokerState = 2
	StateRunning                   BrokerState = 3
	StatePendingControlledShutdown BrokerState = 6
	StateShuttingDown              BrokerState = 7
)

func (s BrokerState) String() string {
	switch s {
	case StateNotRunning:
		return "NOT_RUNNING"
	case StateStarting:
		return "STARTING"
	case StateRecovery:
		return "RECOVERY"
	case StateRunning:
		return "RUNNING"
	case StatePendingControlledShutdown:
		return "PENDING_CONTROLLED_SHUTDOWN"
	case StateShuttingDown:
		return "SHUTTING_DOWN"
	}
	return fmt.Sprintf("BrokerState(%d)", int8(s))
}

// LifecycleConfig configures a BrokerLifecycle.
type LifecycleConfig struct {
	NodeID    int32
	ClusterID string
	// IncarnationID identifies this process (zero: a random one).
	IncarnationID metadata.UUID
	// PredecessorID is the incarnation id of the process this one succeeds on the
	// same directories (zero: none known), sent as the registration's PredecessorTag:
	// a restart after a crash then registers at once.
	PredecessorID metadata.UUID
	// PreviousBrokerEpoch is the broker epoch under which this broker's logs were last
	// closed cleanly (0: unknown, or not cleanly: a crash), sent as the first
	// registration's PreviousBrokerEpoch (Kafka's, from its clean-shutdown files).
	// The controller takes a registration that names the registered epoch as
	// following a clean shutdown; any other, with eligible leader replicas on, takes
	// the broker out of the ELRs, as its logs may have lost records. A registration
	// after a lost session names the epoch it had.
	PreviousBrokerEpoch int64
	// Listeners are the endpoints the broker registers (advertised.listeners; never
	// the controller listener). At least one.
	Listeners []metadata.Endpoint
	Rack      *string
	// Features are the feature levels the broker supports, registered with it (nil:
	// metadata.SupportedFeatures, this build's). The controller refuses the
	// registration (UNSUPPORTED_VERSION) while a finalized level is outside them.
	Features map[string]metadata.VersionRange
	// HeartbeatInterval (0: broker.heartbeat.interval.ms's default, 2 s).
	HeartbeatInterval time.Duration
	// RequestTimeout bounds one request to the controller, retries included (0:
	// broker.session.timeout.ms's default / 2).
	RequestTimeout time.Duration
	// RetryBackoff after a failed request (0: min(HeartbeatInterval, 1 s)).
	RetryBackoff time.Duration
	// ShutdownPoll is the heartbeat interval while in PENDING_CONTROLLED_SHUTDOWN
	// (0: min(HeartbeatInterval, 100 ms)): the controller says ShouldShutDown as
	// soon as the brokers that took over its leaderships have applied the change.
	ShutdownPoll time.Duration
	// UnreachableLogInterval: while no controller answers, a warning every this long
	// (0: 10 s).
	UnreachableLogInterval time.Duration
	// StorageFailed reports whether the broker's storage cannot take writes now (a
	// log directory full or offline: engine.Manager.UnwritableDirs). While it does,
	// and the last applied image shows another broker that may lead (unfenced, not
	// in controlled shutdown), the heartbeats ask to be fenced (WantFence): the
	// controller moves this broker's leaderships to other ISR members and takes it
	// out of the ISRs, so that acks=all writes go on without it. Once it no longer
	// does, the heartbeats stop asking and the controller unfences the broker; its
	// followers catch up and their leaders add it back to the ISRs. Kafka takes a
	// failed log directory offline and stops a broker that has none left; this
	// keeps the broker serving reads and rejoining by itself. Nil: never. Run
	// checks it every StoragePoll and before each heartbeat.
	StorageFailed func() bool
	// StoragePoll is how often Run checks StorageFailed (0: 500 ms).
	StoragePoll time.Duration
	Clock       Clock
	Logger      *slog.Logger
}

// BrokerLifecycle is a broker's side of its registration with the controller:
// register (incarnation, listeners, rack), heartbeat every HeartbeatInterval with the
// metadata offset it has applied, get unfenced once caught up, re-register after a
// lost session or a stale epoch, and shut down in a controlled way (WantShutDown
// until ShouldShutDown). Its core is I/O-free: Next says which request to send
// when, OnResponse takes the answer; Run is the loop around them over a
// ControllerChannel. Safe for concurrent use.
//
// Invariants: at most one request is outstanding (an answer to any other is
// ignored); the epoch it reports is the one its last successful registration
// returned; it leaves SHUTTING_DOWN for nothing.
type BrokerLifecycle struct {
	cfg LifecycleConfig
	log *slog.Logger

	mu    sync.Mutex
	state BrokerState
	epoch int64 // -1: not registered
	// unfencedSeen is the epoch an applied image last showed unfenced (-1: none). An
	// image showing this broker fenced means a lost session only after one showed it
	// unfenced: the controller unfences it (the heartbeat's answer) before the broker
	// has applied that record, and the images in between still show it fenced.
	unfencedSeen int64
	offset       uint64
	fenced       bool
	caughtUp     bool
	shutdown     bool // controlled shutdown asked
	seq          uint64
	inFlight     bool
	sentAt       time.Time
	nextAt       time.Time
	failSince    time.Time
	answered     time.Time // when an active controller last answered
	lastWarn     time.Time
	wake         chan struct{}
	changed      chan struct{} // closed on every state change
	// stopping are the other brokers the last image showed in controlled shutdown;
	// soon: one of them is new, so the next heartbeat goes as soon as possible (the
	// controller lets a broker stop once every active one reported the offset that
	// moved its leaderships).
	stopping map[int32]int64
	soon     bool

	// Asking to be fenced while the storage fails (LifecycleConfig.StorageFailed).
	storageBad bool // the last check's answer
	others     int  // other brokers the last image showed unfenced and not shutting down
	fenceAsked bool // the heartbeat in flight (or the last one) asked WantFence
	selfFenced bool // fenced on this broker's own request: not a lost session
}

// NewBrokerLifecycle returns a lifecycle in STARTING.
func NewBrokerLifecycle(cfg LifecycleConfig) (*BrokerLifecycle, error) {
	if cfg.NodeID < 0 || len(cfg.Listeners) == 0 {
		return nil, fmt.Errorf("controller: broker lifecycle needs a node id and listeners (node %d, %d listeners)", cfg.NodeID, len(cfg.Listeners))
	}
	if cfg.IncarnationID == (metadata.UUID{}) {
		_, _ = rand.Read(cfg.IncarnationID[:])
	}
	l := configs.Layers{}
	if cfg.HeartbeatInterval <= 0 {
		cfg.HeartbeatInterval = time.Duration(l.BrokerInt("broker.heartbeat.interval.ms")) * time.Millisecond
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = time.Duration(l.BrokerInt("broker.session.timeout.ms")) * time.Millisecond / 2
	}
	if cfg.RetryBackoff <= 0 {
		cfg.RetryBackoff = min(cfg.HeartbeatInterval, time.Second)
	}
	if cfg.ShutdownPoll <= 0 {
		cfg.ShutdownPoll = min(cfg.HeartbeatInterval, 100*time.Millisecond)
	}
	if cfg.UnreachableLogInterval <= 0 {
		cfg.UnreachableLogInterval = 10 * time.Second
	}
	if cfg.StoragePoll <= 0 {
		cfg.StoragePoll = 500 * time.Millisecond
	}
	if cfg.Clock == nil {
		cfg.Clock = SystemClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Features == nil {
		cfg.Features = metadata.SupportedFeatures()
	}
	b := &BrokerLifecycle{cfg: cfg, log: cfg.Logger, state: StateStarting, epoch: -1, unfencedSeen: -1, fenced: true,
		wake: make(chan struct{}, 1), changed: make(chan struct{})}
	b.nextAt = cfg.Clock.Now()
	return b, nil
}

// State returns the current state.
func (b *BrokerLifecycle) State() BrokerState {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state
}

// Epoch returns the broker epoch of the current registration (-1: none).
func (b *BrokerLifecycle) Epoch() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.epoch
}

// IncarnationID returns the incarnation id the broker registers with.
func (b *BrokerLifecycle) IncarnationID() metadata.UUID { return b.cfg.IncarnationID }

// MetadataApplied reports the broker's published metadata (subscribe it to the
// MetadataFollower). While the broker waits to be unfenced, an image showing its own
// registration makes the next heartbeat go at once; while it runs, an image showing
// it fenced makes it register again; an image showing another broker newly in
// controlled shutdown makes the next heartbeat go at once (that broker may stop
// once every active broker has reported applying it).
func (b *BrokerLifecycle) MetadataApplied(offset uint64, im *metadata.Image) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if offset <= b.offset {
		return
	}
	b.offset = offset
	if im == nil {
		return
	}
	self, ok := im.Broker(b.cfg.NodeID)
	mine := ok && self.Epoch == b.epoch
	if mine && !self.Fenced && !b.fenceAsked {
		// While it asks to be fenced, an image showing it unfenced predates the
		// fence: the fence that follows is no lost session.
		b.unfencedSeen = b.epoch
	}
	b.others = 0
	for _, o := range im.Brokers() {
		if o.ID != b.cfg.NodeID && !o.Fenced && !o.InControlledShutdown {
			b.others++
		}
	}
	if b.noteStoppingLocked(im) && b.state == StateRunning {
		if b.inFlight {
			b.soon = true
		} else {
			b.nextAt = b.cfg.Clock.Now()
			b.signalLocked()
		}
	}
	switch {
	case b.state == StateRecovery && mine && !b.inFlight:
		b.nextAt = b.cfg.Clock.Now()
		b.signalLocked()
	case b.state == StateRunning && mine && self.Fenced && b.unfencedSeen == b.epoch && !b.selfFenced:
		b.log.Warn("broker lifecycle: the metadata shows this broker fenced (session lost?); registering again", "broker", b.cfg.NodeID, "epoch", b.epoch)
		b.inFlight = false // an answer to the request in flight no longer matters
		b.seq++
		b.reregisterLocked(b.cfg.Clock.Now())
		b.signalLocked()
	}
}

// noteStoppingLocked records the other brokers im shows in controlled shutdown and
// reports whether one of them is new.
func (b *BrokerLifecycle) noteStoppingLocked(im *metadata.Image) bool {
	fresh := false
	var now map[int32]int64
	for _, o := range im.Brokers() {
		if o.ID == b.cfg.NodeID || !o.InControlledShutdown || o.Fenced {
			continue
		}
		if now == nil {
			now = map[int32]int64{}
		}
		now[o.ID] = o.Epoch
		if e, ok := b.stopping[o.ID]; !ok || e != o.Epoch {
			fresh = true
		}
	}
	b.stopping = now
	return fresh
}

// BeginControlledShutdown asks the controller to move this broker's leaderships
// away; the state becomes SHUTTING_DOWN once it says the broker may stop (at once if
// it never registered).
func (b *BrokerLifecycle) BeginControlledShutdown() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.shutdown {
		return
	}
	b.shutdown = true
	switch b.state {
	case StateStarting:
		// Not registered, or fenced and registering again: it leads nothing and may
		// stop at once.
		b.setStateLocked(StateShuttingDown)
		return
	case StateRecovery, StateRunning:
		b.setStateLocked(StatePendingControlledShutdown)
	}
	if !b.inFlight {
		b.nextAt = b.cfg.Clock.Now()
	}
	b.signalLocked()
}

// WaitState blocks until the state is s (true) or ctx ends (false).
func (b *BrokerLifecycle) WaitState(ctx context.Context, s BrokerState) bool {
	for {
		b.mu.Lock()
		cur, ch := b.state, b.changed
		b.mu.Unlock()
		if cur == s {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-ch:
		}
	}
}

func (b *BrokerLifecycle) setStateLocked(s BrokerState) {
	if s == b.state {
		return
	}
	b.log.Info("broker lifecycle", "broker", b.cfg.NodeID, "from", b.state.String(), "to", s.String(), "epoch", b.epoch)
	b.state = s
	close(b.changed)
	b.changed = make(chan struct{})
}

func (b *BrokerLifecycle) signalLocked() {
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// Next returns the request to send at now (nil when none is due) with its sequence
// number for OnResponse, and when to call Next again. An outstanding request older
// than RequestTimeout counts as failed.
func (b *BrokerLifecycle) Next(now time.Time) (kmsg.Request, uint64, time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state == StateShuttingDown {
		return nil, 0, time.Time{}
	}
	if b.inFlight {
		deadline := b.sentAt.Add(b.cfg.RequestTimeout)
		if now.Before(deadline) {
			return nil, 0, deadline
		}
		b.failedLocked(now, errors.New("request timed out"))
	}
	if now.Before(b.nextAt) {
		return nil, 0, b.nextAt
	}
	b.seq++
	b.inFlight, b.sentAt = true, now
	var req kmsg.Request
	if b.epoch < 0 || b.state == StateStarting {
		r := kmsg.NewPtrBrokerRegistrationRequest()
		r.Version = 3
		r.BrokerID, r.ClusterID, r.IncarnationID, r.Rack = b.cfg.NodeID, b.cfg.ClusterID, b.cfg.IncarnationID, b.cfg.Rack
		r.PreviousBrokerEpoch = b.epoch
		if b.epoch < 0 && b.cfg.PreviousBrokerEpoch > 0 {
			r.PreviousBrokerEpoch = b.cfg.PreviousBrokerEpoch
		}
		if b.cfg.PredecessorID != b.cfg.IncarnationID {
			SetPredecessor(r, b.cfg.PredecessorID)
		}
		for _, e := range b.cfg.Listeners {
			l := kmsg.NewBrokerRegistrationRequestListener()
			l.Name, l.Host, l.Port, l.SecurityProtocol = e.Name, e.Host, uint16(e.Port), e.SecurityProtocol
			r.Listeners = append(r.Listeners, l)
		}
		for _, name := range slices.Sorted(maps.Keys(b.cfg.Features)) {
			f := kmsg.NewBrokerRegistrationRequestFeature()
			f.Name, f.MinSupportedVersion, f.MaxSupportedVersion = name, b.cfg.Features[name].Min, b.cfg.Features[name].Max
			r.Features = append(r.Features, f)
		}
		req = r
	} else {
		r := kmsg.NewPtrBrokerHeartbeatRequest()
		r.Version = 1
		r.BrokerID, r.BrokerEpoch, r.CurrentMetadataOffset = b.cfg.NodeID, b.epoch, int64(b.offset)
		r.WantShutdown = b.shutdown
		r.WantFence = b.wantFenceLocked()
		SetHeartbeatFeatures(r, b.cfg.Features)
		if r.WantFence && !b.selfFenced {
			b.log.Warn("broker lifecycle: the storage cannot take writes; asking the controller to fence this broker (its leaderships move, it leaves the ISRs) until it can",
				"broker", b.cfg.NodeID, "epoch", b.epoch)
			b.selfFenced, b.unfencedSeen = true, -1
		}
		if !r.WantFence && b.fenceAsked {
			b.log.Info("broker lifecycle: the storage takes writes again; asking to be unfenced", "broker", b.cfg.NodeID, "epoch", b.epoch)
		}
		b.fenceAsked = r.WantFence
		req = r
	}
	return req, b.seq, now.Add(b.cfg.RequestTimeout)
}

// OnResponse takes the answer to request seq (or the error sending it). Answers to
// other requests are ignored.
func (b *BrokerLifecycle) OnResponse(now time.Time, seq uint64, resp kmsg.Response, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.inFlight || seq != b.seq || b.state == StateShuttingDown {
		return
	}
	b.inFlight = false
	if err != nil {
		b.failedLocked(now, err)
		return
	}
	switch r := resp.(type) {
	case *kmsg.BrokerRegistrationResponse:
		b.onRegistrationLocked(now, r)
	case *kmsg.BrokerHeartbeatResponse:
		b.onHeartbeatLocked(now, r)
	default:
		b.failedLocked(now, fmt.Errorf("unexpected response %T", resp))
	}
}

// LastAnswer is when an active controller last answered a registration or heartbeat
// (zero: never).
func (b *BrokerLifecycle) LastAnswer() time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.answered
}

func (b *BrokerLifecycle) okLocked(now time.Time) {
	b.answered = now
	if !b.failSince.IsZero() {
		b.log.Info("broker lifecycle: the controller answers again", "broker", b.cfg.NodeID, "after", now.Sub(b.failSince))
	}
	b.failSince, b.lastWarn = time.Time{}, time.Time{}
}

// failedLocked schedules a retry after a failure, logging while none answers.
func (b *BrokerLifecycle) failedLocked(now time.Time, err error) {
	b.inFlight = false
	b.nextAt = now.Add(b.cfg.RetryBackoff)
	if b.failSince.IsZero() {
		b.failSince = now
	}
	if b.lastWarn.IsZero() || now.Sub(b.lastWarn) >= b.cfg.UnreachableLogInterval {
		b.lastWarn = now
		what := "heartbeat"
		if b.state == StateStarting {
			what = "registration"
		}
		b.log.Warn("broker lifecycle: no active controller answered; waiting and retrying (are the controllers of controller.quorum.voters running and reachable?)",
			"broker", b.cfg.NodeID, "request", what, "state", b.state.String(), "failing for", now.Sub(b.failSince), "err", err)
	}
}

func (b *BrokerLifecycle) onRegistrationLocked(now time.Time, r *kmsg.BrokerRegistrationResponse) {
	if r.ErrorCode != 0 {
		err := kerr.ErrorForCode(r.ErrorCode)
		switch r.ErrorCode {
		case kerr.InconsistentClusterID.Code, kerr.DuplicateBrokerRegistration.Code, kerr.UnsupportedVersion.Code:
			hint := ""
			if r.ErrorCode == kerr.UnsupportedVersion.Code {
				hint = "this build does not support a feature level the cluster finalized (the controller's log says which); run a build that does"
			}
			b.log.Error("broker lifecycle: registration refused; retrying", "broker", b.cfg.NodeID, "err", err, "hint", hint)
			b.nextAt = now.Add(b.cfg.HeartbeatInterval)
			b.okLocked(now)
		default:
			b.failedLocked(now, err)
		}
		return
	}
	b.okLocked(now)
	b.epoch, b.fenced, b.caughtUp = r.BrokerEpoch, true, false
	b.log.Info("broker lifecycle: registered", "broker", b.cfg.NodeID, "epoch", b.epoch, "incarnation", b.cfg.IncarnationID)
	if b.shutdown {
		b.setStateLocked(StatePendingControlledShutdown)
	} else {
		b.setStateLocked(StateRecovery)
	}
	b.nextAt = now // the first heartbeat at once
}

func (b *BrokerLifecycle) onHeartbeatLocked(now time.Time, r *kmsg.BrokerHeartbeatResponse) {
	switch r.ErrorCode {
	case 0:
	case kerr.StaleBrokerEpoch.Code, kerr.BrokerIDNotRegistered.Code:
		b.okLocked(now)
		b.log.Warn("broker lifecycle: the registration is gone; registering again", "broker", b.cfg.NodeID, "epoch", b.epoch,
			"err", kerr.ErrorForCode(r.ErrorCode))
		b.reregisterLocked(now)
		return
	default:
		b.failedLocked(now, kerr.ErrorForCode(r.ErrorCode))
		return
	}
	b.okLocked(now)
	b.caughtUp = r.IsCaughtUp
	b.nextAt = now.Add(b.cfg.HeartbeatInterval)
	if b.soon {
		b.soon, b.nextAt = false, now
	}
	wasFenced := b.fenced
	b.fenced = r.IsFenced
	switch b.state {
	case StateRecovery:
		switch {
		case !r.IsFenced:
			b.setStateLocked(StateRunning)
			b.selfFenced = false
		case b.fenceAsked:
			// Kept fenced on its own request: it waits for its storage.
		case r.IsCaughtUp:
			// Caught up yet kept fenced: the controller will not unfence this epoch
			// (it fenced it for a lost session). A new registration will do.
			b.log.Warn("broker lifecycle: caught up but kept fenced; registering again", "broker", b.cfg.NodeID, "epoch", b.epoch)
			b.reregisterLocked(now)
		}
	case StateRunning:
		switch {
		case !r.IsFenced:
			if !b.fenceAsked {
				b.selfFenced = false
			}
		case b.fenceAsked:
			// Fenced, as it asked.
		case b.selfFenced && r.IsCaughtUp:
			// It stopped asking, is caught up and is kept fenced: the controller
			// will not unfence this epoch. A new registration will do.
			b.log.Warn("broker lifecycle: caught up but kept fenced after asking to be unfenced; registering again", "broker", b.cfg.NodeID, "epoch", b.epoch)
			b.reregisterLocked(now)
		case !wasFenced && !b.selfFenced:
			b.log.Warn("broker lifecycle: fenced by the controller (session lost?); registering again", "broker", b.cfg.NodeID, "epoch", b.epoch)
			b.reregisterLocked(now)
		}
	case StatePendingControlledShutdown:
		if r.ShouldShutdown {
			b.setStateLocked(StateShuttingDown)
		} else {
			b.nextAt = now.Add(b.cfg.ShutdownPoll)
		}
	}
}

func (b *BrokerLifecycle) reregisterLocked(now time.Time) {
	b.setStateLocked(StateStarting)
	b.fenced, b.caughtUp = true, false
	b.selfFenced, b.fenceAsked = false, false
	b.nextAt = now
	if b.shutdown {
		// Shutting down anyway: a broker without a live registration may just stop.
		b.setStateLocked(StateShuttingDown)
	}
}

// setStorage takes the answer of LifecycleConfig.StorageFailed. A change that
// changes what the heartbeat asks makes the next one go at once.
func (b *BrokerLifecycle) setStorage(now time.Time, bad bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if bad == b.storageBad {
		return
	}
	b.storageBad = bad
	if b.wantFenceLocked() != b.fenceAsked && (b.state == StateRunning || b.state == StateRecovery) {
		if b.inFlight {
			b.soon = true
		} else {
			b.nextAt = now
		}
	}
}

// wantFenceLocked says whether the heartbeat asks to be fenced: the storage
// cannot take writes and another broker can lead instead (a broker alone
// keeps serving reads), unless it is shutting down anyway.
func (b *BrokerLifecycle) wantFenceLocked() bool {
	return b.storageBad && b.others > 0 && !b.shutdown
}

// Run drives the lifecycle over ch until it reaches SHUTTING_DOWN or ctx ends.
func (b *BrokerLifecycle) Run(ctx context.Context, ch ControllerChannel) error {
	clock := b.cfg.Clock
	for {
		if b.State() == StateShuttingDown {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if b.cfg.StorageFailed != nil {
			b.setStorage(clock.Now(), b.cfg.StorageFailed())
		}
		req, seq, at := b.Next(clock.Now())
		if req != nil {
			rctx, cancel := context.WithTimeout(ctx, b.cfg.RequestTimeout)
			resp, err := ch.Request(rctx, req)
			cancel()
			b.OnResponse(clock.Now(), seq, resp, err)
			continue
		}
		wait := at.Sub(clock.Now())
		if b.cfg.StorageFailed != nil && (at.IsZero() || wait > b.cfg.StoragePoll) {
			wait = b.cfg.StoragePoll
		}
		fired := make(chan struct{})
		t := clock.AfterFunc(wait, func() { close(fired) })
		select {
		case <-ctx.Done():
		case <-fired:
		case <-b.wake:
		}
		t.Stop()
	}
}
