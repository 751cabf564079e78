package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/samsa-broker/samsa/coordinator/controller"
	"github.com/samsa-broker/samsa/coordinator/controller/quorum"
	"github.com/samsa-broker/samsa/coordinator/metadata"
	"github.com/samsa-broker/samsa/engine/vfs"
)

// controllerRole is a node's controller: its raft voter with the storage in
// metadata.log.dir, and the active-controller logic beside it.
//
// Start-up: the single-node store of an earlier version, if metadata.log.dir holds
// one, is imported into the bootstrap snapshot (a quorum of one only); the storage is
// opened; the voter is restored; the imported files move aside; the voter's and the
// controller's loops start. Shutdown: the controller closes (requests get
// NOT_CONTROLLER), the loops end, the storage closes.
type controllerRole struct {
	log *slog.Logger
	st  *quorum.DiskStorage
	q   *quorum.Quorum
	ctl *controller.Controller

	ctx    context.Context // ends at stop
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	runErr error // the voter's fatal error, if Run returned one
}

// raftTransport is what the voter sends through: net/peer's RaftTransport between
// voters, or nothing for a quorum of one (which sends no messages).
type raftTransport interface{ Send([]*raftpb.Message) }

// voterLoss is a raftTransport that knows which voters' processes are gone
// (net/peer's RaftTransport): the quorum's Config.LeaderLost.
type voterLoss interface {
	VoterLost(id int32) (since time.Time, ok bool)
}

type noTransport struct{}

func (noTransport) Send([]*raftpb.Message) {}

// quorumTicks maps controller.quorum.election.timeout.ms onto raft ticks of the
// default interval (at least three, above the one heartbeat tick).
func quorumTicks(election time.Duration) (tick time.Duration, electionTicks int) {
	tick = quorum.DefaultTickInterval
	electionTicks = int(election / tick)
	return tick, max(electionTicks, 3)
}

// startControllerRole opens the voter's storage and starts the voter and the
// controller. fail is called with the voter's fatal error, if any.
// members, if set, is called with the quorum's members before the voter runs and on
// the voter's goroutine whenever they change (it must not block).
func startControllerRole(cfg *Config, clusterID string, fsys vfs.FS, tr raftTransport, log *slog.Logger, fail func(error), members func([]quorum.Member)) (_ *controllerRole, err error) {
	r := &controllerRole{log: log}
	imp, err := quorum.ImportLegacyStore(cfg.MetadataDir, cfg.MetadataDir, log.With("component", "quorum"))
	if err != nil {
		return nil, fmt.Errorf("importing the single-node metadata store of %s: %w", cfg.MetadataDir, err)
	}
	if len(imp.Records) > 0 && !cfg.SoleVoter() {
		return nil, fmt.Errorf("%w: %s holds the metadata store of an earlier single-node version; only a single combined node (a quorum of one) can import it, this node is one of %d voters",
			ErrStorage, cfg.MetadataDir, len(cfg.Voters))
	}
	boot, err := ReadBootstrap(cfg.MetadataDir) // bootstrap.go: used only if the raft storage is new
	if err != nil {
		return nil, err
	}
	if r.st, err = quorum.OpenDiskStorage(cfg.MetadataDir, quorum.DiskOptions{FS: fsys, Logger: log.With("component", "raft-storage"), LegacyImported: imp.Found()}); err != nil {
		return nil, fmt.Errorf("opening the raft log in %s: %w", cfg.MetadataDir, err)
	}
	defer func() {
		if err != nil {
			r.st.Close()
		}
	}()
	tick, electionTicks := quorumTicks(cfg.ElectionTimeout)
	qcfg := quorum.Config{
		NodeID: cfg.NodeID, Voters: cfg.VoterIDs(), TickInterval: tick, ElectionTicks: electionTicks,
		Logger: log.With("component", "quorum"), BootstrapRecords: imp.Records, FormatRecords: boot,
	}
	if cfg.DynamicQuorum {
		qcfg.Voters = nil // the log's (quorum_dynamic.go)
	}
	if vl, ok := tr.(voterLoss); ok {
		qcfg.LeaderLost = func(id int32) bool {
			_, lost := vl.VoterLost(id)
			return lost
		}
	}
	if qcfg.DirectoryID, err = metaDirectoryID(cfg); err != nil && !errors.Is(err, errNoDirectoryID) {
		return nil, err
	}
	if r.q, err = quorum.New(qcfg, r.st, tr); err != nil {
		return nil, fmt.Errorf("starting the raft voter: %w", err)
	}
	if members != nil {
		r.q.SubscribeMembers(members)
		members(r.q.Members())
	}
	if len(imp.Records) > 0 {
		log.Info("imported the single-node metadata store into the raft log", "dir", cfg.MetadataDir, "records", len(imp.Records))
	}
	if err := imp.Done(); err != nil {
		return nil, fmt.Errorf("moving the imported metadata store aside: %w", err)
	}
	listeners := map[int32][]kmsg.DescribeQuorumResponseNodeListener{}
	for _, v := range cfg.Voters {
		if v.Port == 0 {
			continue
		}
		l := kmsg.NewDescribeQuorumResponseNodeListener()
		l.Name, l.Host, l.Port = cfg.ControllerListenerNames[0], v.Host, uint16(v.Port)
		listeners[v.ID] = append(listeners[v.ID], l)
	}
	ccfg := controller.Config{
		NodeID: cfg.NodeID, ClusterID: clusterID, Static: cfg.Keys, SessionTimeout: cfg.SessionTimeout,
		HeartbeatInterval: cfg.HeartbeatInterval, Logger: log.With("component", "controller"), VoterListeners: listeners,
	}
	if !cfg.SoleVoter() {
		// A cluster's brokers are other processes: a broker whose heartbeat
		// connection closed and whose inter-broker listener refuses connections is
		// gone (coordinator/controller's liveness rules).
		ccfg.CheckListener, ccfg.CheckListenerName = checkListener, cfg.InterBrokerListener
	}
	if r.ctl, err = controller.New(ccfg, voter{r.q}); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.ctx, r.cancel = ctx, cancel
	r.wg.Add(2)
	go func() {
		defer r.wg.Done()
		if err := r.q.Run(ctx); err != nil {
			r.mu.Lock()
			r.runErr = err
			r.mu.Unlock()
			log.Error("raft voter stopped", "err", err)
			fail(fmt.Errorf("raft voter: %w", err))
		}
	}()
	go func() {
		defer r.wg.Done()
		r.ctl.Run(ctx)
	}()
	log.Info("controller started", "voters", voterList(cfg.Voters), "election_timeout", strconv.Itoa(int(tick)*electionTicks/int(time.Millisecond))+"ms")
	return r, nil
}

// errNoDirectoryID: the metadata dir's meta.properties has no directory.id (or none).
var errNoDirectoryID = errors.New("no directory.id")

// metaDirectoryID is the directory.id of cfg's metadata dir.
func metaDirectoryID(cfg *Config) (metadata.UUID, error) {
	mp, err := ReadMetaProperties(cfg.MetadataDir)
	if err != nil || mp.DirectoryID == "" {
		return metadata.ZeroUUID, errNoDirectoryID
	}
	id, err := metadata.ParseUUID(mp.DirectoryID)
	if err != nil {
		return metadata.ZeroUUID, fmt.Errorf("%w: %s: directory.id %q: %v", ErrStorage, cfg.MetadataDir, mp.DirectoryID, err)
	}
	return id, nil
}

// goRun runs fn on a goroutine that stop ends (ctx) and waits for.
func (r *controllerRole) goRun(fn func(ctx context.Context)) {
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		fn(r.ctx)
	}()
}

// voter is the role's quorum as the controller package's seams.
func (r *controllerRole) voter() voter { return voter{r.q} }

// stop closes the controller, ends the loops and closes the storage.
// resign hands the quorum's leadership, if this voter holds it and another voter
// can take it, to that voter (quorum.Resign) and waits, at most resignWait, until
// another leader is known: the quorum has an active controller again a round trip
// after this one stops instead of an election timeout (1-2 s) later, which brokers
// waiting on the controller (ISR changes, leader elections of a rolling restart)
// would otherwise wait out.
func (r *controllerRole) resign(ctx context.Context) {
	self := r.q.Status().NodeID
	if !r.q.IsLeader() || !slices.ContainsFunc(r.q.Members(), func(m quorum.Member) bool { return m.Voter && m.ID != self }) {
		return
	}
	start := time.Now()
	r.q.Resign()
	ctx, cancel := context.WithTimeout(ctx, resignWait)
	defer cancel()
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for {
		if id, _ := r.q.Leader(); id >= 0 && id != self {
			r.log.Info("controller leadership handed over", "to", id, "took", time.Since(start).Round(time.Millisecond))
			return
		}
		select {
		case <-ctx.Done():
			r.log.Warn("controller leadership not handed over in time: stopping anyway (the voters left elect a leader)", "waited", time.Since(start).Round(time.Millisecond))
			return
		case <-t.C:
		}
	}
}

// resignWait bounds how long a stopping controller waits for its leadership to move:
// raft aborts a transfer that has not completed within an election timeout.
const resignWait = 2 * time.Second

func (r *controllerRole) stop() error {
	r.ctl.Close()
	r.cancel()
	r.wg.Wait()
	r.mu.Lock()
	runErr := r.runErr
	r.mu.Unlock()
	var errs []error
	if runErr != nil && !errors.Is(runErr, context.Canceled) {
		errs = append(errs, fmt.Errorf("raft voter: %w", runErr))
	}
	if err := r.st.Close(); err != nil {
		errs = append(errs, fmt.Errorf("closing the raft log: %w", err))
	}
	return errors.Join(errs...)
}
