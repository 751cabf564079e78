package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/samsa-broker/samsa/tools/chaos"
	"github.com/samsa-broker/samsa/tools/chaos/cluster"
)

// Env is what the nemesis acts on.
type Env struct {
	Cluster *cluster.Cluster
	Admin   *cluster.Admin
	Topic   string
	History *chaos.Writer
	// Link is the slow link's shape; zero means 80ms ± 40ms, 3% loss (netem) or
	// 2mbit with a 100ms queue (tbf).
	Link cluster.LinkSpec
	// Printf reports progress (one line per fault start and heal).
	Printf func(format string, args ...any)
	// Seed drives the run-time choices (a fallback target when the leader is unknown).
	Seed int64
}

// Nemesis runs a schedule and restarts nodes that exit on their own.
type Nemesis struct {
	env     Env
	rng     *rand.Rand
	crashed chan int
	mu      sync.Mutex
	kills   int // journal set-asides, for unique names
}

// New makes a nemesis over env.
func New(env Env) *Nemesis {
	if env.Printf == nil {
		env.Printf = func(string, ...any) {}
	}
	if env.Link == (cluster.LinkSpec{}) {
		env.Link = cluster.LinkSpec{Delay: 80 * time.Millisecond, Jitter: 40 * time.Millisecond, Loss: 3, Rate: "2mbit"}
	}
	return &Nemesis{env: env, rng: rand.New(rand.NewPCG(uint64(env.Seed), 0x72756e)), crashed: make(chan int, 64)}
}

// NodeExited tells the nemesis a node exited on its own (call from cluster.Config.OnExit).
func (n *Nemesis) NodeExited(id int) {
	select {
	case n.crashed <- id:
	default: // the next heal restarts every node that is down anyway
	}
}

// Run executes the schedule, its fault times counted from phase. It returns when the
// last fault has healed, or, once ctx ends, after healing the fault under way. Errors
// of single faults are reported and recorded, not returned; Run returns an error only
// when the cluster could not be healed.
func (n *Nemesis) Run(ctx context.Context, s Schedule, phase time.Time) error {
	for i, f := range s.Faults {
		if err := n.waitUntil(ctx, phase.Add(f.At)); err != nil {
			return nil
		}
		if err := n.one(ctx, i+1, f); err != nil {
			return err
		}
	}
	return nil
}

// waitUntil waits for t, restarting crashed nodes meanwhile.
func (n *Nemesis) waitUntil(ctx context.Context, t time.Time) error {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.C:
			return nil
		case id := <-n.crashed:
			n.recover(ctx, id)
		}
	}
}

// recover restarts a node that exited on its own, retrying with a backoff (1 s,
// doubling to 10 s) while it fails to come back, until ctx ends.
func (n *Nemesis) recover(ctx context.Context, id int) {
	n.env.Printf("node %d exited on its own; restarting it", id)
	backoff := time.Second
	for {
		err := n.HealAll(ctx)
		if err == nil || ctx.Err() != nil {
			return
		}
		n.env.Printf("restart failed (retry in %s): %v", backoff, err)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, 10*time.Second)
		for drained := false; !drained; { // exits of the failed attempts
			select {
			case <-n.crashed:
			default:
				drained = true
			}
		}
	}
}

// Supervise restarts nodes that exit on their own until ctx ends (the quiet period).
func (n *Nemesis) Supervise(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case id := <-n.crashed:
			n.recover(ctx, id)
		}
	}
}

type injected struct {
	nodes  []int
	detail []string
	heal   func(ctx context.Context) error
}

func (n *Nemesis) one(ctx context.Context, i int, f Fault) error {
	start, _ := n.env.History.Now()
	in, err := n.inject(ctx, f)
	if err != nil {
		n.env.Printf("fault %d %s: not injected: %v", i, f.Describe(), err)
		end, _ := n.env.History.Now()
		n.env.History.Append(chaos.Op{Proc: "nemesis", F: chaos.FFault, Status: chaos.Fail, Start: start, End: end, Seq: int64(i), Err: err.Error(),
			Fault: &chaos.FaultInfo{Kind: string(f.Kind), Nodes: in.nodes, Detail: strings.Join(in.detail, "; ")}})
		return n.HealAll(context.WithoutCancel(ctx))
	}
	n.env.Printf("fault %d: %s on node(s) %v for %.1fs (%s)", i, f.Kind, in.nodes, f.Dur.Seconds(), strings.Join(in.detail, "; "))
	wait := f.Dur
	if f.Kind == RollingRestart {
		// The roll happened in inject; its window is at least the scheduled length.
		now, _ := n.env.History.Now()
		wait = max(0, f.Dur-time.Duration(now-start))
	}
	timer := time.NewTimer(wait)
	select {
	case <-ctx.Done():
	case <-timer.C:
	}
	timer.Stop()
	healCtx := context.WithoutCancel(ctx)
	heal, _ := n.env.History.Now()
	var herr error
	if in.heal != nil {
		herr = in.heal(healCtx)
	}
	if err := n.HealAll(healCtx); err != nil && herr == nil {
		herr = err
	}
	end, _ := n.env.History.Now()
	st := chaos.OK
	errText := ""
	if herr != nil {
		st, errText = chaos.Info, herr.Error()
	}
	for _, id := range in.nodes {
		if cut := n.env.Cluster.Node(id).PowerLossCut(); cut != "" && (f.Kind == PowerLoss || f.Kind == PowerLossAll) {
			in.detail = append(in.detail, fmt.Sprintf("node %d at restart: %s", id, cut))
		}
	}
	n.env.History.Append(chaos.Op{Proc: "nemesis", F: chaos.FFault, Status: st, Start: start, End: end, Seq: int64(i), Err: errText,
		Fault: &chaos.FaultInfo{Kind: string(f.Kind), Nodes: in.nodes, Detail: strings.Join(in.detail, "; "), Heal: heal}})
	n.env.Printf("fault %d: %s healed in %.1fs%s", i, f.Kind, float64(end-heal)/1e9, errSuffix(herr))
	if herr != nil && errors.Is(herr, errUnhealable) {
		return herr
	}
	return nil
}

func errSuffix(err error) string {
	if err == nil {
		return ""
	}
	return " (" + err.Error() + ")"
}

var errUnhealable = errors.New("nemesis: cluster not healed")

// leaderOf resolves the leader of partition p, or a random node when it is unknown.
func (n *Nemesis) leaderOf(ctx context.Context, p int32) (int, string) {
	ls, err := n.env.Admin.Leaders(ctx, n.env.Topic)
	if err == nil {
		if id, ok := ls[p]; ok && n.env.Cluster.Node(id) != nil {
			return id, fmt.Sprintf("leader of p%d (metadata)", p)
		}
	}
	id := n.randomNode()
	return id, fmt.Sprintf("leader of p%d unknown (%v); random node %d", p, err, id)
}

func (n *Nemesis) randomNode() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return 1 + n.rng.IntN(len(n.env.Cluster.Nodes()))
}

func (n *Nemesis) inject(ctx context.Context, f Fault) (injected, error) {
	c := n.env.Cluster
	var in injected
	switch f.Kind {
	case Kill, KillLeader, KillController, KillAll, PowerLoss, PowerLossAll:
		return n.injectKill(ctx, f)
	case Pause, PauseLeader:
		id, why := f.Node, "random node"
		if f.Kind == PauseLeader {
			id, why = n.leaderOf(ctx, f.Partition)
		}
		in.nodes, in.detail = []int{id}, []string{why, "SIGSTOP"}
		if err := c.Node(id).Pause(); err != nil {
			return in, err
		}
		in.heal = func(context.Context) error { return c.Node(id).Resume() }
	case PartitionLeader, PartitionHalves, PartitionBridge:
		return n.injectPartition(ctx, f)
	case Slow:
		x := c.Network()
		if x == nil {
			return in, fmt.Errorf("no network namespaces")
		}
		in.nodes = []int{f.Node}
		what, err := x.Slow(f.Node, n.env.Link)
		if err != nil {
			return in, err
		}
		in.detail = []string{what}
		in.heal = func(context.Context) error { return x.Unslow() }
	case RollingRestart:
		for _, nd := range c.Nodes() {
			in.nodes = append(in.nodes, nd.ID)
		}
		detail, err := n.roll(ctx)
		in.detail = detail
		if err != nil {
			return in, err
		}
	case KillReplicas:
		return n.killReplicas(ctx, f)
	case ObjstoreDown:
		return injectObjstoreDown(c, f)
	case DiskFull:
		nd := c.Node(f.Node)
		in.nodes = []int{f.Node}
		b, err := cluster.Fill(nd.DiskDir)
		if err != nil {
			return in, err
		}
		in.detail = []string{fmt.Sprintf("ballast of %d MiB fills %s", b>>20, nd.DiskDir)}
		in.heal = func(context.Context) error { return cluster.Free(nd.DiskDir) }
	default:
		return in, fmt.Errorf("unknown fault %q", f.Kind)
	}
	return in, nil
}

// injectObjstoreDown stops the object store (SIGSTOP) or kills it; the heal continues
// it, or starts it again on its address over its directory. No node is touched: the
// nodes' copies and remote reads fail meanwhile, their produce and local reads must not.
func injectObjstoreDown(c *cluster.Cluster, f Fault) (injected, error) {
	var in injected
	s := c.ObjectStore()
	if s == nil {
		return in, fmt.Errorf("no object store: the cluster runs without tiered storage")
	}
	pid := s.Pid()
	if f.StoreKill {
		in.detail = []string{fmt.Sprintf("versitygw (pid %d) killed (SIGKILL); started again on %s over its directory at the heal", pid, s.Addr)}
		if err := s.Kill(); err != nil {
			return in, err
		}
		in.heal = s.Restart
		return in, nil
	}
	in.detail = []string{fmt.Sprintf("versitygw (pid %d) stopped (SIGSTOP); continued at the heal", pid)}
	if err := s.Pause(); err != nil {
		return in, err
	}
	in.heal = func(context.Context) error { return s.Resume() }
	return in, nil
}

// injectKill kills the fault's nodes with SIGKILL (a random one, a partition's
// leader, the active controller or every node); the heal restarts them, after a
// power loss without their unsynced writes.
func (n *Nemesis) injectKill(ctx context.Context, f Fault) (injected, error) {
	c := n.env.Cluster
	var in injected
	switch f.Kind {
	case Kill, PowerLoss:
		in.nodes, in.detail = []int{f.Node}, []string{"random node"}
	case KillLeader:
		id, why := n.leaderOf(ctx, f.Partition)
		in.nodes, in.detail = []int{id}, []string{why}
	case KillController:
		id, src, err := n.env.Admin.Controller(ctx)
		if err != nil || c.Node(id) == nil {
			id = n.randomNode()
			src = fmt.Sprintf("controller unknown (%v); random node %d", err, id)
		}
		in.nodes, in.detail = []int{id}, []string{"active controller (" + src + ")"}
	case KillAll, PowerLossAll:
		for _, nd := range c.Nodes() {
			in.nodes = append(in.nodes, nd.ID)
		}
		in.detail = []string{"every node"}
	}
	power := f.Kind == PowerLoss || f.Kind == PowerLossAll
	for _, id := range in.nodes {
		if err := c.Node(id).Kill(); err != nil {
			return in, err
		}
	}
	switch {
	case power:
		in.detail = append(in.detail, "power loss: unsynced writes are lost at restart")
	case c.Node(in.nodes[0]).Journal != "":
		in.detail = append(in.detail, "process crash (power-loss journal set aside: the page cache survives)")
	}
	in.heal = func(ctx context.Context) error { return n.restart(ctx, in.nodes, power) }
	return in, nil
}

// injectPartition cuts the network links of the fault (for partition-leader, every
// link of the partition's leader) with blackhole routes; the heal removes them.
func (n *Nemesis) injectPartition(ctx context.Context, f Fault) (injected, error) {
	c := n.env.Cluster
	var in injected
	x := c.Network()
	if x == nil {
		return in, fmt.Errorf("no network namespaces")
	}
	cuts := f.Cuts
	if f.Kind == PartitionLeader {
		id, why := n.leaderOf(ctx, f.Partition)
		in.detail = []string{why}
		for _, nd := range c.Nodes() {
			if nd.ID != id {
				cuts = append(cuts, [2]int{min(id, nd.ID), max(id, nd.ID)})
			}
		}
	}
	seen := map[int]bool{}
	var cs []string
	for _, p := range cuts {
		if err := x.Cut(p[0], p[1]); err != nil {
			x.HealCuts()
			return in, err
		}
		cs = append(cs, fmt.Sprintf("%d-%d", p[0], p[1]))
		for _, id := range p {
			if !seen[id] {
				seen[id] = true
				in.nodes = append(in.nodes, id)
			}
		}
	}
	in.detail = append(in.detail, "cut "+strings.Join(cs, " ")+" (blackhole routes)")
	in.heal = func(context.Context) error { return x.HealCuts() }
	return in, nil
}

// killReplicas takes partition f.Partition's replicas down to one (KillReplicas): the
// first victim is killed; once the controller has taken it out of the ISR the second
// is killed or stopped cleanly, and the ISR shrinks to the survivor. With
// f.PauseLast, half-way through the fault, the survivor is paused and the first
// victim restarted: once the controller fences the survivor the ISR is empty, and the
// first victim, which lacks the records committed after it left, is the only replica
// running: it must not be elected (an unsafe-election event if it is). The
// partition's state (DescribeTopicPartitions, asked of a node that is no replica) is
// in the detail after each step. The heal restarts the second victim while the
// survivor is still paused (afterRestart), resumes the survivor, then restarts the
// victims still down, in order.
func (n *Nemesis) killReplicas(ctx context.Context, f Fault) (injected, error) {
	c, adm := n.env.Cluster, n.env.Admin
	var in injected
	st, err := adm.Partition(ctx, n.env.Topic, f.Partition, 0)
	if err != nil {
		return in, err
	}
	replicas := st.Replicas
	if len(st.Replicas) < 3 || st.Leader < 0 {
		return in, fmt.Errorf("p%d: fewer than 3 replicas or no leader (%s, replicas %v)", f.Partition, st, st.Replicas)
	}
	var followers []int
	for _, id := range st.Replicas {
		if id != st.Leader {
			followers = append(followers, int(id))
		}
	}
	// victims[1] is the last to leave the ISR while another replica remains: the
	// eligible one; survivor the last in the ISR.
	victims, survivor := []int{followers[0], followers[1]}, int(st.Leader)
	if !f.KeepLeader {
		victims[1], survivor = survivor, victims[1]
	}
	in.detail = append(in.detail, fmt.Sprintf("p%d replicas %v: %s", f.Partition, st.Replicas, st))
	// out waits until id is out of the partition's ISR (the controller fences a killed
	// or paused broker after its session timeout; a clean stop moves it out at once).
	out := func(id int) error {
		deadline := time.Now().Add(time.Minute)
		for {
			st, err = adm.Partition(ctx, n.env.Topic, f.Partition, n.bystander(replicas))
			if err == nil && !slices.Contains(st.ISR, int32(id)) && st.Leader != int32(id) {
				return nil
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("p%d: node %d still in the ISR after a minute (%s, %v)", f.Partition, id, st, err)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	for i, id := range victims {
		in.nodes = append(in.nodes, id)
		nd, how := c.Node(id), "SIGKILL"
		if i == 1 && f.CleanStop {
			how = "SIGTERM (clean shutdown)"
			err = nd.Stop(time.Minute)
		} else {
			err = nd.Kill()
		}
		if err != nil {
			return in, err
		}
		if err := out(id); err != nil {
			return in, err
		}
		in.detail = append(in.detail, fmt.Sprintf("node %d %s: %s", id, how, st))
	}
	in.heal = func(ctx context.Context) error {
		if f.PauseLast && !c.Node(victims[1]).Running() {
			// The survivor is still paused: the ISR is empty and no replica can catch
			// up, so what the controller makes of the second's registration shows.
			if err := n.restart(ctx, []int{victims[1]}, false); err != nil {
				return err
			}
			n.afterRestart(ctx, f, victims[1], survivor, replicas)
		}
		if c.Node(survivor).Paused() {
			if err := c.Node(survivor).Resume(); err != nil {
				return err
			}
		}
		for _, id := range victims {
			if c.Node(id).Running() {
				continue
			}
			if err := n.restart(ctx, []int{id}, false); err != nil {
				return err
			}
			st, err := adm.Partition(ctx, n.env.Topic, f.Partition, n.bystander(replicas))
			n.env.Printf("kill-replicas: node %d back: p%d %s%s", id, f.Partition, st, errSuffix(err))
		}
		return nil
	}
	if !f.PauseLast {
		return in, nil
	}
	select {
	case <-ctx.Done():
		return in, nil
	case <-time.After(f.Dur / 2):
	}
	in.nodes = append(in.nodes, survivor)
	if err := c.Node(survivor).Pause(); err != nil {
		return in, err
	}
	first := victims[0]
	if err := n.restart(ctx, []int{first}, false); err != nil {
		return in, err
	}
	if err := out(survivor); err != nil {
		return in, err
	}
	// Alone among the replicas: it must stay out of the lead. Watched for a second, as
	// another node's image may trail the controller's (an answer that fails, from the
	// paused node say, is no observation).
	seen := 0
	for end := time.Now().Add(time.Second); time.Now().Before(end) && st.Leader != int32(first); {
		time.Sleep(100 * time.Millisecond) // sampling a state that must not change
		if s, err := adm.Partition(ctx, n.env.Topic, f.Partition, n.bystander(replicas)); err == nil {
			st, seen = s, seen+1
		}
	}
	in.detail = append(in.detail, fmt.Sprintf("node %d SIGSTOP, node %d back: %s (%d samples)", survivor, first, st, seen))
	if st.Leader == int32(first) {
		n.event(chaos.EventUnsafeElection, f.Partition,
			fmt.Sprintf("p%d: node %d, out of the ISR before it fell below min.insync.replicas, was elected while no other replica ran (%s)", f.Partition, first, st))
	}
	return in, nil
}

// afterRestart checks the partition once the second victim id is back while the
// survivor is paused (the ISR empty, the ELR the second and the survivor). Killed, id
// registers without a previous broker epoch: it must leave the ELR and not be elected
// (an eligible-after-crash event otherwise). Stopped cleanly, it names its epoch,
// stays eligible and is elected: said, not judged (a liveness matter).
func (n *Nemesis) afterRestart(ctx context.Context, f Fault, id, survivor int, replicas []int32) {
	adm := n.env.Admin
	var st cluster.PartitionState
	var err error
	settled := func() bool {
		if f.CleanStop {
			return st.Leader == int32(id)
		}
		return st.Leader < 0 && slices.Equal(st.ELR, []int32{int32(survivor)})
	}
	// Up to 3 s: another node's image may trail the controller's.
	for end := time.Now().Add(3 * time.Second); ; {
		st, err = adm.Partition(ctx, n.env.Topic, f.Partition, n.bystander(replicas))
		if (err == nil && settled()) || time.Now().After(end) {
			break
		}
		time.Sleep(100 * time.Millisecond) // until the state settles, at most 3 s
	}
	switch {
	case err != nil:
		n.env.Printf("kill-replicas: node %d back, survivor %d paused: p%d unknown%s", id, survivor, f.Partition, errSuffix(err))
	case !f.CleanStop && (st.Leader == int32(id) || slices.Contains(st.ELR, int32(id))):
		n.event(chaos.EventEligibleAfterCrash, f.Partition,
			fmt.Sprintf("p%d: node %d, killed, is still eligible after its restart, or elected (%s)", f.Partition, id, st))
	default:
		n.env.Printf("kill-replicas: node %d back (%s), survivor %d paused: p%d %s", id,
			map[bool]string{true: "after a clean shutdown", false: "after SIGKILL"}[f.CleanStop], survivor, f.Partition, st)
	}
}

// bystander is a running node that is none of replicas, to ask about their partition
// (a paused node would hold the answer back); 0 (any node) when there is none.
func (n *Nemesis) bystander(replicas []int32) int {
	for _, nd := range n.env.Cluster.Nodes() {
		if nd.Running() && !nd.Paused() && !slices.Contains(replicas, int32(nd.ID)) {
			return nd.ID
		}
	}
	return 0
}

// event records what the nemesis saw that the checker reports as an anomaly of
// partition p (chaos.EventUnsafeElection, chaos.EventEligibleAfterCrash), and says it.
func (n *Nemesis) event(v string, p int32, detail string) {
	now, wall := n.env.History.Now()
	n.env.History.Append(chaos.Op{Proc: "nemesis", F: chaos.FEvent, Status: chaos.Fail, Start: now, End: now, Wall: wall,
		V: v, Parts: []int32{p}, Err: detail})
	n.env.Printf("%s", detail)
}

// setAside renames a killed node's power-loss journal so that its restart applies
// nothing: a plain crash, whose writes survive in the page cache.
func (n *Nemesis) setAside(nd *cluster.Node) {
	n.mu.Lock()
	n.kills++
	k := n.kills
	n.mu.Unlock()
	if _, err := os.Stat(nd.Journal); err == nil {
		os.Rename(nd.Journal, fmt.Sprintf("%s.crash-%d", nd.Journal, k))
	}
}

// restart starts the nodes that are down among ids. Unless power is set, a node's
// power-loss journal is set aside first: only a power-loss fault loses the page cache.
func (n *Nemesis) restart(ctx context.Context, ids []int, power bool) error {
	var wg sync.WaitGroup
	errs := make([]error, len(ids))
	for i, id := range ids {
		nd := n.env.Cluster.Node(id)
		if nd.Running() {
			continue
		}
		if !power && nd.Journal != "" {
			n.setAside(nd)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = nd.Restart(ctx)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// HealAll brings the cluster back whole: links restored, cuts removed, ballast
// freed, the object store continued or started again, paused nodes resumed, nodes
// that are down restarted (and ready).
func (n *Nemesis) HealAll(ctx context.Context) error {
	c := n.env.Cluster
	var errs []error
	if x := c.Network(); x != nil {
		errs = append(errs, x.HealCuts(), x.Unslow())
	}
	if s := c.ObjectStore(); s != nil {
		switch {
		case !s.Running():
			errs = append(errs, s.Start(ctx))
		case s.Paused():
			errs = append(errs, s.Resume())
		}
	}
	var down []int
	for _, nd := range c.Nodes() {
		errs = append(errs, cluster.Free(nd.DiskDir))
		if nd.Paused() {
			errs = append(errs, nd.Resume())
		}
		if !nd.Running() {
			down = append(down, nd.ID)
		}
	}
	if len(down) > 0 {
		if err := n.restart(ctx, down, false); err != nil {
			errs = append(errs, fmt.Errorf("%w: %v", errUnhealable, err))
		}
	}
	return errors.Join(errs...)
}

// rollISRWait bounds the wait, after a node of a rolling restart is back, for it to be
// in the ISR of every partition of the topic it is a replica of.
const rollISRWait = time.Minute

// roll stops every node in turn (SIGTERM, killed after 15 s) and starts it again, on
// a secured cluster with a new certificate first; before the next node it waits until
// the restarted one answers Metadata and is back in the ISRs of the workload's topic
// (as an operator's rolling restart waits for no under-replicated partition). It
// returns what it did, node by node.
func (n *Nemesis) roll(ctx context.Context) ([]string, error) {
	c := n.env.Cluster
	var detail []string
	for _, nd := range c.Nodes() {
		if c.Secure() {
			what, err := c.RotateCertificate(nd)
			if err != nil {
				return detail, err
			}
			detail = append(detail, what)
		}
		began := time.Now()
		if err := nd.Stop(15 * time.Second); err != nil {
			detail = append(detail, err.Error())
		}
		if nd.Journal != "" {
			n.setAside(nd) // a clean stop keeps the page cache: nothing to cut at start
		}
		if err := nd.Restart(ctx); err != nil {
			return detail, fmt.Errorf("node %d did not come back: %w", nd.ID, err)
		}
		back := time.Since(began)
		if c.Secure() {
			if err := c.CheckServedCertificate(nd, 5*time.Second); err != nil {
				return detail, err
			}
			detail = append(detail, fmt.Sprintf("node %d serves the new certificate", nd.ID))
		}
		isr := n.waitInISR(ctx, nd.ID)
		detail = append(detail, fmt.Sprintf("node %d stopped and ready again in %.1fs, %s", nd.ID, back.Seconds(), isr))
		n.env.Printf("rolling restart: node %d ready in %.1fs, %s", nd.ID, back.Seconds(), isr)
	}
	return detail, nil
}

// waitInISR waits up to rollISRWait until node id is in the ISR of every partition of
// the topic that has it as a replica, and says how long it took.
func (n *Nemesis) waitInISR(ctx context.Context, id int) string {
	began := time.Now()
	deadline := began.Add(rollISRWait)
	for {
		behind, err := n.env.Admin.NotInISR(ctx, n.env.Topic, id)
		if err == nil && len(behind) == 0 {
			return fmt.Sprintf("back in every ISR of %s after %.1fs", n.env.Topic, time.Since(began).Seconds())
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Sprintf("not back in the ISR of %s partitions %v after %s (%v)", n.env.Topic, behind, rollISRWait, err)
		}
		t := time.NewTimer(200 * time.Millisecond)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
}
