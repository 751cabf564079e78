package main

// samsa metadata-quorum: the controller quorum (KIP-595, KIP-853), the jobs of
// Kafka's kafka-metadata-quorum.sh, with its flags and output.
//
//	samsa metadata-quorum (--bootstrap-server B | --bootstrap-controller C) [--command-config F] describe --status | --replication
//	samsa metadata-quorum ... --command-config NEW.properties add-controller
//	samsa metadata-quorum ... remove-controller --controller-id N --controller-directory-id D
//
// describe sends DescribeQuorum (55): --status prints the leader, its epoch, the high
// watermark, the largest follower lag and the voters and observers with their
// directory ids and endpoints; --replication a row per voter and observer (log end
// offset, lag, last fetch, last caught up, status). add-controller reads the new
// controller's own properties from --command-config (node.id, its controller
// listener, metadata.log.dir whose meta.properties holds its directory id, and the
// client keys security.protocol, sasl.*, ssl.* to connect with) and sends
// AddRaftVoter (80); remove-controller sends RemoveRaftVoter (81). Through
// --bootstrap-server a broker forwards them to the active controller; through
// --bootstrap-controller the command asks the given controllers which one leads
// (DescribeCluster with EndpointType 2) and sends it there, asking again when the
// leader moves (a leader asked to remove itself hands leadership over first).

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/metadata"
	"github.com/samsa-broker/samsa/internal/kafkaprops"
	"github.com/samsa-broker/samsa/net/node"
)

func init() {
	register("metadata-quorum", "the controller quorum: describe, add-controller, remove-controller (kafka-metadata-quorum.sh)", runMetadataQuorum)
}

const metadataQuorumUsage = `usage: samsa metadata-quorum (--bootstrap-server B | --bootstrap-controller C) [flags] <command> [flags]
  describe --status         the leader, epoch, high watermark, follower lag, voters
                            and observers (with directory ids and endpoints)
  describe --replication    a row per voter and observer: log end offset, lag,
                            last fetch, last caught up, status
  add-controller            add the controller whose properties --command-config
                            names (node.id, its controller listener,
                            metadata.log.dir formatted with
                            --no-initial-controllers) to the voters
  remove-controller         --controller-id N --controller-directory-id D: remove
                            that voter
common flags: --bootstrap-server host:port,... (a broker) or
  --bootstrap-controller host:port,... (controllers), --command-config FILE
  (client properties; for add-controller the new controller's properties file),
  --timeout 30s`

type quorumOpts struct {
	controllers string // --bootstrap-controller
	status      bool
	replication bool
	humanRead   bool
	id          int
	dir         string
}

func runMetadataQuorum(args []string) int { return metadataQuorumMain(args, os.Stdout) }

func metadataQuorumMain(args []string, out io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprintln(os.Stderr, metadataQuorumUsage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	a := newAdminCmd("metadata-quorum", metadataQuorumUsage)
	var o quorumOpts
	a.fs.StringVar(&o.controllers, "bootstrap-controller", "", "controllers to connect to (host:port,...)")
	a.fs.BoolVar(&o.status, "status", false, "describe: the quorum's status")
	a.fs.BoolVar(&o.replication, "replication", false, "describe: each replica's replication")
	a.fs.BoolVar(&o.humanRead, "human-readable", false, "describe --replication: times as durations ago")
	a.fs.IntVar(&o.id, "controller-id", -1, "remove-controller: the voter's node id")
	a.fs.StringVar(&o.dir, "controller-directory-id", "", "remove-controller: the voter's directory id")
	pos, ok := a.parse(args)
	if !ok {
		return 2
	}
	bootstrapSet := false
	a.fs.Visit(func(f *flag.Flag) { bootstrapSet = bootstrapSet || f.Name == "bootstrap-server" })
	if len(pos) != 1 {
		fmt.Fprintf(os.Stderr, "samsa metadata-quorum: want one command, got %q\n%s\n", pos, metadataQuorumUsage)
		return 2
	}
	sub := pos[0]
	a.name = "metadata-quorum " + sub
	bad := func(format string, args ...any) int {
		fmt.Fprintf(os.Stderr, "samsa metadata-quorum %s: %s\n", sub, fmt.Sprintf(format, args...))
		return 2
	}
	if bootstrapSet && o.controllers != "" {
		return bad("give --bootstrap-server or --bootstrap-controller, not both")
	}
	q := &quorumClient{a: a, controllers: o.controllers}
	switch sub {
	case "describe":
		if o.status == o.replication {
			return bad("give --status or --replication")
		}
		return q.run(func(ctx context.Context) error { return q.describe(ctx, out, o) })
	case "add-controller":
		if a.config == "" {
			return bad("--command-config is required: the new controller's properties file")
		}
		v, err := newControllerOf(a.config)
		if err != nil {
			fmt.Fprintf(os.Stderr, "samsa %s: %v\n", a.name, err)
			return 1
		}
		return q.run(func(ctx context.Context) error { return q.addController(ctx, out, v) })
	case "remove-controller":
		dir, err := metadata.ParseUUID(o.dir)
		if o.id < 0 || o.dir == "" || err != nil {
			return bad("--controller-id N and --controller-directory-id D are required (D as describe --status prints it)")
		}
		return q.run(func(ctx context.Context) error { return q.removeController(ctx, out, int32(o.id), dir) })
	}
	fmt.Fprintf(os.Stderr, "samsa metadata-quorum: unknown command %q\n%s\n", sub, metadataQuorumUsage)
	return 2
}

// quorumClient sends the quorum's requests through a broker (--bootstrap-server: it
// forwards them to the active controller) or to the leading controller
// (--bootstrap-controller).
type quorumClient struct {
	a           *adminCmd
	controllers string
	opts        []kgo.Opt
	cl          *kgo.Client // --bootstrap-server
}

// run sets the client up and calls f within --timeout; it returns the exit code.
func (q *quorumClient) run(f func(ctx context.Context) error) int {
	if q.a.config != "" {
		opts, err := quorumClientOptions(q.a.config)
		if err != nil {
			fmt.Fprintf(os.Stderr, "samsa %s: %v\n", q.a.name, err)
			return 1
		}
		q.opts = opts
	}
	if q.controllers == "" {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(strings.Split(q.a.bootstrap, ",")...)}, q.opts...)...)
		if err != nil {
			fmt.Fprintf(os.Stderr, "samsa %s: %v\n", q.a.name, err)
			return 1
		}
		defer cl.Close()
		q.cl = cl
	}
	ctx, cancel := context.WithTimeout(context.Background(), q.a.timeout)
	defer cancel()
	if err := f(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "samsa %s: %v\n", q.a.name, err)
		return 1
	}
	return 0
}

// quorumClientOptions reads the client keys of a properties file (security.protocol,
// sasl.*, ssl.*, client.id): add-controller's file is a controller's properties.
func quorumClientOptions(path string) ([]kgo.Opt, error) {
	kvs, err := readProperties(path)
	if err != nil {
		return nil, fmt.Errorf("--command-config: %w", err)
	}
	var client [][2]string
	for _, kv := range kvs {
		if k := kv[0]; k == "security.protocol" || k == "client.id" || strings.HasPrefix(k, "sasl.") || strings.HasPrefix(k, "ssl.") {
			client = append(client, kv)
		}
	}
	opts, err := kafkaprops.ClientOptions(client, func(string) {})
	if err != nil {
		return nil, fmt.Errorf("--command-config %s: %w", path, err)
	}
	return opts, nil
}

// notController reports whether a response says its receiver does not lead.
func notController(code int16) bool {
	return code == kerr.NotController.Code || code == kerr.NotLeaderForPartition.Code
}

// request sends req and returns the answer's error code (code of resp); through
// controllers it finds the leader and asks again while the answer is NOT_CONTROLLER.
func (q *quorumClient) request(ctx context.Context, req kmsg.Request, code func(kmsg.Response) int16) (kmsg.Response, error) {
	if q.cl != nil {
		return q.cl.Request(ctx, req)
	}
	var last error
	for {
		resp, err := q.toLeader(ctx, req)
		if err == nil && !notController(code(resp)) {
			return resp, nil
		}
		if err == nil {
			err = kerr.ErrorForCode(code(resp))
		}
		last = err
		t := time.NewTimer(200 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("no controller led the quorum in time: %w", last)
		case <-t.C:
		}
	}
}

// toLeader asks the bootstrap controllers in turn which voter leads, and sends req
// to it.
func (q *quorumClient) toLeader(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	var errs []error
	for _, addr := range strings.Split(q.controllers, ",") {
		leader, err := q.leaderVia(ctx, strings.TrimSpace(addr))
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", addr, err))
			continue
		}
		resp, err := q.direct(ctx, leader, req)
		if err != nil {
			errs = append(errs, fmt.Errorf("leader at %s: %w", leader, err))
			continue
		}
		return resp, nil
	}
	return nil, errors.Join(errs...)
}

// leaderVia asks the controller at addr for the quorum's leader's address.
func (q *quorumClient) leaderVia(ctx context.Context, addr string) (string, error) {
	req := kmsg.NewPtrDescribeClusterRequest()
	req.EndpointType = 2
	resp, err := q.direct(ctx, addr, req)
	if err != nil {
		return "", err
	}
	r := resp.(*kmsg.DescribeClusterResponse)
	if r.ErrorCode != 0 {
		return "", kerr.ErrorForCode(r.ErrorCode)
	}
	for _, b := range r.Brokers {
		if b.NodeID == r.ControllerID {
			return net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))), nil
		}
	}
	return "", fmt.Errorf("no leader known (controller id %d)", r.ControllerID)
}

// direct sends req to the controller at addr over a connection of its own.
func (q *quorumClient) direct(ctx context.Context, addr string, req kmsg.Request) (kmsg.Response, error) {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, q.opts...)...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	seeds := cl.SeedBrokers()
	if len(seeds) == 0 {
		return nil, fmt.Errorf("no address in %q", addr)
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return seeds[0].Request(rctx, req)
}

// clusterID asks for the cluster id (--status prints it).
func (q *quorumClient) clusterID(ctx context.Context) string {
	req := kmsg.NewPtrDescribeClusterRequest()
	var resp kmsg.Response
	var err error
	if q.cl != nil {
		resp, err = q.cl.Request(ctx, req)
	} else {
		req.EndpointType = 2
		resp, err = q.direct(ctx, strings.TrimSpace(strings.Split(q.controllers, ",")[0]), req)
	}
	if err != nil {
		return "unknown"
	}
	return resp.(*kmsg.DescribeClusterResponse).ClusterID
}

func (q *quorumClient) describe(ctx context.Context, w io.Writer, o quorumOpts) error {
	req := kmsg.NewPtrDescribeQuorumRequest()
	t := kmsg.NewDescribeQuorumRequestTopic()
	t.Topic = "__cluster_metadata"
	t.Partitions = append(t.Partitions, kmsg.NewDescribeQuorumRequestTopicPartition())
	req.Topics = append(req.Topics, t)
	resp, err := q.request(ctx, req, func(r kmsg.Response) int16 {
		dq := r.(*kmsg.DescribeQuorumResponse)
		if dq.ErrorCode == 0 && len(dq.Topics) == 1 && len(dq.Topics[0].Partitions) == 1 {
			return dq.Topics[0].Partitions[0].ErrorCode
		}
		return dq.ErrorCode
	})
	if err != nil {
		return err
	}
	dq := resp.(*kmsg.DescribeQuorumResponse)
	if err := kerr.ErrorForCode(dq.ErrorCode); err != nil {
		return fmt.Errorf("DescribeQuorum: %w", err)
	}
	if len(dq.Topics) != 1 || len(dq.Topics[0].Partitions) != 1 {
		return errors.New("DescribeQuorum answered without the __cluster_metadata partition")
	}
	p := dq.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
		return fmt.Errorf("DescribeQuorum: %w", err)
	}
	if o.status {
		return printQuorumStatus(w, q.clusterID(ctx), p, dq.Nodes)
	}
	return printQuorumReplication(w, p, o.humanRead, time.Now())
}

// printQuorumStatus prints describe --status as kafka-metadata-quorum.sh does.
func printQuorumStatus(w io.Writer, clusterID string, p kmsg.DescribeQuorumResponseTopicPartition, nodes []kmsg.DescribeQuorumResponseNode) error {
	var leader kmsg.DescribeQuorumResponseTopicPartitionReplicaState
	for _, v := range p.CurrentVoters {
		if v.ReplicaID == p.LeaderID {
			leader = v
		}
	}
	var maxLag, maxLagMs int64
	for _, v := range p.CurrentVoters {
		if lag := p.HighWatermark - v.LogEndOffset; lag > maxLag {
			maxLag = lag
			maxLagMs = leader.LastCaughtUpTimestamp - v.LastCaughtUpTimestamp
		}
	}
	if maxLag == 0 {
		maxLagMs = 0
	}
	endpoints := map[int32][]string{}
	for _, n := range nodes {
		for _, l := range n.Listeners {
			endpoints[n.NodeID] = append(endpoints[n.NodeID], metadata.VoterEndpoint{Name: l.Name, Host: l.Host, Port: l.Port}.String())
		}
	}
	type replica struct {
		ID          int32    `json:"id"`
		DirectoryID string   `json:"directoryId"`
		Endpoints   []string `json:"endpoints,omitempty"`
	}
	list := func(rs []kmsg.DescribeQuorumResponseTopicPartitionReplicaState, withEndpoints bool) string {
		out := make([]replica, 0, len(rs))
		for _, r := range rs {
			x := replica{ID: r.ReplicaID, DirectoryID: metadata.UUID(r.ReplicaDirectoryID).String()}
			if withEndpoints {
				x.Endpoints = endpoints[r.ReplicaID]
			}
			out = append(out, x)
		}
		b, _ := json.Marshal(out)
		return string(b)
	}
	_, err := fmt.Fprintf(w, "ClusterId:              %s\nLeaderId:               %d\nLeaderEpoch:            %d\nHighWatermark:          %d\nMaxFollowerLag:         %d\nMaxFollowerLagTimeMs:   %d\nCurrentVoters:          %s\nCurrentObservers:       %s\n",
		clusterID, p.LeaderID, p.LeaderEpoch, p.HighWatermark, maxLag, maxLagMs, list(p.CurrentVoters, true), list(p.Observers, false))
	return err
}

// printQuorumReplication prints describe --replication: the leader first, then the
// other voters, then the observers.
func printQuorumReplication(w io.Writer, p kmsg.DescribeQuorumResponseTopicPartition, human bool, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NodeId\tDirectoryId\tLogEndOffset\tLag\tLastFetchTimestamp\tLastCaughtUpTimestamp\tStatus")
	ts := func(ms int64) string {
		switch {
		case ms < 0:
			return "-1"
		case human:
			return strconv.FormatInt(max(0, now.UnixMilli()-ms), 10) + " ms ago"
		}
		return strconv.FormatInt(ms, 10)
	}
	row := func(r kmsg.DescribeQuorumResponseTopicPartitionReplicaState, status string) {
		fmt.Fprintf(tw, "%d\t%s\t%d\t%d\t%s\t%s\t%s\n", r.ReplicaID, metadata.UUID(r.ReplicaDirectoryID), r.LogEndOffset,
			max(0, p.HighWatermark-r.LogEndOffset), ts(r.LastFetchTimestamp), ts(r.LastCaughtUpTimestamp), status)
	}
	for _, v := range p.CurrentVoters {
		if v.ReplicaID == p.LeaderID {
			row(v, "Leader")
		}
	}
	for _, v := range p.CurrentVoters {
		if v.ReplicaID != p.LeaderID {
			row(v, "Follower")
		}
	}
	for _, v := range p.Observers {
		row(v, "Observer")
	}
	return tw.Flush()
}

// newController is the controller add-controller adds.
type newController struct {
	id        int32
	dir       metadata.UUID
	listeners []kmsg.AddRaftVoterRequestListener
}

// newControllerOf reads the new controller's properties file: its node id, its
// controller listener's endpoint and its metadata directory's directory id.
func newControllerOf(path string) (newController, error) {
	cfg, err := storageConfig(path)
	if err != nil {
		return newController{}, err
	}
	if !cfg.Roles.Controller {
		return newController{}, fmt.Errorf("%s: process.roles has no controller", path)
	}
	mp, err := node.ReadMetaProperties(cfg.MetadataDir)
	if err != nil {
		return newController{}, fmt.Errorf("the new controller's metadata.log.dir %s: %w (format it first with samsa storage format --no-initial-controllers)", cfg.MetadataDir, err)
	}
	dir, err := metadata.ParseUUID(mp.DirectoryID)
	if err != nil || dir == metadata.ZeroUUID {
		return newController{}, fmt.Errorf("%s: no directory.id in meta.properties", cfg.MetadataDir)
	}
	host, port, err := node.ControllerEndpoint(cfg.Config)
	if err != nil {
		return newController{}, err
	}
	l := kmsg.NewAddRaftVoterRequestListener()
	l.Name, l.Host, l.Port = cfg.ControllerListenerNames[0], host, uint16(port)
	return newController{id: cfg.NodeID, dir: dir, listeners: []kmsg.AddRaftVoterRequestListener{l}}, nil
}

func (q *quorumClient) addController(ctx context.Context, w io.Writer, v newController) error {
	req := kmsg.NewPtrAddRaftVoterRequest()
	req.VoterID, req.VoterDirectoryID, req.Listeners = v.id, v.dir, v.listeners
	req.AckWhenCommitted = true
	if dl, ok := ctx.Deadline(); ok {
		req.TimeoutMillis = int32(min(time.Until(dl).Milliseconds(), math.MaxInt32))
	}
	resp, err := q.request(ctx, req, func(r kmsg.Response) int16 { return r.(*kmsg.AddRaftVoterResponse).ErrorCode })
	if err != nil {
		return err
	}
	r := resp.(*kmsg.AddRaftVoterResponse)
	if err := responseError(r.ErrorCode, r.ErrorMessage); err != nil {
		return err
	}
	eps := make([]string, len(v.listeners))
	for i, l := range v.listeners {
		eps[i] = metadata.VoterEndpoint{Name: l.Name, Host: l.Host, Port: l.Port}.String()
	}
	_, err = fmt.Fprintf(w, "Added controller %d with directory id %s and endpoints: %s\n", v.id, v.dir, strings.Join(eps, ", "))
	return err
}

func (q *quorumClient) removeController(ctx context.Context, w io.Writer, id int32, dir metadata.UUID) error {
	req := kmsg.NewPtrRemoveRaftVoterRequest()
	req.VoterID, req.VoterDirectoryID = id, dir
	resp, err := q.request(ctx, req, func(r kmsg.Response) int16 { return r.(*kmsg.RemoveRaftVoterResponse).ErrorCode })
	if err != nil {
		return err
	}
	r := resp.(*kmsg.RemoveRaftVoterResponse)
	if err := responseError(r.ErrorCode, r.ErrorMessage); err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "Removed KRaft controller %d with directory id %s\n", id, dir)
	return err
}

// responseError is the error of a response's code and message (nil for 0).
func responseError(code int16, msg *string) error {
	err := kerr.ErrorForCode(code)
	if err == nil {
		return nil
	}
	if msg != nil && *msg != "" {
		return fmt.Errorf("%w: %s", err, *msg)
	}
	return err
}
