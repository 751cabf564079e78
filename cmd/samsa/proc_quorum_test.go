package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// quorumCluster is three controller-only nodes of a dynamic quorum (1 formatted
// --standalone, 2 and 3 --no-initial-controllers) and a broker, node 4, all given
// controller.quorum.bootstrap.servers: the layout of Kafka's KIP-853 quickstart.
func quorumCluster(t *testing.T) *procCluster {
	t.Helper()
	dir := t.TempDir()
	ports, err := freePorts(12)
	if err != nil {
		t.Fatal(err)
	}
	c := &procCluster{bin: samsaBin(t), dir: dir, clusterID: runSamsaOut(t, "storage", "random-uuid")}
	var bootstrap []string
	for i := range 4 {
		n := &procNode{ID: int32(i + 1), Roles: "controller", Dir: filepath.Join(dir, fmt.Sprintf("node-%d", i+1))}
		n.Admin = net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[3*i+2]))
		if i == 3 {
			n.Roles, n.Client = "broker", net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[3*i]))
		} else {
			n.Controller = net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[3*i+1]))
			bootstrap = append(bootstrap, n.Controller)
		}
		n.ConfigFile = filepath.Join(n.Dir, "server.properties")
		c.nodes = append(c.nodes, n)
	}
	for _, n := range c.nodes {
		lines := []string{"process.roles=" + n.Roles, "node.id=" + strconv.Itoa(int(n.ID)),
			"controller.quorum.bootstrap.servers=" + strings.Join(bootstrap, ","), "controller.listener.names=CONTROLLER",
			"log.dirs=" + filepath.Join(n.Dir, "logs"), "metadata.log.dir=" + filepath.Join(n.Dir, "meta"), "admin.listen=" + n.Admin,
			"broker.session.timeout.ms=6000"}
		if n.Client != "" {
			lines = append(lines, "listeners=PLAINTEXT://"+n.Client, "advertised.listeners=PLAINTEXT://"+n.Client, "inter.broker.listener.name=PLAINTEXT")
		} else {
			lines = append(lines, "listeners=CONTROLLER://"+n.Controller)
		}
		if err := os.MkdirAll(n.Dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(n.ConfigFile, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	format := map[int32]string{1: "--standalone", 2: "--no-initial-controllers", 3: "--no-initial-controllers"}
	for _, n := range c.nodes {
		args := []string{"storage", "format", "--config", n.ConfigFile, "--cluster-id", c.clusterID}
		if f := format[n.ID]; f != "" {
			args = append(args, f)
		}
		if code, out, errOut := runSamsa(t, args...); code != 0 {
			t.Fatalf("format node %d: exit %d\n%s%s", n.ID, code, out, errOut)
		}
	}
	t.Cleanup(func() {
		c.KillAll()
		if t.Failed() {
			for _, n := range c.nodes {
				t.Logf("node %d log (end, without raft's own lines):\n%s", n.ID, c.logTail(n.ID, 60, "component=raft"))
			}
		}
	})
	return c
}

func runSamsaOut(t *testing.T, args ...string) string {
	t.Helper()
	code, out, errOut := runSamsa(t, args...)
	if code != 0 {
		t.Fatalf("samsa %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
	}
	return strings.TrimSpace(out)
}

// quorumVoter is one entry of describe --status's CurrentVoters.
type quorumVoter struct {
	ID          int32    `json:"id"`
	DirectoryID string   `json:"directoryId"`
	Endpoints   []string `json:"endpoints"`
}

// describeVoters runs describe --status through via (flag, address) and returns the
// voters and the leader.
func describeVoters(t *testing.T, flag, via string) ([]quorumVoter, string, error) {
	t.Helper()
	code, out, errOut := runSamsa(t, "metadata-quorum", flag, via, "--timeout", "10s", "describe", "--status")
	if code != 0 {
		return nil, "", fmt.Errorf("describe --status: exit %d: %s", code, errOut)
	}
	var voters []quorumVoter
	leader := ""
	for _, line := range strings.Split(out, "\n") {
		k, v, _ := strings.Cut(line, ":")
		switch k {
		case "CurrentVoters":
			if err := json.Unmarshal([]byte(strings.TrimSpace(v)), &voters); err != nil {
				return nil, "", fmt.Errorf("%q: %v", v, err)
			}
		case "LeaderId":
			leader = strings.TrimSpace(v)
		}
	}
	return voters, leader, nil
}

func voterIDs(vs []quorumVoter) []int32 {
	var out []int32
	for _, v := range vs {
		out = append(out, v.ID)
	}
	slices.Sort(out)
	return out
}

// createLoad creates topics through the broker from two clients, each one request
// at a time 10 ms apart, recording each answer's latency; an answer that takes 3 s
// or fails is an error.
type createLoad struct {
	mu        sync.Mutex
	latencies []time.Duration
	errs      []string
	phaseMax  time.Duration
	stop      context.CancelFunc
	done      chan struct{}
}

func startCreateLoad(t *testing.T, bootstrap string) *createLoad {
	ctx, cancel := context.WithCancel(context.Background())
	l := &createLoad{stop: cancel, done: make(chan struct{})}
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Add(1)
		go l.run(ctx, &wg, kadm.NewClient(client(t, bootstrap)), w)
	}
	go func() {
		wg.Wait()
		close(l.done)
	}()
	return l
}

func (l *createLoad) run(ctx context.Context, wg *sync.WaitGroup, adm *kadm.Client, w int) {
	defer wg.Done()
	{
		for i := w; ctx.Err() == nil; i += 2 {
			start := time.Now()
			rctx, rcancel := context.WithTimeout(ctx, 3*time.Second)
			resp, err := adm.CreateTopic(rctx, 1, 1, nil, fmt.Sprintf("q-%05d", i))
			rcancel()
			d := time.Since(start)
			if ctx.Err() != nil {
				return
			}
			if err == nil {
				err = resp.Err
			}
			l.mu.Lock()
			l.latencies = append(l.latencies, d)
			l.phaseMax = max(l.phaseMax, d)
			if err != nil || d >= 3*time.Second {
				l.errs = append(l.errs, fmt.Sprintf("CreateTopics q-%05d: %v after %v", i, err, d))
			}
			l.mu.Unlock()
			select {
			case <-ctx.Done():
			case <-time.After(10 * time.Millisecond): // the pace of the load, not a wait for a condition
			}
		}
	}
}

// answered is the number of CreateTopics answered so far.
func (l *createLoad) answered() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.latencies)
}

// phase returns the largest latency since the last call, and the answers so far.
func (l *createLoad) phase() (time.Duration, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := l.phaseMax
	l.phaseMax = 0
	return m, len(l.latencies)
}

func (l *createLoad) finish() (time.Duration, int, []string) {
	l.stop()
	<-l.done
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Max(append(l.latencies, 0)), len(l.latencies), l.errs
}

// TestProcQuorumResize: a dynamic controller quorum (KIP-853) of separate processes
// grows from one controller to three with `samsa metadata-quorum add-controller`
// (through a controller, then through the broker), has a controller whose metadata
// directory was wiped replaced (removed with its old directory id, formatted again
// with --no-initial-controllers, added with its new one), and shrinks back to one
// with remove-controller (the leader last: leadership moves to the voter that stays),
// while a producer writes and CreateTopics is sent every
// 50 ms: every CreateTopics is answered within 3 s and no acknowledged record is
// lost. DescribeQuorum (describe --status) shows the voters with their directory ids
// and endpoints at each step.
func TestProcQuorumResize(t *testing.T) {
	c := quorumCluster(t)
	c1, c2, c3 := c.Node(1), c.Node(2), c.Node(3)
	for _, id := range []int32{1, 4} {
		if err := c.Start(id); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := c.WaitReady(ctx, 4, []int32{4}); err != nil {
		t.Fatal(err)
	}
	bs := c.Bootstrap()
	ctlFlag, ctlAll := "--bootstrap-controller", strings.Join([]string{c1.Controller, c2.Controller, c3.Controller}, ",")
	wantVoters := func(want ...int32) []quorumVoter {
		t.Helper()
		var vs []quorumVoter
		eventually(t, 15*time.Second, fmt.Sprintf("voters %v", want), func() error {
			var err error
			if vs, _, err = describeVoters(t, ctlFlag, ctlAll); err == nil && !slices.Equal(voterIDs(vs), want) {
				err = fmt.Errorf("voters %v", voterIDs(vs))
			}
			return err
		})
		return vs
	}
	vs := wantVoters(1)
	if vs[0].DirectoryID == "" || len(vs[0].Endpoints) != 1 || vs[0].Endpoints[0] != "CONTROLLER://"+c1.Controller {
		t.Fatalf("the standalone voter: %+v", vs[0])
	}
	adm := kadm.NewClient(client(t, bs))
	if _, err := adm.CreateTopic(ctx, 3, 1, nil, "resize"); err != nil {
		t.Fatal(err)
	}
	load := startLoad(t, bs, "resize")
	creates := startCreateLoad(t, bs)
	load.waitAcked(t, 200, 30*time.Second)
	creates.phase()

	step := func(name string, args ...string) {
		t.Helper()
		start := time.Now()
		before := creates.answered()
		out := runSamsaOut(t, append([]string{"metadata-quorum"}, args...)...)
		// The load goes on across the new configuration before the next change.
		eventually(t, 10*time.Second, "CreateTopics answered after "+name, func() error {
			if n := creates.answered(); n < before+20 {
				return fmt.Errorf("%d answered since", n-before)
			}
			return nil
		})
		m, n := creates.phase()
		t.Logf("%s: %q in %v; CreateTopics max %v (%d answered so far)", name, out, time.Since(start).Round(time.Millisecond), m, n)
	}
	// Grow: 2 through a controller, 3 through the broker (which forwards it).
	for _, id := range []int32{2, 3} {
		if err := c.Start(id); err != nil {
			t.Fatal(err)
		}
	}
	step("add controller 2", ctlFlag, c1.Controller, "--command-config", c2.ConfigFile, "add-controller")
	wantVoters(1, 2)
	step("add controller 3", "--bootstrap-server", bs, "--command-config", c3.ConfigFile, "add-controller")
	vs = wantVoters(1, 2, 3)
	old3 := vs[2].DirectoryID

	// Replace controller 3, whose metadata directory is lost.
	c.Kill(3)
	if err := os.RemoveAll(filepath.Join(c3.Dir, "meta")); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(c3.Dir, "logs")); err != nil {
		t.Fatal(err)
	}
	runSamsaOut(t, "storage", "format", "--config", c3.ConfigFile, "--cluster-id", c.clusterID, "--no-initial-controllers")
	if err := c.Start(3); err != nil {
		t.Fatal(err)
	}
	step("remove the lost controller 3", ctlFlag, ctlAll, "remove-controller", "--controller-id", "3", "--controller-directory-id", old3)
	wantVoters(1, 2)
	step("add the replaced controller 3", ctlFlag, ctlAll, "--command-config", c3.ConfigFile, "add-controller")
	vs = wantVoters(1, 2, 3)
	if vs[2].DirectoryID == old3 {
		t.Fatalf("controller 3 kept its old directory id %s", old3)
	}

	// Shrink back to one.
	step("remove controller 3", ctlFlag, ctlAll, "remove-controller", "--controller-id", "3", "--controller-directory-id", vs[2].DirectoryID)
	wantVoters(1, 2)
	// The leader itself, through the broker: it hands leadership to 2 first.
	step("remove controller 1, the leader", "--bootstrap-server", bs, "remove-controller", "--controller-id", "1", "--controller-directory-id", vs[0].DirectoryID)
	wantVoters(2)
	t.Logf("describe --replication:\n%s", runSamsaOut(t, "metadata-quorum", ctlFlag, ctlAll, "describe", "--replication"))

	load.waitAcked(t, load.acked()+200, 30*time.Second)
	maxCreate, answered, createErrs := creates.finish()
	acks, gap, errs := load.finish()
	for _, e := range createErrs {
		t.Error(e)
	}
	if len(errs) > 0 {
		t.Errorf("%d produce errors, first: %v", len(errs), errs[0])
	}
	log := readAll(t, bs, "resize")
	lost, dups, _ := compareAcked(acks, log)
	t.Logf("figures: CreateTopics during voter changes: %d answered, max latency %v; produce: %d acknowledged, %d lost, %d duplicates, longest gap %v",
		answered, maxCreate.Round(time.Millisecond), len(acks), lost, dups, gap.Round(time.Millisecond))
	checkAcked(t, acks, log)
}

// TestProcQuorumUpgrade: three combined nodes of a static quorum
// (controller.quorum.voters) made dynamic with `samsa features upgrade --feature
// kraft.version=1`: the log records the voters without directory ids, each voter
// then reports its own (UpdateRaftVoter), and a voter is removed by its id and
// directory id while CreateTopics keeps being answered; the removed node's broker
// goes on following the metadata log from the other voters.
func TestProcQuorumUpgrade(t *testing.T) {
	spec := combined(3)
	spec.Keys = map[string]string{"broker.session.timeout.ms": "6000"}
	c := startProcCluster(t, spec)
	bs := c.Bootstrap()
	if vs, _, err := describeVoters(t, "--bootstrap-server", bs); err != nil || len(vs) != 3 || vs[0].DirectoryID != "AAAAAAAAAAAAAAAAAAAAAA" {
		t.Fatalf("a static quorum's voters: %+v %v", vs, err)
	}
	code, out, errOut := runSamsa(t, "metadata-quorum", "--bootstrap-server", bs, "remove-controller", "--controller-id", "3", "--controller-directory-id", "AAAAAAAAAAAAAAAAAAAAAA")
	if code != 1 || !strings.Contains(errOut, "UNSUPPORTED_VERSION") {
		t.Fatalf("remove-controller on a static quorum: exit %d\n%s%s", code, out, errOut)
	}
	runSamsaOut(t, "features", "--bootstrap-server", bs, "upgrade", "--feature", "kraft.version=1")
	var vs []quorumVoter
	took := eventually(t, 20*time.Second, "every voter's directory id recorded", func() error {
		var err error
		if vs, _, err = describeVoters(t, "--bootstrap-server", bs); err != nil {
			return err
		}
		for _, v := range vs {
			if v.DirectoryID == "AAAAAAAAAAAAAAAAAAAAAA" || len(v.Endpoints) != 1 || v.Endpoints[0] != "CONTROLLER://"+c.Node(v.ID).Controller {
				return fmt.Errorf("voter %+v", v)
			}
		}
		if len(vs) != 3 {
			return fmt.Errorf("voters %+v", vs)
		}
		return nil
	})
	t.Logf("kraft.version 1: every voter reported its directory id within %v: %+v", took.Round(time.Millisecond), vs)
	creates := startCreateLoad(t, bs)
	runSamsaOut(t, "metadata-quorum", "--bootstrap-server", bs, "remove-controller", "--controller-id", "3", "--controller-directory-id", vs[2].DirectoryID)
	eventually(t, 15*time.Second, "voters 1 and 2", func() error {
		got, _, err := describeVoters(t, "--bootstrap-server", bs)
		if err == nil && !slices.Equal(voterIDs(got), []int32{1, 2}) {
			err = fmt.Errorf("voters %v", voterIDs(got))
		}
		return err
	})
	eventually(t, 10*time.Second, "CreateTopics answered after the removal", func() error {
		if n := creates.answered(); n < 20 {
			return fmt.Errorf("%d answered", n)
		}
		return nil
	})
	maxCreate, answered, errs := creates.finish()
	for _, e := range errs {
		t.Error(e)
	}
	t.Logf("CreateTopics across the removal: %d answered, max %v", answered, maxCreate.Round(time.Millisecond))
	// Node 3's broker, whose voter is no member now, follows the others' log.
	adm := kadm.NewClient(client(t, c.Node(1).Client))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "after-removal"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "node 3's broker sees a topic created after its voter's removal", func() error {
		resp, err := metadataOf(ctx, c.Node(3).Client, "after-removal")
		if err == nil && (len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0) {
			err = fmt.Errorf("metadata %+v", resp.Topics)
		}
		return err
	})
}
