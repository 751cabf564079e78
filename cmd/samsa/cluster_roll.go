package main

// samsa cluster roll: a rolling restart, one node at a time, each back in every ISR
// before the next.
//
//	samsa cluster roll --restart-command CMD [--bootstrap-server H:P] [--command-config F]
//	    [--admin-addresses ID=HOST:PORT,...] [--node-timeout 5m] [--timeout 2h] [--dry-run]
//
// Samsa cannot restart a process it does not own: CMD does (`sh -c`), with {id}, {host}
// and {admin} replaced by the node's id, its host and its admin listener's host:port,
// e.g. 'ssh {host} sudo systemctl restart samsa' or 'systemctl restart samsa@{id}'.
// It may return at once (a signal sent) or once the node is back (systemctl restart).
//
//  1. The nodes: the brokers of Metadata and the voters of DescribeQuorum (a
//     controller-only voter needs its admin listener in --admin-addresses). A broker's
//     admin listener is its admin.listen (DescribeConfigs), an unspecified host
//     (0.0.0.0, ::) replaced by the broker's advertised host.
//  2. It refuses to start while a partition is under-replicated (its ISR shorter than
//     its replicas, or no leader) or a node's /ready?isr=true answers other than 200:
//     a restart then could take a partition below min.insync.replicas or offline.
//  3. Before each node it asks for the quorum's leader afresh (the leadership moves
//     while voters restart) and takes a node that is not the active controller while
//     one is left: the active controller's node is restarted last, so the controller
//     moves once. For the node: its process start time (process_start_time_seconds of
//     /metrics), CMD, then it waits until /metrics shows another start time (the node
//     was restarted), /ready?isr=true answers 200 (registered, caught up, unfenced, its
//     replicas in their ISRs) and Metadata shows no under-replicated partition, and
//     prints how long the node took.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const clusterRollUsage = `usage: samsa cluster roll --restart-command CMD [flags]
  a rolling restart: each node in turn restarted by CMD (sh -c; {id}, {host} and
  {admin} replaced by the node's id, host and admin listener host:port), waiting until
  it is back (another process start time on /metrics), ready with its replicas in
  their ISRs (/ready?isr=true) and no partition is under-replicated; the active
  controller's node last; refused while a partition is under-replicated
      --bootstrap-server host:port,... (default 127.0.0.1:9092),
      --command-config FILE (Kafka client properties),
      --admin-addresses ID=HOST:PORT,... (default: each broker's admin.listen),
      --node-timeout 5m (per node), --timeout 2h (the whole roll),
      --dry-run (print the nodes and the order, restart none)`

// rollNode is a node of the roll.
type rollNode struct {
	id    int32
	host  string // the advertised host of its broker, or its admin listener's host
	admin string // host:port of its admin listener
}

// roller holds what a roll needs between its steps.
type roller struct {
	cl          *kgo.Client
	adm         *kadm.Client
	out         io.Writer
	restart     string
	nodeTimeout time.Duration
	http        http.Client
}

func runClusterRoll(args []string, out io.Writer) int {
	a := newAdminCmd("cluster roll", clusterRollUsage)
	a.timeout = 2 * time.Hour
	restart := a.fs.String("restart-command", "", "the command that restarts a node: {id}, {host}, {admin} replaced")
	admins := a.fs.String("admin-addresses", "", "ID=HOST:PORT,... of the nodes' admin listeners")
	nodeTimeout := a.fs.Duration("node-timeout", 5*time.Minute, "how long one node may take to come back")
	dry := a.fs.Bool("dry-run", false, "print the nodes and the order, restart none")
	pos, ok := a.parse(args)
	if !ok {
		return 2
	}
	explicit, err := parseAdminAddresses(*admins)
	if err == nil && len(pos) > 0 {
		err = fmt.Errorf("unexpected arguments %q", pos)
	}
	if err == nil && *restart == "" && !*dry {
		err = errors.New("--restart-command is required: the command that restarts a node (Samsa cannot restart a process it does not own)")
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "samsa cluster roll: %v\n%s\n", err, clusterRollUsage)
		return 2
	}
	return a.run(func(ctx context.Context, cl *kgo.Client, adm *kadm.Client) error {
		r := &roller{cl: cl, adm: adm, out: out, restart: *restart, nodeTimeout: *nodeTimeout, http: http.Client{Timeout: 5 * time.Second}}
		return r.roll(ctx, explicit, *dry)
	})
}

// parseAdminAddresses parses ID=HOST:PORT,...
func parseAdminAddresses(s string) (map[int32]string, error) {
	m := map[int32]string{}
	if s == "" {
		return m, nil
	}
	for _, part := range strings.Split(s, ",") {
		id, addr, ok := strings.Cut(strings.TrimSpace(part), "=")
		n, err := strconv.ParseInt(id, 10, 32)
		if ok && err == nil {
			_, _, err = net.SplitHostPort(addr)
		}
		if !ok || err != nil {
			return nil, fmt.Errorf("--admin-addresses %q: want ID=HOST:PORT,...", part)
		}
		m[int32(n)] = addr
	}
	return m, nil
}

func (r *roller) roll(ctx context.Context, explicit map[int32]string, dry bool) error {
	if under, err := r.underReplicated(ctx); err != nil {
		return err
	} else if len(under) > 0 {
		return fmt.Errorf("not starting: %d partition(s) under-replicated or offline (%s): a restart now could take one below min.insync.replicas; wait until every replica is in its ISR", len(under), listSome(under))
	}
	nodes, err := r.nodes(ctx, explicit)
	if err != nil {
		return err
	}
	for _, n := range nodes {
		if ok, why, err := r.ready(ctx, n.admin); err != nil || !ok {
			if err != nil {
				why = err.Error()
			}
			return fmt.Errorf("not starting: node %d is not ready (http://%s/ready?isr=true: %s)", n.id, n.admin, why)
		}
	}
	ids := make([]string, len(nodes))
	for i, n := range nodes {
		ids[i] = fmt.Sprintf("%d (admin %s)", n.id, n.admin)
	}
	fmt.Fprintf(r.out, "rolling %d nodes: %s; the active controller is node %d, restarted last\n", len(nodes), strings.Join(ids, ", "), r.activeController(ctx))
	if dry {
		return nil
	}
	began := time.Now()
	var slowest time.Duration
	slowestID := int32(-1)
	left := slices.Clone(nodes)
	for len(left) > 0 {
		// The active controller may have moved to a node not yet restarted: take
		// another first while one is left.
		active := r.activeController(ctx)
		i := slices.IndexFunc(left, func(n rollNode) bool { return n.id != active })
		if i < 0 {
			i = 0
		}
		n := left[i]
		left = slices.Delete(left, i, i+1)
		took, err := r.restartNode(ctx, n, n.id == active)
		if err != nil {
			return fmt.Errorf("node %d: %w (the nodes not restarted yet: %s)", n.id, err, rollIDs(left))
		}
		if took > slowest {
			slowest, slowestID = took, n.id
		}
	}
	fmt.Fprintf(r.out, "rolled %d nodes in %v; the longest node %d, %v\n", len(nodes), time.Since(began).Round(time.Millisecond), slowestID, slowest.Round(time.Millisecond))
	return nil
}

func rollIDs(ns []rollNode) string {
	if len(ns) == 0 {
		return "none"
	}
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.Itoa(int(n.id))
	}
	return strings.Join(s, ", ")
}

// nodes are the brokers of Metadata and the voters of DescribeQuorum, in id order,
// each with its admin listener.
func (r *roller) nodes(ctx context.Context, explicit map[int32]string) ([]rollNode, error) {
	md, err := r.adm.BrokerMetadata(ctx)
	if err != nil {
		return nil, fmt.Errorf("metadata: %w", err)
	}
	byID := map[int32]*rollNode{}
	for _, b := range md.Brokers {
		byID[b.NodeID] = &rollNode{id: b.NodeID, host: b.Host}
	}
	if voters, err := r.voters(ctx); err == nil {
		for _, id := range voters {
			if byID[id] == nil {
				byID[id] = &rollNode{id: id}
			}
		}
	} else {
		fmt.Fprintf(os.Stderr, "samsa cluster roll: the controller quorum's voters are not known (DescribeQuorum: %v): rolling the brokers of Metadata\n", err)
	}
	for id := range explicit {
		if byID[id] == nil {
			return nil, fmt.Errorf("--admin-addresses names node %d, which is neither a broker nor a voter of this cluster", id)
		}
	}
	var out []rollNode
	for _, n := range byID {
		if a, ok := explicit[n.id]; ok {
			n.admin = a
		} else if n.host == "" {
			return nil, fmt.Errorf("node %d is a voter without a broker in Metadata (a controller-only node, or a broker that is down): give its admin listener (--admin-addresses %d=HOST:PORT)", n.id, n.id)
		} else if n.admin, err = r.brokerAdmin(ctx, n.id, n.host); err != nil {
			return nil, fmt.Errorf("node %d: %w (or give --admin-addresses %d=HOST:PORT)", n.id, err, n.id)
		}
		if n.host == "" {
			n.host, _, _ = net.SplitHostPort(n.admin)
		}
		out = append(out, *n)
	}
	slices.SortFunc(out, func(a, b rollNode) int { return int(a.id - b.id) })
	return out, nil
}

// brokerAdmin is broker id's admin.listen, its unspecified host replaced by host.
func (r *roller) brokerAdmin(ctx context.Context, id int32, host string) (string, error) {
	rcs, err := r.adm.DescribeBrokerConfigs(ctx, id)
	if err == nil && len(rcs) == 1 {
		err = rcs[0].Err
	}
	if err != nil {
		return "", fmt.Errorf("its admin.listen (DescribeConfigs): %w", err)
	}
	for _, c := range rcs[0].Configs {
		if c.Key != "admin.listen" {
			continue
		}
		v := c.MaybeValue()
		if v == "" {
			return "", errors.New("its admin listener is off (admin.listen is empty)")
		}
		h, port, err := net.SplitHostPort(v)
		if err != nil {
			return "", fmt.Errorf("admin.listen %q: %w", v, err)
		}
		if ip := net.ParseIP(h); h == "" || (ip != nil && ip.IsUnspecified()) {
			h = host
		}
		return net.JoinHostPort(h, port), nil
	}
	return "", errors.New("DescribeConfigs did not report admin.listen")
}

// voters are the ids of the controller quorum's voters.
func (r *roller) voters(ctx context.Context) ([]int32, error) {
	qp, err := r.describeQuorum(ctx)
	if err != nil {
		return nil, err
	}
	var ids []int32
	for _, v := range qp.CurrentVoters {
		ids = append(ids, v.ReplicaID)
	}
	return ids, nil
}

// activeController is the quorum's leader, waited for (at most 10 s) while an
// election runs; -1 if none is known by then.
func (r *roller) activeController(ctx context.Context) int32 {
	deadline := time.Now().Add(10 * time.Second)
	for {
		id := r.quorumLeader(ctx)
		if id >= 0 || time.Now().After(deadline) {
			return id
		}
		select {
		case <-ctx.Done():
			return -1
		case <-time.After(100 * time.Millisecond): // the poll interval
		}
	}
}

// quorumLeader is the active controller's id, -1 if it is not known now.
func (r *roller) quorumLeader(ctx context.Context) int32 {
	qp, err := r.describeQuorum(ctx)
	if err != nil {
		return -1
	}
	return qp.LeaderID
}

func (r *roller) describeQuorum(ctx context.Context) (*kmsg.DescribeQuorumResponseTopicPartition, error) {
	req := kmsg.NewPtrDescribeQuorumRequest()
	t := kmsg.NewDescribeQuorumRequestTopic()
	t.Topic = "__cluster_metadata"
	t.Partitions = append(t.Partitions, kmsg.NewDescribeQuorumRequestTopicPartition())
	req.Topics = append(req.Topics, t)
	qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := req.RequestWith(qctx, r.cl)
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	if err == nil && (len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1) {
		err = errors.New("answer without the __cluster_metadata partition")
	}
	if err != nil {
		return nil, err
	}
	qp := &resp.Topics[0].Partitions[0]
	return qp, kerr.ErrorForCode(qp.ErrorCode)
}

// underReplicated lists the partitions whose ISR is shorter than their replicas or
// that have no leader, as Metadata shows them.
func (r *roller) underReplicated(ctx context.Context) ([]string, error) {
	mctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	md, err := r.adm.Metadata(mctx)
	if err != nil {
		return nil, fmt.Errorf("metadata: %w", err)
	}
	var out []string
	for _, t := range md.Topics.Sorted() {
		if t.Err != nil {
			return nil, fmt.Errorf("metadata of %s: %w", t.Topic, t.Err)
		}
		for _, p := range t.Partitions.Sorted() {
			if p.Leader < 0 || len(p.ISR) < len(p.Replicas) {
				out = append(out, fmt.Sprintf("%s-%d", t.Topic, p.Partition))
			}
		}
	}
	return out, nil
}

func listSome(s []string) string {
	if len(s) > 5 {
		return strings.Join(s[:5], ", ") + ", ..."
	}
	return strings.Join(s, ", ")
}

// restartNode restarts n with the restart command and waits until it is back, ready
// and every partition fully replicated; it returns how long that took.
func (r *roller) restartNode(ctx context.Context, n rollNode, controller bool) (time.Duration, error) {
	began := time.Now()
	before, err := r.startTime(ctx, n.admin)
	if err != nil {
		return 0, fmt.Errorf("its process start time (http://%s/metrics): %w", n.admin, err)
	}
	cmdline := strings.NewReplacer("{id}", strconv.Itoa(int(n.id)), "{host}", n.host, "{admin}", n.admin).Replace(r.restart)
	role := ""
	if controller {
		role = ", the active controller"
	}
	fmt.Fprintf(r.out, "node %d%s: %s\n", n.id, role, cmdline)
	cmd := exec.CommandContext(ctx, "sh", "-c", cmdline)
	cmd.Stdout, cmd.Stderr = r.out, os.Stderr
	if err := cmd.Run(); err != nil {
		return 0, fmt.Errorf("the restart command: %w", err)
	}
	nctx, cancel := context.WithTimeout(ctx, r.nodeTimeout)
	defer cancel()
	var why string
	wait := func(what string, cond func() (bool, string)) error {
		for {
			ok, w := cond()
			if ok {
				return nil
			}
			why = w
			select {
			case <-nctx.Done():
				return fmt.Errorf("not %s within %v of its restart: %s", what, r.nodeTimeout, why)
			case <-time.After(100 * time.Millisecond): // the poll interval
			}
		}
	}
	if err := wait("restarted", func() (bool, string) {
		st, err := r.startTime(nctx, n.admin)
		if err != nil {
			return false, err.Error()
		}
		return st != before, "the same process runs (process_start_time_seconds unchanged)"
	}); err != nil {
		return 0, err
	}
	restarted := time.Since(began)
	if err := wait("ready with its replicas in their ISRs", func() (bool, string) {
		ok, w, err := r.ready(nctx, n.admin)
		if err != nil {
			return false, err.Error()
		}
		return ok, w
	}); err != nil {
		return 0, err
	}
	if err := wait("without under-replicated partitions", func() (bool, string) {
		under, err := r.underReplicated(nctx)
		if err != nil {
			return false, err.Error()
		}
		return len(under) == 0, fmt.Sprintf("%d partition(s) under-replicated: %s", len(under), listSome(under))
	}); err != nil {
		return 0, err
	}
	took := time.Since(began)
	fmt.Fprintf(r.out, "node %d: restarted in %v, ready and in every ISR in %v\n", n.id, restarted.Round(time.Millisecond), took.Round(time.Millisecond))
	return took, nil
}

// ready asks admin's /ready?isr=true: 200 or not, and the body's line.
func (r *roller) ready(ctx context.Context, admin string) (bool, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+admin+"/ready?isr=true", nil)
	if err != nil {
		return false, "", err
	}
	resp, err := r.http.Do(req)
	if err != nil {
		return false, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return resp.StatusCode == http.StatusOK, strings.TrimSpace(string(b)), nil
}

// startTime is process_start_time_seconds of admin's /metrics: another value means
// another process.
func (r *roller) startTime(ctx context.Context, admin string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+admin+"/metrics", nil)
	if err != nil {
		return "", err
	}
	resp, err := r.http.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("/metrics: %s", resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "process_start_time_seconds "); ok {
			return strings.TrimSpace(v), nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	return "", errors.New("/metrics has no process_start_time_seconds")
}
