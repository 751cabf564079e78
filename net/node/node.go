package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/configs"
	"github.com/samsa-broker/samsa/coordinator/controller"
	"github.com/samsa-broker/samsa/coordinator/controller/quorum"
	"github.com/samsa-broker/samsa/coordinator/metadata"
	"github.com/samsa-broker/samsa/engine"
	"github.com/samsa-broker/samsa/engine/vfs"
	"github.com/samsa-broker/samsa/net/peer"
)

// Options are what Start needs besides the configuration.
type Options struct {
	// Logger receives the node's events (nil: discard).
	Logger *slog.Logger
	// ListenHint names, per listener, the flag or variable that sets its address,
	// for the error when the address is taken ("--listen or LISTEN="). Keys are
	// listener names and "admin".
	ListenHint map[string]string
}

// Node is one running node: its storage, its listeners, the components of its roles.
// Start returns it serving; Shutdown stops it. Its methods are safe for concurrent use.
type Node struct {
	cfg       *Config
	log       *slog.Logger
	clusterID string
	hints     map[string]string

	fs      *vfs.CrashFS // samsa.test.power.loss.journal; nil otherwise
	eng     *engine.Manager
	reg     *prometheus.Registry
	peer    *peer.Client        // the other nodes
	inter   *internode          // TLS and SASL between nodes (internode.go)
	ctl     *controllerRole     // nil without the controller role
	ctlLn   *controllerListener // the CONTROLLER listener; nil without one
	brk     *brokerRole         // nil without the broker role
	lns     map[string]net.Listener
	admin   *http.Server
	adminLn net.Listener

	failed    chan error  // the first listener or component that failed
	stopping  atomic.Bool // shutdown began (/live and /ready answer 503)
	failOnce  sync.Once
	closeOnce sync.Once
	closeErr  error
}

// Start brings a node up from its configuration, in this order (each step undone if a
// later one fails):
//
//  1. storage: meta.properties of every directory checked (formatting a sole combined
//     voter, adopting an earlier single-node directory); the power-loss journal;
//  2. the listeners bound (an address in use fails before anything serves), the
//     net/peer client of the other nodes;
//  3. the controller role: the raft voter on metadata.log.dir (importing an earlier
//     single-node metadata store) and the active controller beside it, then the
//     CONTROLLER listener's handler;
//  4. the broker role: the engine (log.dirs), the metadata follower, the broker
//     lifecycle, the Kafka broker (see brokerRole for its own order);
//  5. the admin HTTP listener (/metrics, /debug/pprof/).
//
// A sole voter's Start returns once its broker serves; a node of a cluster returns at
// once, and its broker serves when the quorum has let it catch up and unfenced it
// (Ready).
func Start(cfg *Config, opts Options) (_ *Node, err error) {
	n := &Node{cfg: cfg, log: opts.Logger, hints: opts.ListenHint, lns: map[string]net.Listener{}, failed: make(chan error, 1)}
	if n.log == nil {
		n.log = slog.New(slog.DiscardHandler)
	}
	defer func() {
		if err != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			n.shutdown(ctx, false)
			cancel()
		}
	}()
	n.log.Info("starting", "node_id", cfg.NodeID, "roles", cfg.Roles.String(), "voters", voterList(cfg.Voters),
		"log_dirs", strings.Join(cfg.LogDirs, ","), "metadata_dir", cfg.MetadataDir, "sync", cfg.Sync.Name, "transport", cfg.Transport)
	for _, d := range cfg.Dirs() {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrStorage, err)
		}
	}
	if n.clusterID, err = checkStorage(cfg, n.log); err != nil {
		return nil, err
	}
	switch dynamic, err := DynamicQuorum(cfg); {
	case err != nil:
		return nil, err
	case dynamic:
		// The quorum's members come from its log (quorum_dynamic.go).
		cfg = cfg.Dynamic()
		n.cfg = cfg
		n.log.Info("the controller quorum is dynamic (kraft.version 1): its voters come from the metadata log", "bootstrap_servers", voterList(cfg.Voters))
	}
	fsys, err := n.openJournal()
	if err != nil {
		return nil, err
	}
	if err := n.bind(); err != nil {
		return nil, err
	}
	n.reg = prometheus.NewRegistry()
	n.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), newRuntimeTailCollector())
	images := &imageRef{}
	if n.inter, err = newInternode(cfg, n.log); err != nil {
		return nil, err
	}
	if n.peer, err = newPeer(cfg, n.clusterID, images, n.inter, n.log); err != nil {
		return nil, err
	}
	registerPeerMetrics(n.reg, n.peer)
	if cfg.Roles.Controller {
		var tr raftTransport = noTransport{}
		if !cfg.SoleVoter() {
			tr = n.peer.RaftTransport()
		}
		// The members a dynamic quorum's log records are where raft sends (a
		// static quorum's log records none: controller.quorum.voters stays).
		ctlName := cfg.ControllerListenerNames[0]
		members := func(ms []quorum.Member) {
			if addrs := memberAddrs(ms, ctlName); len(addrs) > 0 {
				n.peer.SetVoters(addrs)
			}
		}
		if n.ctl, err = startControllerRole(cfg, n.clusterID, fsys, tr, n.log, n.fail, members); err != nil {
			return nil, err
		}
		if dir, err := metaDirectoryID(cfg); err == nil {
			// A voter of a dynamic quorum (or one upgraded to it) keeps its own
			// entry of the voter set right.
			ch := n.peer.ControllerChannel()
			n.ctl.goRun(func(ctx context.Context) { n.ctl.reportVoter(ctx, cfg, dir, ch, 2*time.Second) })
		}
		if cfg.DynamicQuorum && len(n.ctl.q.Members()) == 0 {
			// Formatted with --no-initial-controllers: the leader that adds this
			// controller is found through the bootstrap servers.
			go func() {
				if err := n.peer.LearnVoters(context.Background()); err != nil {
					n.log.Info("learning the quorum's voters from controller.quorum.bootstrap.servers stopped", "err", err)
				}
			}()
		}
		// The broker's requests to the active controller go first where this voter
		// knows the leader to be: a leader that stopped answering (SIGSTOP, a
		// partition) is not waited on once the quorum has elected another.
		n.ctl.q.SubscribeLeadership(func(l quorum.Leadership) { n.peer.NoteLeaderTerm(l.Leader, l.Term) })
		if l, ok := cfg.ControllerListener(); ok {
			if n.ctlLn, err = startControllerListener(cfg, n.clusterID, n.ctl, n.lns[l.Name], n.inter, n.reg, n.log, n.fail); err != nil {
				return nil, err
			}
		}
	}
	if cfg.Roles.Broker {
		if err := n.startBroker(fsys); err != nil {
			return nil, err
		}
		images.f.Store(n.brk.follower)
		if !cfg.Roles.Controller {
			// A dynamic quorum's voters change: a broker follows them in its image.
			name := cfg.ControllerListenerNames[0]
			n.brk.follower.Subscribe(func(_ uint64, old, im *metadata.Image) {
				if addrs := imageVoterAddrs(im, name); len(addrs) > 0 && (old == nil || !maps.Equal(addrs, imageVoterAddrs(old, name))) {
					n.peer.SetVoters(addrs)
				}
			})
		}
	}
	if err := n.startAdmin(); err != nil {
		return nil, err
	}
	if n.brk != nil && cfg.SoleVoter() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := n.brk.waitReady(ctx); err != nil {
			return nil, fmt.Errorf("starting the broker: %w", err)
		}
	}
	if l, ok := cfg.ClientListener(); ok {
		ep := advertisedEndpoint(cfg, l, n.lns[l.Name].Addr().(*net.TCPAddr))
		n.log.Info("listening", "addr", n.lns[l.Name].Addr().String(), "advertised", net.JoinHostPort(ep.Host, strconv.Itoa(int(ep.Port))), "cluster_id", n.clusterID)
	}
	return n, nil
}

// openJournal opens the power-loss journal (samsa.test.power.loss.journal, tests):
// every file of the engine and the raft log goes through it. nil without it.
func (n *Node) openJournal() (vfs.FS, error) {
	if n.cfg.PowerLossJournal == "" {
		return nil, nil
	}
	cfs, err := vfs.OpenJournal(vfs.Default, n.cfg.PowerLossJournal)
	if err != nil {
		return nil, fmt.Errorf("samsa.test.power.loss.journal: %w", err)
	}
	if st := cfs.LastCut(); st != (vfs.CutStats{}) {
		n.log.Warn("power-loss journal: cut the files back to what was synced", "journal", n.cfg.PowerLossJournal, "cut", fmt.Sprintf("%+v", st))
	}
	n.fs = cfs
	return cfs, nil
}

// bind binds the broker listeners.
func (n *Node) bind() error {
	brokerLns := n.cfg.BrokerListeners()
	for _, l := range brokerLns {
		what := "kafka listener"
		if len(brokerLns) > 1 {
			what = "kafka listener " + l.Name
		}
		ln, err := n.listen(what, l.Name, l.Addr())
		if err != nil {
			return err
		}
		n.lns[l.Name] = ln
	}
	if l, ok := n.cfg.ControllerListener(); ok {
		ln, err := n.listen("controller listener", l.Name, l.Addr())
		if err != nil {
			return err
		}
		n.lns[l.Name] = ln
	}
	if len(brokerLns) > 1 {
		n.log.Warn("several broker listeners: Metadata advertises the inter-broker listener's address on all of them", "listeners", listenerNames(brokerLns), "advertised", n.cfg.InterBrokerListener)
	}
	return nil
}

// startBroker opens the engine and starts the broker role over the local voter.
func (n *Node) startBroker(fsys vfs.FS) error {
	cfg := n.cfg
	var err error
	eopts := engine.Options{
		Dirs: cfg.LogDirs, Sync: cfg.Sync.Engine, FlushInterval: cfg.FlushInterval,
		RetentionCheckInterval: cfg.RetentionCheckInterval,
		DefaultConfig:          configs.DefaultTopicLogConfig(cfg.Keys),
		Logger:                 n.log.With("component", "engine"),
		FS:                     fsys,
	}
	configs.EngineOptions(cfg.Keys, &eopts)
	if n.eng, err = engine.Open(eopts); err != nil {
		return fmt.Errorf("opening logs: %w", err)
	}
	registerEngineMetrics(n.reg, n.eng)
	brokerLns := map[string]net.Listener{}
	for _, l := range cfg.BrokerListeners() {
		brokerLns[l.Name] = n.lns[l.Name]
	}
	d := brokerDeps{eng: n.eng, lns: brokerLns, reg: n.reg, fail: n.fail, fetch: n.peer.FetchClient, unreachable: n.peer.Unreachable}
	switch {
	case cfg.SoleVoter():
		// Its own voter and controller, in process.
		local := n.ctl.voter()
		d.source, d.channel = controller.LogSource{Log: local}, controller.NewLocalChannel(n.ctl.ctl)
		_, im := local.Committed()
		if b, ok := im.Broker(cfg.NodeID); ok {
			d.incarnation = b.IncarnationID
		}
	case cfg.Roles.Controller:
		// Its own voter's committed log (the voters' once it is removed from a
		// dynamic quorum); the active controller wherever it is.
		d.source = memberSource{local: controller.LogSource{Log: n.ctl.voter()}, remote: n.peer.MetadataSource(), q: n.ctl.q}
		d.channel, d.heartbeats = n.peer.ControllerChannel(), n.peer.HeartbeatChannel()
	default:
		d.source, d.channel, d.heartbeats = n.peer.MetadataSource(), n.peer.ControllerChannel(), n.peer.HeartbeatChannel()
	}
	if !cfg.SoleVoter() {
		peers := n.peer
		d.peer = func(ctx context.Context, broker int32, req kmsg.Request) (kmsg.Response, error) {
			return peers.Request(ctx, peer.Broker(broker), peer.PurposeTxn, req)
		}
		// Its registration names its previous process's as its predecessor: it
		// holds the log dirs, so that process has ended.
		d.incarnation = metadata.NewUUID()
		if d.predecessor, err = takeIncarnation(cfg.MetadataDir, d.incarnation); err != nil {
			return err
		}
	}
	n.brk, err = newBrokerRole(cfg, n.clusterID, d, n.log)
	return err
}

// listen binds one listener, naming the fix when the address is taken.
func (n *Node) listen(what, hintKey, addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err == nil {
		return ln, nil
	}
	if errors.Is(err, syscall.EADDRINUSE) {
		fix := n.hints[hintKey]
		if fix == "" {
			fix = "another port in listeners"
			if hintKey == "admin" {
				fix = "another admin.listen"
			}
		}
		return nil, fmt.Errorf("%s %s: %w: pass %s", what, addr, syscall.EADDRINUSE, fix)
	}
	return nil, fmt.Errorf("%s %s: %w", what, addr, err)
}

func hostname() string {
	if h, err := os.Hostname(); err == nil && h != "" {
		return h
	}
	return "127.0.0.1"
}

// startAdmin binds the admin HTTP listener, if configured.
func (n *Node) startAdmin() error {
	if n.cfg.AdminListen == "" {
		return nil
	}
	ln, err := n.listen("admin listener", "admin", n.cfg.AdminListen)
	if err != nil {
		return err
	}
	n.adminLn = ln
	n.admin = &http.Server{Handler: adminMux(n.reg, n), ReadHeaderTimeout: 10 * time.Second}
	go n.admin.Serve(ln)
	n.log.Info("admin listening", "addr", ln.Addr().String())
	return nil
}

func (n *Node) fail(err error) {
	n.failOnce.Do(func() { n.failed <- err })
}

// Failed delivers the first error of a listener or component that stopped on its own
// (the node should then be shut down).
func (n *Node) Failed() <-chan error { return n.failed }

// Ready waits until the node's broker serves clients (at once for a node without
// the broker role), start-up failed, or ctx ends.
func (n *Node) Ready(ctx context.Context) error {
	if n.brk == nil {
		return nil
	}
	return n.brk.waitReady(ctx)
}

// ClusterID is the cluster id of the node's directories.
func (n *Node) ClusterID() string { return n.clusterID }

// NodeID is the node's id.
func (n *Node) NodeID() int32 { return n.cfg.NodeID }

// Config is the node's configuration.
func (n *Node) Config() *Config { return n.cfg }

// Addr is the bound address of the client listener (the inter-broker listener).
func (n *Node) Addr() string {
	l, _ := n.cfg.ClientListener()
	return n.ListenerAddr(l.Name)
}

// ListenerAddr is the bound address of the listener named name ("" if not bound).
func (n *Node) ListenerAddr(name string) string {
	if ln, ok := n.lns[name]; ok {
		return ln.Addr().String()
	}
	return ""
}

// AdminAddr is the bound address of the admin HTTP listener ("" if off).
func (n *Node) AdminAddr() string {
	if n.adminLn == nil {
		return ""
	}
	return n.adminLn.Addr().String()
}

// Shutdown stops the node, in this order:
//
//  1. the broker: a controlled shutdown (the controller moves its leaderships away
//     before it stops, so clients see at most retriable errors), then the transport
//     drains (no new connections; requests already read are answered), then the
//     broker's background state (long polls, groups), the follower and the lifecycle;
//  2. the admin listener;
//  3. the controller: it stops taking requests and waits (at most drainTimeout) for
//     its proposals in flight, while the CONTROLLER listener still carries raft
//     messages; an active controller then hands the quorum's leadership to another
//     voter (at most resignWait); then the listener drains; then the raft voter
//     stops, its log closes;
//  4. the logs close (writing the clean-shutdown marker), then the power-loss
//     journal.
//
// When ctx ends first, the remaining connections are closed at once. Calling it again
// returns the first result.
func (n *Node) Shutdown(ctx context.Context) error { return n.shutdown(ctx, true) }

func (n *Node) shutdown(ctx context.Context, graceful bool) error {
	n.stopping.Store(true)
	n.closeOnce.Do(func() {
		var errs []error
		if n.brk != nil {
			if !graceful {
				n.brk.lifecycle.BeginControlledShutdown() // nothing was served: no need to wait
			}
			if err := n.brk.stop(ctx); err != nil {
				errs = append(errs, err)
			}
		}
		ctlName := ""
		if l, ok := n.cfg.ControllerListener(); ok && n.ctlLn != nil {
			ctlName = l.Name // closed by ctlLn.stop, after the controller drained
		}
		for name, ln := range n.lns {
			if name != ctlName {
				ln.Close()
			}
		}
		if n.admin != nil {
			if err := n.admin.Shutdown(ctx); err != nil {
				errs = append(errs, err)
			}
		}
		if n.ctl != nil {
			// The proposals in flight commit (or fail) while the listener still
			// carries raft messages: draining it first would leave the requests that
			// wait for them unanswered until this voter lost its quorum.
			dctx, cancel := context.WithTimeout(ctx, drainTimeout)
			n.ctl.ctl.Drain(dctx)
			cancel()
			if graceful {
				n.ctl.resign(ctx)
			}
		}
		if n.ctlLn != nil {
			if err := n.ctlLn.stop(ctx); err != nil {
				errs = append(errs, err)
			}
		}
		if n.ctl != nil {
			if err := n.ctl.stop(); err != nil {
				errs = append(errs, err)
			}
		}
		if n.peer != nil {
			n.peer.Close()
		}
		n.inter.close()
		if n.eng != nil {
			if err := n.eng.Close(); err != nil {
				errs = append(errs, fmt.Errorf("closing logs: %w", err))
			}
		}
		if n.fs != nil {
			if err := n.fs.CloseJournal(); err != nil {
				errs = append(errs, fmt.Errorf("closing the power-loss journal: %w", err))
			}
		}
		n.closeErr = errors.Join(errs...)
	})
	return n.closeErr
}

// voterList is vs as controller.quorum.voters spells it; bootstrap servers (id -1)
// are their addresses alone.
// drainTimeout bounds how long a stopping controller waits for its proposals in
// flight (without a quorum they fail once the voter steps down, after an election
// timeout).
const drainTimeout = 5 * time.Second

func voterList(vs []Voter) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		switch {
		case v.ID < 0:
			parts[i] = v.Addr()
		case v.Port == 0:
			parts[i] = strconv.Itoa(int(v.ID))
		default:
			parts[i] = strconv.Itoa(int(v.ID)) + "@" + v.Addr()
		}
	}
	return strings.Join(parts, ",")
}
