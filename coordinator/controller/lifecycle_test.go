package controller

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/metadata"
)

func newLifecycle(t testing.TB, id int32, clock Clock, mod func(*LifecycleConfig)) *BrokerLifecycle {
	t.Helper()
	cfg := LifecycleConfig{NodeID: id, ClusterID: "cluster-a", IncarnationID: metadata.UUID{0: byte(id), 1: 9},
		Listeners:         []metadata.Endpoint{{Name: "PLAINTEXT", Host: "127.0.0.1", Port: 9000 + id}},
		HeartbeatInterval: 2 * time.Second, RequestTimeout: 4 * time.Second, Clock: clock}
	if mod != nil {
		mod(&cfg)
	}
	b, err := NewBrokerLifecycle(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// drive sends every request the lifecycle wants now through the harness and feeds
// the follower the committed log.
func (h *harness) drive(b *BrokerLifecycle, f *MetadataFollower) {
	h.t.Helper()
	for range 8 {
		if f != nil {
			off, _ := f.Image()
			res, _ := h.voter.ReadCommitted(off+1, 1<<20)
			if err := f.Apply(MetadataBatch{Entries: res.Entries, HighWatermark: res.Committed + 1}); err != nil {
				h.t.Fatal(err)
			}
		}
		req, seq, _ := b.Next(h.clock.Now())
		if req == nil {
			return
		}
		b.OnResponse(h.clock.Now(), seq, h.do(req), nil)
	}
}

func TestLifecycleThroughController(t *testing.T) {
	h := newHarness(t, nil)
	b := newLifecycle(t, 1, h.clock, nil)
	f := NewMetadataFollower(FollowerConfig{Clock: h.clock})
	f.Subscribe(func(off uint64, _, im *metadata.Image) { b.MetadataApplied(off, im) })
	if b.State() != StateStarting {
		t.Fatal(b.State())
	}
	h.drive(b, f)
	// Registered, heartbeated with its applied offset (which shows its registration),
	// unfenced: running.
	if b.State() != StateRunning || b.Epoch() <= 0 {
		t.Fatalf("state %v epoch %d", b.State(), b.Epoch())
	}
	if br, _ := h.image().Broker(1); br.Fenced || br.IncarnationID != b.IncarnationID() {
		t.Fatalf("registration %+v", br)
	}
	// Heartbeats keep the session alive.
	for range 10 {
		h.clock.Advance(2 * time.Second)
		h.drive(b, f)
		h.settle()
	}
	if br, _ := h.image().Broker(1); br.Fenced {
		t.Fatal("fenced while heartbeating")
	}
	// Silence past the session timeout: fenced; the next heartbeat learns it and the
	// broker registers again with a new epoch.
	old := b.Epoch()
	h.clock.Advance(10 * time.Second)
	h.settle()
	if br, _ := h.image().Broker(1); !br.Fenced {
		t.Fatal("not fenced after silence")
	}
	h.drive(b, f)
	h.drive(b, f)
	if b.State() != StateRunning || b.Epoch() <= old {
		t.Fatalf("after the lost session: %v epoch %d (was %d)", b.State(), b.Epoch(), old)
	}
	// Controlled shutdown.
	b.BeginControlledShutdown()
	if b.State() != StatePendingControlledShutdown {
		t.Fatal(b.State())
	}
	for range 3 {
		h.drive(b, f)
		h.clock.Advance(2 * time.Second)
	}
	if b.State() != StateShuttingDown {
		t.Fatalf("state %v", b.State())
	}
	if req, _, _ := b.Next(h.clock.Now()); req != nil {
		t.Fatal("a request after SHUTTING_DOWN")
	}
}

func TestLifecycleTimeoutsAndStaleAnswers(t *testing.T) {
	clock := NewManualClock(t0)
	b := newLifecycle(t, 1, clock, nil)
	req, seq, _ := b.Next(clock.Now())
	if _, ok := req.(*kmsg.BrokerRegistrationRequest); !ok {
		t.Fatalf("first request %T", req)
	}
	if again, _, _ := b.Next(clock.Now()); again != nil {
		t.Fatal("a second request while one is outstanding")
	}
	clock.Advance(4 * time.Second) // the request timed out
	if again, _, _ := b.Next(clock.Now()); again != nil {
		t.Fatal("retried before the backoff")
	}
	clock.Advance(time.Second)
	req2, seq2, _ := b.Next(clock.Now())
	if req2 == nil || seq2 == seq {
		t.Fatal("no retry after the timeout")
	}
	// The late answer to the first request is ignored.
	late := kmsg.NewPtrBrokerRegistrationResponse()
	late.BrokerEpoch = 5
	b.OnResponse(clock.Now(), seq, late, nil)
	if b.Epoch() != -1 {
		t.Fatal("a stale answer was taken")
	}
	ok := kmsg.NewPtrBrokerRegistrationResponse()
	ok.BrokerEpoch = 6
	b.OnResponse(clock.Now(), seq2, ok, nil)
	if b.Epoch() != 6 || b.State() != StateRecovery {
		t.Fatalf("epoch %d state %v", b.Epoch(), b.State())
	}
	// A heartbeat answered STALE_BROKER_EPOCH: register again.
	hb, hseq, _ := b.Next(clock.Now())
	if _, isHB := hb.(*kmsg.BrokerHeartbeatRequest); !isHB {
		t.Fatalf("%T", hb)
	}
	stale := kmsg.NewPtrBrokerHeartbeatResponse()
	stale.ErrorCode = 77 // STALE_BROKER_EPOCH
	b.OnResponse(clock.Now(), hseq, stale, nil)
	if b.State() != StateStarting {
		t.Fatalf("after a stale epoch: %v", b.State())
	}
	// Shutdown before registering again: may stop at once.
	b.BeginControlledShutdown()
	if b.State() != StateShuttingDown {
		t.Fatal(b.State())
	}
}

// recordingHandler counts warnings.
type recordingHandler struct {
	mu    sync.Mutex
	warns []string
}

func (h *recordingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordingHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn {
		h.mu.Lock()
		h.warns = append(h.warns, r.Message)
		h.mu.Unlock()
	}
	return nil
}
func (h *recordingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *recordingHandler) WithGroup(string) slog.Handler      { return h }

// TestLifecycleNoController: a broker that reaches no controller keeps retrying and
// says so every UnreachableLogInterval, not on every attempt.
func TestLifecycleNoController(t *testing.T) {
	clock := NewManualClock(t0)
	rec := &recordingHandler{}
	b := newLifecycle(t, 1, clock, func(c *LifecycleConfig) { c.Logger = slog.New(rec) })
	attempts := 0
	for range 60 { // 60 s of one attempt a second, each failing
		req, seq, _ := b.Next(clock.Now())
		if req != nil {
			attempts++
			b.OnResponse(clock.Now(), seq, nil, ErrNoController)
		}
		clock.Advance(time.Second)
	}
	if attempts < 50 || len(rec.warns) < 5 || len(rec.warns) > 7 {
		t.Fatalf("%d attempts, %d warnings: %v", attempts, len(rec.warns), rec.warns)
	}
	if b.State() != StateStarting {
		t.Fatal(b.State())
	}
}

// TestLifecycleRunOverLocalChannel runs the real loops: lifecycle and follower over
// a LocalChannel and a LogSource to a running controller.
func TestLifecycleRunOverLocalChannel(t *testing.T) {
	_, v := NewSingleMemLog(1)
	c, err := New(Config{NodeID: 1, ClusterID: "cluster-a"}, v)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	run := func(f func()) { wg.Add(1); go func() { defer wg.Done(); f() }() }
	run(func() { _ = c.Run(ctx) })
	b := newLifecycle(t, 1, SystemClock{}, func(cfg *LifecycleConfig) { cfg.HeartbeatInterval = 20 * time.Millisecond })
	f := NewMetadataFollower(FollowerConfig{Wait: 10 * time.Millisecond})
	f.Subscribe(func(off uint64, _, im *metadata.Image) { b.MetadataApplied(off, im) })
	run(func() { _ = f.Run(ctx, LogSource{Log: v}) })
	lifeDone := make(chan error, 1)
	run(func() { lifeDone <- b.Run(ctx, NewLocalChannel(c)) })
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	if !b.WaitState(wctx, StateRunning) {
		t.Fatalf("not running: %v", b.State())
	}
	b.BeginControlledShutdown()
	if !b.WaitState(wctx, StateShuttingDown) {
		t.Fatalf("not shut down: %v", b.State())
	}
	select {
	case err := <-lifeDone:
		if err != nil {
			t.Fatal(err)
		}
	case <-wctx.Done():
		t.Fatal("Run did not return after SHUTTING_DOWN")
	}
	// A channel to no active controller gives up when its context ends.
	v2log := NewMemLog(2)
	c2, _ := New(Config{NodeID: 2}, v2log.Voter(2))
	sctx, scancel := context.WithTimeout(ctx, 30*time.Millisecond)
	defer scancel()
	if _, err := NewLocalChannel(c2).Request(sctx, registration(2, 1, "")); !errors.Is(err, ErrNoController) {
		t.Fatalf("no controller: %v", err)
	}
}

// TestControlledShutdownIsQuick: a broker's controlled shutdown completes about
// ShutdownPoll after its leaderships moved, not a heartbeat interval later: the
// broker that took them over heartbeats as soon as it applies the change, and the
// stopping broker polls.
func TestControlledShutdownIsQuick(t *testing.T) {
	h := newHarness(t, nil)
	nodes, driveAll := lifecycleNodes(h, 1, 2)
	driveAll()
	for _, n := range nodes {
		if n.b.State() != StateRunning {
			t.Fatalf("broker state %v", n.b.State())
		}
	}
	if ct := h.createTopic("t", 4, 2); ct.ErrorCode != 0 {
		t.Fatal(code(ct.ErrorCode))
	}
	h.clock.Advance(time.Second) // mid-way between heartbeats
	driveAll()
	if !LeadsAny(h.image(), 1) {
		t.Fatal("broker 1 leads nothing")
	}
	start := h.clock.Now()
	nodes[0].b.BeginControlledShutdown()
	for nodes[0].b.State() != StateShuttingDown && h.clock.Now().Sub(start) < 5*time.Second {
		driveAll()
		h.clock.Advance(20 * time.Millisecond)
	}
	if took := h.clock.Now().Sub(start); nodes[0].b.State() != StateShuttingDown || took > 300*time.Millisecond {
		t.Fatalf("controlled shutdown: state %v after %v (want SHUTTING_DOWN within 300 ms)", nodes[0].b.State(), took)
	}
	if LeadsAny(h.image(), 1) {
		t.Fatal("broker 1 still leads")
	}
}

// TestLifecycleStaleFencedImage: the controller unfences the broker (its heartbeat's
// answer) before the broker applies that record, so the images it applies meanwhile
// still show it fenced at its epoch. Those do not send it back to register; an image
// showing it fenced after one showed it unfenced does (a lost session).
func TestLifecycleStaleFencedImage(t *testing.T) {
	clock := NewManualClock(t0)
	b := newLifecycle(t, 1, clock, nil)
	_, seq, _ := b.Next(clock.Now())
	reg := kmsg.NewPtrBrokerRegistrationResponse()
	reg.BrokerEpoch = 6
	b.OnResponse(clock.Now(), seq, reg, nil)
	_, hseq, _ := b.Next(clock.Now())
	hb := kmsg.NewPtrBrokerHeartbeatResponse()
	hb.IsCaughtUp, hb.IsFenced = true, false
	b.OnResponse(clock.Now(), hseq, hb, nil)
	if b.State() != StateRunning {
		t.Fatalf("after the unfencing heartbeat: %v", b.State())
	}
	image := func(fenced bool) *metadata.Image {
		return mustApply(t, &metadata.Image{}, &metadata.RegisterBrokerRecord{ID: 1, Epoch: 6, Fenced: fenced,
			Endpoints: []metadata.Endpoint{{Name: "PLAINTEXT", Host: "h", Port: 9001}}})
	}
	b.MetadataApplied(10, image(true))
	if b.State() != StateRunning {
		t.Fatalf("a stale image (fenced, before the unfencing record) sent it to %v", b.State())
	}
	b.MetadataApplied(11, image(false))
	b.MetadataApplied(12, image(true))
	if b.State() != StateStarting {
		t.Fatalf("fenced after being shown unfenced: %v, want STARTING (register again)", b.State())
	}
}
