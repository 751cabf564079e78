package kafka

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/samsa-broker/samsa/coordinator/configs"
	"github.com/samsa-broker/samsa/coordinator/controller"
	"github.com/samsa-broker/samsa/coordinator/controller/quorum"
	"github.com/samsa-broker/samsa/coordinator/metadata"
	"github.com/samsa-broker/samsa/engine"
)

// voterLog is controller.CommittedLog over a raft voter (what a combined node's broker
// reads its metadata from).
type voterLog struct{ q *quorum.Quorum }

func (v voterLog) ReadCommitted(from uint64, maxBytes int) (controller.LogRead, error) {
	r, err := v.q.ReadCommitted(from, maxBytes)
	out := controller.LogRead{SnapshotNeeded: r.SnapshotNeeded, SnapshotOffset: r.SnapshotOffset, Committed: r.Committed, Leader: r.Leader, Term: r.Term}
	for _, e := range r.Entries {
		out.Entries = append(out.Entries, controller.MetadataEntry{Offset: e.Offset, Data: e.Data})
	}
	return out, err
}

func (v voterLog) Snapshot() (uint64, uint64, []byte, error) { return v.q.Snapshot() }

func (v voterLog) WaitCommitted(ctx context.Context, after uint64) (uint64, error) {
	return v.q.WaitCommitted(ctx, after)
}

// singleNode is one combined node of the cluster's real parts, wired as net/node wires
// a sole voter: its raft quorum of one on disk (dir/meta), the active controller, the
// metadata follower over the voter's committed log, the broker lifecycle over an
// in-process channel, the broker over them; the engine's logs in dir/logs.
type singleNode struct {
	st        *quorum.DiskStorage
	q         *quorum.Quorum
	ctrl      *controller.Controller
	follower  *controller.MetadataFollower
	lifecycle *controller.BrokerLifecycle
	eng       *engine.Manager
	a         TestAssembly // the broker, assembled by net/broker
	b         *Broker      // its protocol adapter

	mu     sync.Mutex // serializes deliveries of images to the broker and the lifecycle
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// singleNodeOptions tune startSingleNode.
type singleNodeOptions struct {
	Sync               engine.SyncPolicy
	Now                func() time.Time
	MaxPartitionsPerOp int
}

// startSingleNode starts node 1 of cluster test-cluster over dir, advertised at
// host:port, and returns once the controller has unfenced its broker.
func startSingleNode(t testing.TB, dir string, cfg Config, o singleNodeOptions) *singleNode {
	t.Helper()
	n, err := openSingleNode(t, dir, cfg, o)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func openSingleNode(t testing.TB, dir string, cfg Config, o singleNodeOptions) (_ *singleNode, err error) {
	n := &singleNode{}
	defer func() {
		if err != nil {
			n.close()
		}
	}()
	log := testLogger(t)
	if n.st, err = quorum.OpenDiskStorage(filepath.Join(dir, "meta"), quorum.DiskOptions{NoSync: o.Sync != engine.SyncFsync, Logger: log}); err != nil {
		return nil, err
	}
	if n.q, err = quorum.New(quorum.Config{NodeID: cfg.NodeID, Voters: []int32{cfg.NodeID}, TickInterval: 10 * time.Millisecond, Logger: log}, n.st, noPeers{}); err != nil {
		return nil, err
	}
	if n.ctrl, err = controller.New(controller.Config{NodeID: cfg.NodeID, ClusterID: cfg.ClusterID, Static: cfg.Static, Logger: log,
		TickInterval: 10 * time.Millisecond, MaxPartitionsPerOp: o.MaxPartitionsPerOp}, quorumAdapter{n.q}); err != nil {
		return nil, err
	}
	if n.eng, err = engine.Open(engine.Options{Dirs: []string{filepath.Join(dir, "logs")}, Sync: o.Sync,
		DefaultConfig: configs.DefaultTopicLogConfig(cfg.Static), Logger: log, Now: o.Now}); err != nil {
		return nil, err
	}
	n.follower = controller.NewMetadataFollower(controller.FollowerConfig{Wait: 200 * time.Millisecond, Backoff: 20 * time.Millisecond, Logger: log})
	ctx, cancel := context.WithCancel(context.Background())
	n.cancel = cancel
	n.wg.Add(1)
	go func() { defer n.wg.Done(); n.q.Run(ctx) }()
	// The sole voter applies what it committed before it stopped once it leads: the
	// broker must be built over that image, never an older one (it would delete the
	// logs of topics it does not see), and re-register with its earlier incarnation
	// (its registration's session is live again under the new controller).
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	for !n.q.ReadyForWrites() {
		if wctx.Err() != nil {
			return nil, errors.New("the voter never became ready for writes")
		}
		time.Sleep(time.Millisecond) // polling a condition with a deadline
	}
	committed, cim := n.q.Committed()
	var incarnation metadata.UUID
	if bi, ok := cim.Broker(cfg.NodeID); ok {
		incarnation = bi.IncarnationID
	}
	if n.lifecycle, err = controller.NewBrokerLifecycle(controller.LifecycleConfig{NodeID: cfg.NodeID, ClusterID: cfg.ClusterID, IncarnationID: incarnation,
		Listeners:         []metadata.Endpoint{{Name: "PLAINTEXT", Host: cfg.Host, Port: cfg.Port, SecurityProtocol: metadata.ProtocolPlaintext}},
		Rack:              cfg.Rack,
		HeartbeatInterval: 100 * time.Millisecond, RetryBackoff: 20 * time.Millisecond, Logger: log}); err != nil {
		return nil, err
	}
	channel := controller.NewLocalChannel(n.ctrl)
	channel.RetryInterval = 10 * time.Millisecond
	n.wg.Add(3)
	go func() { defer n.wg.Done(); n.ctrl.Run(ctx) }()
	go func() { defer n.wg.Done(); n.follower.Run(ctx, controller.LogSource{Log: voterLog{n.q}}) }()
	n.follower.Subscribe(func(off uint64, old, im *metadata.Image) {
		n.mu.Lock()
		defer n.mu.Unlock()
		if n.a != nil {
			n.a.MetadataChanged(off, old, im)
		}
		n.lifecycle.MetadataApplied(off, im)
	})
	go func() { defer n.wg.Done(); n.lifecycle.Run(ctx, channel) }()
	if err := n.follower.WaitFor(wctx, committed); err != nil {
		return nil, fmt.Errorf("the follower did not catch up: %w", err)
	}
	n.mu.Lock()
	n.a, err = assemble(cfg, TestNodeDeps{Engine: n.eng, Metadata: n.follower, Controller: channel, ControllerID: n.ctrl.Leader}, log)
	if err == nil {
		n.b = n.a.Kafka()
		off, im := n.follower.Image()
		n.a.MetadataChanged(off, nil, im)
	}
	n.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if !n.lifecycle.WaitState(wctx, controller.StateRunning) {
		return nil, errors.New("the broker was never unfenced")
	}
	// The controller's answer unfenced it; serve once the broker's own image shows it
	// (with the leaderships its unfencing gave back), not before.
	for {
		_, im := n.b.Image()
		if bi, ok := im.Broker(cfg.NodeID); ok && !bi.Fenced {
			return n, nil
		}
		if wctx.Err() != nil {
			return nil, errors.New("the broker's image never showed it unfenced")
		}
		time.Sleep(time.Millisecond) // polling a condition with a deadline
	}
}

// close stops the node: the broker's background state, the controller, the quorum,
// then the stores. Call it after the transport has drained.
func (n *singleNode) close() error {
	n.mu.Lock()
	if n.a != nil {
		n.a.CloseDataPath()
		n.a.Close()
	}
	n.mu.Unlock()
	if n.cancel != nil {
		n.cancel()
	}
	n.wg.Wait()
	var errs []error
	if n.st != nil {
		errs = append(errs, n.st.Close())
	}
	if n.eng != nil {
		errs = append(errs, n.eng.Close())
	}
	return errors.Join(errs...)
}

// noPeers is the raft transport of a quorum of one: there is nobody to send to.
type noPeers struct{}

func (noPeers) Send([]*raftpb.Message) {}
