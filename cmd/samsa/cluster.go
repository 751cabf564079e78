package main

// samsa cluster: the cluster as a whole.
//
//	samsa cluster describe [--bootstrap-server H:P]
//	samsa cluster start --nodes N --data-dir DIR [--timeout 60s] [--set KEY=VALUE ...]
//	samsa cluster roll --restart-command CMD [--bootstrap-server H:P] (cluster_roll.go)
//
// describe shows the brokers (host, port, rack, fenced), the active controller and
// the metadata quorum (DescribeQuorum: leader, epoch, high watermark, each voter's
// and observer's log end offset and lag), as kafka-metadata-quorum.sh does.
//
// start runs N combined nodes (broker and controller each) as child processes of
// this one, on 127.0.0.1 with free ports, each with a properties file under DIR,
// formatted with one cluster id; it prints the bootstrap servers and, on Ctrl-C or
// SIGTERM, stops every node (SIGTERM: a controlled shutdown) and waits for them. A
// node that exits on its own (a crash, or killed to watch a failover) is reported
// with its exit status and log, and the others keep running; it can be started
// again by hand with `samsa serve --config DIR/node-<id>/server.properties` (it then
// runs on its own: Ctrl-C of `samsa cluster start` does not stop it). The exit status
// is 1 when a node exited on its own, or when every node did. --set KEY=VALUE
// (repeatable) gives every node a broker config key as `samsa serve --set` does (it
// is passed to each node's serve, over its properties file); the keys the command
// writes itself (node.id, listeners, log.dirs, ...) are refused.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/configs"
)

func init() {
	register("cluster", "the cluster: describe (brokers, controller, quorum), start (N local nodes), roll (rolling restart)", runCluster)
}

const clusterUsage = `usage: samsa cluster <command> [flags]
  describe                  brokers (host, port, rack, fenced), the active
                            controller and the metadata quorum
      --bootstrap-server host:port,... (default 127.0.0.1:9092),
      --command-config FILE (Kafka client properties), --timeout 30s
  start                     run a local cluster: N combined nodes as child processes
                            on 127.0.0.1 (free ports), prints the bootstrap servers,
                            stops them all on Ctrl-C; a node that exits (killed to
                            watch a failover) is reported and the others keep
                            running; start it again with the printed
                            samsa serve --config node-<id>/server.properties
      --nodes N (default 3), --data-dir DIR (default ./cluster-data),
      --timeout 60s (how long to wait for the cluster to form),
      --set KEY=VALUE (repeatable): a broker config key of every node,
      as samsa serve --set
  roll                      a rolling restart: each node restarted in turn by
                            --restart-command, waiting until it is ready with its
                            replicas in their ISRs; samsa cluster roll -h`

func runCluster(args []string) int { return clusterMain(args, os.Stdout) }

// clusterMain runs `samsa cluster` with describe's results on out.
func clusterMain(args []string, out io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprintln(os.Stderr, clusterUsage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	switch args[0] {
	case "describe":
		a := newAdminCmd("cluster describe", clusterUsage)
		if pos, ok := a.parse(args[1:]); !ok || len(pos) > 0 {
			if ok {
				fmt.Fprintf(os.Stderr, "samsa cluster describe: unexpected arguments %q\n", pos)
			}
			return 2
		}
		return a.run(func(ctx context.Context, cl *kgo.Client, adm *kadm.Client) error {
			return clusterDescribe(ctx, cl, adm, out)
		})
	case "start":
		return runClusterStart(args[1:])
	case "roll":
		return runClusterRoll(args[1:], out)
	}
	fmt.Fprintf(os.Stderr, "samsa cluster: unknown command %q\n%s\n", args[0], clusterUsage)
	return 2
}

func clusterDescribe(ctx context.Context, cl *kgo.Client, adm *kadm.Client, w io.Writer) error {
	req := kmsg.NewPtrDescribeClusterRequest()
	req.IncludeFencedBrokers = true
	resp, err := req.RequestWith(ctx, cl)
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if err == nil {
		fmt.Fprintf(w, "Cluster ID:  %s\nController:  %d\n\n", resp.ClusterID, resp.ControllerID)
		fmt.Fprintln(tw, "BROKER\tHOST\tPORT\tRACK\tFENCED")
		for _, b := range resp.Brokers {
			rack := "-"
			if b.Rack != nil {
				rack = *b.Rack
			}
			fenced := "no"
			if b.IsFenced {
				fenced = "yes"
			} else if req.Version < 2 {
				fenced = "?"
			}
			fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%s\n", b.NodeID, b.Host, b.Port, rack, fenced)
		}
	} else {
		// A broker without DescribeCluster: what Metadata says.
		md, merr := adm.BrokerMetadata(ctx)
		if merr != nil {
			return errors.Join(err, merr)
		}
		fmt.Fprintf(w, "Cluster ID:  %s\nController:  %d\n\n", md.Cluster, md.Controller)
		fmt.Fprintln(tw, "BROKER\tHOST\tPORT\tRACK\tFENCED")
		for _, b := range md.Brokers {
			rack := "-"
			if b.Rack != nil {
				rack = *b.Rack
			}
			fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t?\n", b.NodeID, b.Host, b.Port, rack)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	return describeQuorum(ctx, cl, w)
}

// describeQuorum prints DescribeQuorum's answer, or why there is none.
func describeQuorum(ctx context.Context, cl *kgo.Client, w io.Writer) error {
	req := kmsg.NewPtrDescribeQuorumRequest()
	t := kmsg.NewDescribeQuorumRequestTopic()
	t.Topic = "__cluster_metadata"
	p := kmsg.NewDescribeQuorumRequestTopicPartition()
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)
	qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := req.RequestWith(qctx, cl)
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	if err == nil && (len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1) {
		err = errors.New("answer without the __cluster_metadata partition")
	}
	if err == nil {
		err = kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode)
	}
	if err != nil {
		fmt.Fprintf(w, "Quorum:      not reported (DescribeQuorum: %v)\n", err)
		return nil
	}
	qp := resp.Topics[0].Partitions[0]
	fmt.Fprintf(w, "Quorum:      leader %d, epoch %d, high watermark %d\n\n", qp.LeaderID, qp.LeaderEpoch, qp.HighWatermark)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tSTATUS\tLOG END OFFSET\tLAG\tLAST FETCH\tLAST CAUGHT UP")
	now := time.Now()
	ago := func(ms int64) string {
		if ms < 0 {
			return "-"
		}
		return now.Sub(time.UnixMilli(ms)).Round(time.Millisecond).String() + " ago"
	}
	row := func(r kmsg.DescribeQuorumResponseTopicPartitionReplicaState, status string) {
		if status == "voter" && r.ReplicaID == qp.LeaderID {
			status = "leader"
		}
		fmt.Fprintf(tw, "%d\t%s\t%d\t%d\t%s\t%s\n", r.ReplicaID, status, r.LogEndOffset, qp.HighWatermark-r.LogEndOffset,
			ago(r.LastFetchTimestamp), ago(r.LastCaughtUpTimestamp))
	}
	for _, r := range qp.CurrentVoters {
		row(r, "voter")
	}
	for _, r := range qp.Observers {
		row(r, "observer")
	}
	return tw.Flush()
}

func runClusterStart(args []string) int {
	fs := flag.NewFlagSet("cluster start", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	nodes := fs.Int("nodes", 3, "number of combined nodes")
	dir := fs.String("data-dir", "./cluster-data", "directory of the nodes' files")
	timeout := fs.Duration("timeout", 60*time.Second, "how long to wait for the cluster to form")
	var sets multiFlag
	fs.Var(&sets, "set", "KEY=VALUE: a broker config key of every node (repeatable)")
	err := fs.Parse(args)
	if err == nil && (fs.NArg() > 0 || *nodes < 1 || *nodes > 9) {
		err = errors.New("--nodes takes 1 to 9")
	}
	if err == nil {
		err = checkClusterSets(sets)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "samsa cluster start: %v\n%s\n", err, clusterUsage)
		return 2
	}
	var serveArgs []string
	for _, kv := range sets {
		serveArgs = append(serveArgs, "--set", kv)
	}
	bin, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "samsa cluster start:", err)
		return 1
	}
	abs, err := filepath.Abs(*dir)
	if err == nil {
		err = checkClusterDir(abs, *nodes)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "samsa cluster start:", err)
		return 1
	}
	spec := combined(*nodes)
	spec.ServeArgs = serveArgs
	c, err := newProcCluster(bin, abs, spec)
	if err != nil {
		fmt.Fprintln(os.Stderr, "samsa cluster start:", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	code := 0
	if err := c.StartAll(); err != nil {
		fmt.Fprintln(os.Stderr, "samsa cluster start:", err)
		code = 1
	}
	for _, n := range c.nodes {
		fmt.Printf("node %d: pid %d, kafka %s, controller %s, admin http://%s, config %s, log %s\n",
			n.ID, c.Pid(n.ID), n.Client, n.Controller, n.Admin, n.ConfigFile, filepath.Join(n.Dir, "samsa.log"))
	}
	if code == 0 {
		rctx, cancel := context.WithTimeout(ctx, *timeout)
		err := c.WaitReady(rctx, 1, nil)
		cancel()
		if err != nil {
			fmt.Fprintln(os.Stderr, "samsa cluster start:", err)
			code = 1
		} else {
			fmt.Printf("cluster %s ready: --bootstrap-server %s\n(Ctrl-C stops every node)\n", c.clusterID, c.Bootstrap())
		}
	}
	if code == 0 {
		code = superviseNodes(ctx, c, bin)
	}
	if err := c.StopAll(30 * time.Second); err != nil {
		fmt.Fprintln(os.Stderr, "samsa cluster start:", err)
		code = 1
	}
	return code
}

// superviseNodes waits for ctx (Ctrl-C, SIGTERM) while the nodes run, reporting
// each node that exits on its own and keeping the others; it returns 1 if one did,
// and returns at once (1) when none is left.
func superviseNodes(ctx context.Context, c *procCluster, bin string) int {
	exited := make(chan int32, len(c.nodes))
	for _, n := range c.nodes {
		go func() {
			c.Wait(context.Background(), n.ID)
			exited <- n.ID
		}()
	}
	code, alive := 0, len(c.nodes)
	for alive > 0 {
		select {
		case <-ctx.Done():
			fmt.Println("stopping the nodes")
			return code
		case id := <-exited:
			if ctx.Err() != nil {
				continue // stopping anyway
			}
			alive--
			code = 1
			n := c.Node(id)
			fmt.Fprintf(os.Stderr, "samsa cluster start: node %d exited (%s); its log is %s:\n%s\n",
				id, exitStatus(c.Wait(context.Background(), id)), filepath.Join(n.Dir, "samsa.log"), c.LogTail(id, 15))
			if alive > 0 {
				fmt.Fprintf(os.Stderr, "samsa cluster start: the other %d nodes keep running (Ctrl-C stops them); to start node %d again: %s serve --config %s\n",
					alive, id, bin, n.ConfigFile)
			}
		}
	}
	fmt.Fprintln(os.Stderr, "samsa cluster start: every node exited")
	return 1
}

// exitStatus describes a child's exit.
func exitStatus(err error) string {
	if err == nil {
		return "exit status 0"
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return fmt.Sprintf("killed by signal %d, %s", int(ws.Signal()), ws.Signal())
		}
	}
	return err.Error()
}

// clusterOwnKeys are the keys `cluster start` writes into every node's properties
// file (procNode.writeConfig): --set may not change them.
var clusterOwnKeys = []string{"process.roles", "node.id", "controller.quorum.voters", "listeners",
	"controller.listener.names", "log.dirs", "log.dir", "metadata.log.dir", "admin.listen",
	"advertised.listeners", "inter.broker.listener.name"}

// checkClusterSets checks the --set values of cluster start: KEY=VALUE, not one of
// the keys the command writes itself, and a valid value for a known key (an unknown
// key is passed on: each node warns about it and ignores it, as serve does).
func checkClusterSets(sets []string) error {
	for _, kv := range sets {
		k, v, ok := strings.Cut(kv, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return fmt.Errorf("--set %q: want KEY=VALUE", kv)
		}
		if slices.Contains(clusterOwnKeys, k) {
			return fmt.Errorf("--set %s: cluster start writes this key for each node itself", k)
		}
		if _, _, err := configs.ValidateBroker(k, v); err != nil {
			return fmt.Errorf("--set %s: %w", k, err)
		}
	}
	return nil
}

// checkClusterDir refuses a directory made for another number of nodes.
func checkClusterDir(dir string, nodes int) error {
	for i := nodes + 1; i <= 9; i++ {
		if _, err := os.Stat(filepath.Join(dir, fmt.Sprintf("node-%d", i))); err == nil {
			return fmt.Errorf("%s holds node-%d: it was made for more than %d nodes (use another --data-dir or remove it)", dir, i, nodes)
		}
	}
	for i := 1; i <= nodes; i++ {
		if _, err := os.Stat(filepath.Join(dir, fmt.Sprintf("node-%d", i), "server.properties")); err != nil && i > 1 {
			if _, err1 := os.Stat(filepath.Join(dir, "node-1", "server.properties")); err1 == nil {
				return fmt.Errorf("%s was made for %d nodes (use another --data-dir or remove it)", dir, i-1)
			}
		}
	}
	return nil
}
