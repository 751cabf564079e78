package node

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/samsa-broker/samsa/coordinator/controller/quorum"
	"github.com/samsa-broker/samsa/coordinator/metadata"
)

func waitFor(t *testing.T, d time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v: %v", what, d, err)
		}
		time.Sleep(10 * time.Millisecond) // the poll interval of a deadline-bounded wait
	}
}

// setClusterConfig commits a cluster-default broker config through the controller.
func setClusterConfig(ctx context.Context, r *controllerRole, key, value string) error {
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeBroker, ""
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Value = key, kmsg.StringPtr(value)
	res.Configs = append(res.Configs, c)
	req.Resources = append(req.Resources, res)
	resp, err := r.ctl.Handle(ctx, req)
	if err != nil {
		return err
	}
	ir := resp.(*kmsg.IncrementalAlterConfigsResponse)
	if len(ir.Resources) != 1 {
		return errors.New("no resource in the answer")
	}
	return kerr.ErrorForCode(ir.Resources[0].ErrorCode)
}

func (r *controllerRole) ctlNode() int32 { return r.q.Status().NodeID }

func clusterConfig(r *controllerRole, key string) string {
	_, im := r.q.Committed()
	return im.Configs(metadata.ResourceBroker, "")[key]
}

// TestControllerRoleSingleVoter: a sole voter on disk becomes the active controller
// at once, commits, and keeps what it committed across a restart.
func TestControllerRoleSingleVoter(t *testing.T) {
	dir := t.TempDir()
	cfg, err := FromKeys(map[string]string{"data.dir": dir})
	if err != nil {
		t.Fatal(err)
	}
	id := RandomUUID()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for round := range 2 {
		r, err := startControllerRole(cfg, id, nil, noTransport{}, discard, func(err error) { t.Error(err) }, nil)
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, 5*time.Second, "active controller", func() error {
			if !r.ctl.Active() {
				return errors.New("not active")
			}
			return nil
		})
		if round == 0 {
			if err := setClusterConfig(ctx, r, "log.retention.ms", "12345"); err != nil {
				t.Fatal(err)
			}
		}
		if got := clusterConfig(r, "log.retention.ms"); got != "12345" {
			t.Fatalf("round %d: committed config %q", round, got)
		}
		if err := r.stop(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestControllerRoleImportsSingleNodeStore: the metadata store of an earlier
// single-node version is imported into the raft log at the first start and moved
// aside; a quorum of several voters refuses it.
func TestControllerRoleImportsSingleNodeStore(t *testing.T) {
	dir := t.TempDir()
	cfg, _ := FromKeys(map[string]string{"data.dir": dir})
	st, err := metadata.OpenStore(cfg.MetadataDir, metadata.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tid := metadata.NewUUID()
	if err := st.Append(metadata.CreateTopicRecords("old", tid, [][]int32{{1}, {1}, {1}}, map[string]string{"retention.ms": "1000"})...); err != nil {
		t.Fatal(err)
	}
	st.Close()

	three := clusterCfg(t, t.TempDir(), "1")
	three.MetadataDir = cfg.MetadataDir
	if _, err := startControllerRole(three, RandomUUID(), nil, noTransport{}, discard, func(error) {}, nil); err == nil || !errors.Is(err, ErrStorage) {
		t.Fatalf("a voter of three imported a single-node store: %v", err)
	}

	r, err := startControllerRole(cfg, RandomUUID(), nil, noTransport{}, discard, func(err error) { t.Error(err) }, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, im := r.q.Committed()
	tp, ok := im.Topic("old")
	if !ok || tp.ID != tid || len(tp.Partitions) != 3 || im.Configs(metadata.ResourceTopic, "old")["retention.ms"] != "1000" {
		t.Fatalf("imported image: %v %+v", ok, tp)
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	r, err = startControllerRole(cfg, RandomUUID(), nil, noTransport{}, discard, func(err error) { t.Error(err) }, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.stop()
	if _, im := r.q.Committed(); !hasTopic(im, "old") {
		t.Fatal("imported topic lost at the second start")
	}
}

func hasTopic(im *metadata.Image, name string) bool { _, ok := im.Topic(name); return ok }

// memNet carries raft messages between in-process voters, dropping those to a voter
// that is down.
type memNet struct {
	mu    sync.Mutex
	roles map[int32]*controllerRole
}

type memTransport struct {
	net  *memNet
	from int32
}

func (t memTransport) Send(msgs []*raftpb.Message) {
	t.net.mu.Lock()
	defer t.net.mu.Unlock()
	for _, m := range msgs {
		if r := t.net.roles[quorum.NodeOf(m.GetTo())]; r != nil {
			r.q.Step(m)
		}
	}
}

// TestControllerRoleThreeVoters: three voters over an in-memory network elect one
// active controller, which commits; with it stopped, another takes over.
func TestControllerRoleThreeVoters(t *testing.T) {
	dir := t.TempDir()
	net := &memNet{roles: map[int32]*controllerRole{}}
	id := RandomUUID()
	for i := int32(1); i <= 3; i++ {
		cfg := clusterCfg(t, filepath.Join(dir, fmt.Sprint(i)), fmt.Sprint(i))
		r, err := startControllerRole(cfg, id, nil, memTransport{net, i}, discard, func(err error) { t.Error(err) }, nil)
		if err != nil {
			t.Fatal(err)
		}
		net.mu.Lock()
		net.roles[i] = r
		net.mu.Unlock()
	}
	defer func() {
		for _, r := range net.roles {
			if r != nil {
				r.stop()
			}
		}
	}()
	active := func() (*controllerRole, error) {
		net.mu.Lock()
		defer net.mu.Unlock()
		var found *controllerRole
		for _, r := range net.roles {
			if r != nil && r.ctl.Active() {
				if found != nil {
					return nil, errors.New("two active controllers")
				}
				found = r
			}
		}
		if found == nil {
			return nil, errors.New("no active controller")
		}
		return found, nil
	}
	var leader *controllerRole
	waitFor(t, 10*time.Second, "an active controller", func() (err error) { leader, err = active(); return err })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := setClusterConfig(ctx, leader, "log.retention.ms", "777"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "every voter applied the config", func() error {
		for id, r := range net.roles {
			if got := clusterConfig(r, "log.retention.ms"); got != "777" {
				return fmt.Errorf("voter %d has %q", id, got)
			}
		}
		return nil
	})
	old := leader.ctlNode()
	net.mu.Lock()
	net.roles[old] = nil
	net.mu.Unlock()
	if err := leader.stop(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "a new active controller", func() (err error) { leader, err = active(); return err })
	if leader.ctlNode() == old {
		t.Fatal("the stopped voter is still active")
	}
	if err := setClusterConfig(ctx, leader, "log.retention.ms", "888"); err != nil {
		t.Fatalf("the new controller commits: %v", err)
	}
}
