package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/controller"
	"github.com/samsa-broker/samsa/coordinator/metadata"
	"github.com/samsa-broker/samsa/engine"
	"github.com/samsa-broker/samsa/net/broker"
	"github.com/samsa-broker/samsa/net/kafka"
	"github.com/samsa-broker/samsa/net/quota"
	"github.com/samsa-broker/samsa/net/transport"
	"github.com/samsa-broker/samsa/replication"
)

// brokerRole is a node's broker: the engine's logs, the metadata follower that keeps
// the published image, the broker lifecycle (registration, heartbeats, controlled
// shutdown), the Kafka broker and its transport on the broker listeners.
//
// Start-up, in order:
//
//  1. the follower fetches the committed metadata log (from the local voter on a
//     combined node, over the network otherwise), and the lifecycle registers the
//     broker with the active controller and heartbeats;
//  2. once the follower's image shows this registration, the Kafka broker is built
//     over it, and every later image reaches it (and the lifecycle) in offset order.
//     The broker reconciles its logs with the image it is built over, deleting the
//     logs of partitions the image lacks, so that image must be at least as new as
//     any the node applied before it stopped: the registration was committed by an
//     active controller, after every entry of earlier terms, hence after every entry
//     this node ever applied (a commit index read back from a crashed voter's storage
//     may be older than what it had applied);
//  3. once the controller unfences it (RUNNING), the listeners accept clients.
//
// Steps 1 to 3 run on a goroutine of their own (ready), since on a cluster they wait
// for the quorum; a sole voter's Start waits for them.
type brokerRole struct {
	cfg       *Config
	log       *slog.Logger
	eng       *engine.Manager
	follower  *controller.MetadataFollower
	lifecycle *controller.BrokerLifecycle
	channel   controller.ControllerChannel
	tr        transport.Transport
	lns       map[string]net.Listener
	sec       *nodeSecurity         // the listeners' TLS, SASL and the authorizer (security.go)
	limiter   *transport.Limiter    // the broker listeners' connection limits (set under pubMu)
	secTrs    []transport.Transport // the Std transports of secured listeners

	pubMu sync.Mutex // serializes deliveries of images to the broker and the lifecycle
	// delivered is closed and renewed (under pubMu) after each image the broker took.
	delivered chan struct{}
	broker    *broker.Broker

	ctx    context.Context // ends at stop
	cancel context.CancelFunc
	wg     sync.WaitGroup
	ready  chan struct{} // closed once the listeners accept
	err    error         // why start-up failed (after ready is closed without serving)
}

// advertisedEndpoint is what clients are told for listener l bound at bound.
func advertisedEndpoint(cfg *Config, l Listener, bound *net.TCPAddr) metadata.Endpoint {
	if a, ok := cfg.Advertised[l.Name]; ok {
		return metadata.Endpoint{Name: l.Name, Host: a.Host, Port: int32(a.Port), SecurityProtocol: protocolID(l.Protocol)}
	}
	host := bound.IP.String()
	if bound.IP.IsUnspecified() {
		host = hostname()
	}
	return metadata.Endpoint{Name: l.Name, Host: host, Port: int32(bound.Port), SecurityProtocol: protocolID(l.Protocol)}
}

// brokerDeps are what the broker role is built over.
type brokerDeps struct {
	eng *engine.Manager
	lns map[string]net.Listener // the bound broker listeners
	// peer sends a request to another broker's inter-broker listener (broker.Deps.Peer);
	// nil on a single node.
	peer func(ctx context.Context, broker int32, req kmsg.Request) (kmsg.Response, error)
	// unreachable: whether this node lost a broker (kafka.Deps.Unreachable).
	unreachable func(id int32) (time.Time, bool)
	source      controller.MetadataSource
	channel     controller.ControllerChannel // forwarded requests
	// heartbeats carries the lifecycle's registration and heartbeats (nil: channel):
	// on a cluster, a connection of its own, whose close tells the controller.
	heartbeats controller.ControllerChannel
	// incarnation to register with (zero: a new one). A sole voter passes the one it
	// registered before: no other process can hold its directories (they are
	// locked), so its controller need not wait out the previous process's session.
	incarnation metadata.UUID
	// predecessor is the incarnation id of the node's previous broker process, if
	// known (takeIncarnation).
	predecessor metadata.UUID
	fetch       func(source int32, index int) replication.FetchClient // reaches other brokers for follower replicas
	reg         *prometheus.Registry
	fail        func(error)
}

func newBrokerRole(cfg *Config, clusterID string, d brokerDeps, log *slog.Logger) (*brokerRole, error) {
	sec, serr := newNodeSecurity(cfg, log)
	if serr != nil {
		return nil, serr
	}
	r := &brokerRole{cfg: cfg, log: log, eng: d.eng, channel: d.channel, lns: d.lns, sec: sec, ready: make(chan struct{})}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	r.follower = controller.NewMetadataFollower(controller.FollowerConfig{Logger: log.With("component", "metadata-follower")})
	var eps []metadata.Endpoint
	for _, l := range cfg.BrokerListeners() {
		eps = append(eps, advertisedEndpoint(cfg, l, d.lns[l.Name].Addr().(*net.TCPAddr)))
	}
	// The client listener first: the broker's endpoint where a client knows no other.
	client, _ := cfg.ClientListener()
	for i, e := range eps {
		if e.Name == client.Name {
			eps[0], eps[i] = eps[i], eps[0]
		}
	}
	var err error
	if r.lifecycle, err = controller.NewBrokerLifecycle(controller.LifecycleConfig{
		NodeID: cfg.NodeID, ClusterID: clusterID, IncarnationID: d.incarnation, PredecessorID: d.predecessor, Listeners: eps, Rack: cfg.Rack,
		// The epoch the logs were last closed cleanly under (-1 after a crash): the
		// controller keeps the broker among the eligible leader replicas only then.
		PreviousBrokerEpoch: d.eng.CleanShutdownEpoch(),
		HeartbeatInterval:   cfg.HeartbeatInterval, RequestTimeout: cfg.SessionTimeout / 2,
		// A full or offline log directory: fenced (its leaderships move, it leaves
		// the ISRs) until it takes writes again.
		StorageFailed: func() bool { return len(d.eng.UnwritableDirs()) > 0 },
		Logger:        log.With("component", "broker-lifecycle"),
	}); err != nil {
		return nil, err
	}
	r.follower.Subscribe(r.published)

	var bound, adv []string
	for _, l := range cfg.BrokerListeners() {
		bound = append(bound, l.Name+"://"+d.lns[l.Name].Addr().String())
	}
	for _, e := range eps {
		adv = append(adv, e.Name+"://"+net.JoinHostPort(e.Host, strconv.Itoa(int(e.Port))))
	}
	kcfg := kafka.Config{
		NodeID: cfg.NodeID, ClusterID: clusterID, Host: eps[0].Host, Port: eps[0].Port, Rack: cfg.Rack, Listener: client.Name,
		Static: cfg.Keys, Registerer: d.reg,
		Derived: map[string]string{
			"log.dirs":             strings.Join(cfg.LogDirs, ","),
			"metadata.log.dir":     cfg.MetadataDir,
			"listeners":            strings.Join(bound, ","),
			"advertised.listeners": strings.Join(adv, ","),
			"process.roles":        cfg.Roles.String(),
		},
	}
	if len(cfg.Voters) > 0 && cfg.Voters[0].ID >= 0 {
		kcfg.Derived["controller.quorum.voters"] = voterList(cfg.Voters)
	}

	r.wg.Add(3)
	go func() {
		defer r.wg.Done()
		r.follower.Run(r.ctx, d.source)
	}()
	hb := d.heartbeats
	if hb == nil {
		hb = d.channel
	}
	go func() {
		defer r.wg.Done()
		if err := r.lifecycle.Run(r.ctx, hb); err != nil && !errors.Is(err, context.Canceled) {
			log.Warn("broker lifecycle ended", "err", err)
		}
	}()
	go func() {
		defer r.wg.Done()
		defer close(r.ready)
		if err := r.start(kcfg, d); err != nil {
			r.err = err
			if r.ctx.Err() == nil {
				d.fail(err)
			}
		}
	}()
	return r, nil
}

// published delivers a new image to the broker (once built) and the lifecycle.
func (r *brokerRole) published(offset uint64, old, im *metadata.Image) {
	r.pubMu.Lock()
	defer r.pubMu.Unlock()
	if r.broker != nil {
		if brokerConfigsChanged(old, im, r.cfg.NodeID) {
			r.applyDynamicBrokerConfigs(im, r.limiter)
		}
		r.broker.MetadataChanged(offset, old, im)
		if r.delivered != nil {
			close(r.delivered)
		}
		r.delivered = make(chan struct{})
	}
	r.lifecycle.MetadataApplied(offset, im)
}

// waitRegistered waits until the follower's image shows the lifecycle's current
// registration (step 2).
func (r *brokerRole) waitRegistered() error {
	for {
		off, im := r.follower.Image()
		if epoch := r.lifecycle.Epoch(); epoch >= 0 {
			if b, ok := im.Broker(r.cfg.NodeID); ok && b.Epoch == epoch {
				return nil
			}
		}
		// The registration's answer and its commit both publish an image.
		if err := r.follower.WaitFor(r.ctx, off+1); err != nil {
			return err
		}
	}
}

// waitUnfenced waits until the image the broker answers from shows it unfenced: the
// controller unfences it (RUNNING) before this broker has applied that record, and a
// client served in between would be told of no broker at all (Metadata lists only
// unfenced brokers, and no controller).
func (r *brokerRole) waitUnfenced() error {
	for {
		r.pubMu.Lock()
		_, im := r.broker.Image()
		if r.delivered == nil {
			r.delivered = make(chan struct{})
		}
		ch := r.delivered
		r.pubMu.Unlock()
		if b, ok := im.Broker(r.cfg.NodeID); ok && !b.Fenced {
			return nil
		}
		select {
		case <-ch:
		case <-r.ctx.Done():
			return r.ctx.Err()
		}
	}
}

// waitLogEvery: while the broker is not serving, a warning after max(2 heartbeats,
// 1 s), then every waitLogEvery, naming its state and the voters, so that a broker
// that reaches no controller says so.
const waitLogEvery = 10 * time.Second

// logWhileWaiting starts the warnings; the returned func stops them.
func (r *brokerRole) logWhileWaiting() func() {
	first := max(2*r.cfg.HeartbeatInterval, time.Second)
	done := make(chan struct{})
	go func() {
		t := time.NewTimer(first)
		defer t.Stop()
		since := time.Now()
		for {
			select {
			case <-done:
				return
			case <-r.ctx.Done():
				return
			case <-t.C:
			}
			off, _ := r.follower.Image()
			r.log.Warn("waiting for the controller quorum: the broker serves once it is registered, caught up with the metadata and unfenced",
				"state", r.lifecycle.State().String(), "metadata_offset", off, "voters", voterList(r.cfg.Voters),
				"waiting", time.Since(since).Round(time.Second).String())
			t.Reset(waitLogEvery)
		}
	}()
	return func() { close(done) }
}

// start runs steps 2 and 3 of start-up.
func (r *brokerRole) start(kcfg kafka.Config, d brokerDeps) error {
	stopWaitLog := r.logWhileWaiting()
	defer stopWaitLog()
	if err := r.waitRegistered(); err != nil {
		return err
	}
	r.pubMu.Lock()
	var err, kerr error
	r.broker, kerr = broker.New(kcfg, broker.Deps{Engine: r.eng, Metadata: r.follower, Controller: r.channel, ControllerID: r.controllerID, Fetch: d.fetch, Peer: d.peer, Unreachable: d.unreachable}, r.log.With("component", "kafka"))
	if kerr == nil {
		// Images published while the broker was being built.
		off, im := r.follower.Image()
		r.broker.MetadataChanged(off, nil, im)
	}
	r.pubMu.Unlock()
	if kerr != nil {
		return kerr
	}
	// High watermarks of logs recovered after a crash catch up once their data is
	// durable, before any client asks.
	r.broker.StartDataPath()
	// The ip entity's connection_creation_rate, read from the broker's image at accept.
	ipRate := func(ip string) (float64, bool) {
		_, im := r.broker.Image()
		return quota.IPConnectionRate(im.ClientQuotas(), ip)
	}
	limiter := newConnLimiter(r.cfg, d.reg, ipRate, r.log.With("component", "connection-limits"))
	r.pubMu.Lock()
	r.limiter = limiter
	_, im := r.broker.Image()
	r.applyDynamicBrokerConfigs(im, limiter) // the dynamic limits of the images published before
	r.pubMu.Unlock()
	tcfg := transport.Config{MaxRequestBytes: r.cfg.MaxRequestBytes, IdleTimeout: r.cfg.IdleTimeout, InlineWrites: r.cfg.InlineWrites,
		Limiter: limiter}
	switch r.cfg.Transport {
	case "std":
		r.tr = transport.NewStd(tcfg, r.broker.Kafka(), r.log.With("component", "transport"))
	case "reactor":
		// Loops park in Go's poller without holding an OS thread each: locked loops
		// cost two thread switches per wake-up, which lost on one connection here.
		rc := transport.ReactorConfig{Config: tcfg, Workers: r.cfg.IOThreads, UnlockedLoops: true, Loops: r.cfg.NetLoops}
		if r.tr, err = transport.NewReactor(rc, r.broker.Kafka(), r.log.With("component", "transport")); err != nil {
			return err
		}
	default:
		return fmt.Errorf("%w: transport %q (want std or reactor)", ErrConfig, r.cfg.Transport)
	}
	if !r.lifecycle.WaitState(r.ctx, controller.StateRunning) {
		return r.ctx.Err()
	}
	if err := r.waitUnfenced(); err != nil {
		return err
	}
	for name, ln := range r.lns {
		tr := r.tr
		if !r.sec.plain(name) {
			h, err := r.sec.handler(name, r.broker.Kafka())
			if err != nil {
				return fmt.Errorf("listener %s: %w", name, err)
			}
			if t := r.sec.listeners[name].tls; t != nil {
				if ln, err = t.Listener(ln); err != nil {
					return fmt.Errorf("listener %s: %w", name, err)
				}
				t.Watch()
			}
			tr = transport.NewStd(tcfg, h, r.log.With("component", "transport", "listener", name))
			r.secTrs = append(r.secTrs, tr)
		}
		ln = transport.NamedListener(ln, name) // for the per-listener connection limits
		go func() {
			if err := tr.Serve(ln); err != nil && !errors.Is(err, transport.ErrClosed) {
				d.fail(fmt.Errorf("listener %s: %w", name, err))
			}
		}()
	}
	return nil
}

// controllerID is the active controller as the metadata fetches report it.
func (r *brokerRole) controllerID() int32 {
	id, _ := r.follower.Leader()
	return id
}

// waitReady waits until the listeners accept (nil) or start-up failed.
func (r *brokerRole) waitReady(ctx context.Context) error {
	select {
	case <-r.ready:
		return r.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// waitControlledShutdown waits until the controller lets the broker stop, at most
// broker.session.timeout.ms, and less when no active controller answers for
// noControllerWait (nothing can move the broker's leaderships without one: the last
// voters of a cluster stopping all at once have no quorum left).
func (r *brokerRole) waitControlledShutdown(ctx context.Context) {
	start := time.Now()
	grace := r.noControllerWait()
	for {
		wctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		ok := r.lifecycle.WaitState(wctx, controller.StateShuttingDown)
		cancel()
		if ok {
			return
		}
		since := start
		if a := r.lifecycle.LastAnswer(); a.After(since) {
			since = a
		}
		switch {
		case ctx.Err() != nil, time.Since(start) >= r.cfg.SessionTimeout:
			r.log.Warn("controlled shutdown: the controller did not confirm in time; stopping anyway", "waited", time.Since(start).Round(time.Millisecond))
			return
		case time.Since(since) >= grace:
			r.log.Warn("controlled shutdown: no active controller answers; stopping without its confirmation (a controller elected meanwhile fences this broker)",
				"waited", time.Since(start).Round(time.Millisecond), "without_answer", time.Since(since).Round(time.Millisecond))
			return
		}
	}
}

// noControllerWait is how long a controlled shutdown waits without an answer from an
// active controller: time for the quorum to elect one (two election timeouts) and
// half a second.
func (r *brokerRole) noControllerWait() time.Duration {
	return 2*r.cfg.ElectionTimeout + 500*time.Millisecond
}

// stop shuts the broker down: a controlled shutdown first (the controller moves this
// broker's leaderships away and says when it may stop; bounded by ctx and by the
// session timeout), then the transport drains, then the broker's background state,
// the follower and the lifecycle stop.
func (r *brokerRole) stop(ctx context.Context) error {
	var errs []error
	if st := r.lifecycle.State(); st == controller.StateRunning || st == controller.StateRecovery {
		r.log.Info("controlled shutdown: moving leaderships away")
		r.lifecycle.BeginControlledShutdown()
		r.waitControlledShutdown(ctx)
	}
	r.cancel()
	<-r.ready
	if r.tr != nil {
		if err := r.tr.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("draining connections: %w", err))
		}
	}
	for _, tr := range r.secTrs {
		if err := tr.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("draining connections: %w", err))
		}
	}
	r.sec.close()
	for _, ln := range r.lns {
		ln.Close() // those never served (start-up cut short); the others are closed already
	}
	r.pubMu.Lock()
	if r.broker != nil {
		r.broker.CloseDataPath()
		r.broker.Close()
	}
	r.pubMu.Unlock()
	r.wg.Wait()
	// Closing the logs (after this) records the epoch they were closed under, which the
	// next process names as its PreviousBrokerEpoch (Kafka's logManager.shutdown(brokerEpoch)).
	r.eng.SetBrokerEpoch(r.lifecycle.Epoch())
	return errors.Join(errs...)
}
