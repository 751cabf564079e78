package main

// samsa topics: the jobs of Kafka's kafka-topics and kafka-reassign-partitions tools,
// over kadm (and kmsg where kadm has no call: replica assignments at creation).
//
//	samsa topics create TOPIC... [--partitions N] [--replication-factor R]
//	      [--config k=v]... [--replica-assignment 1:2:3,2:3:1] [--if-not-exists]
//	samsa topics list [--internal]
//	samsa topics describe [TOPIC...] [--internal] [--under-replicated-partitions]
//	      [--unavailable-partitions]
//	samsa topics delete TOPIC...
//	samsa topics alter TOPIC... [--partitions N] [--config k=v]... [--delete-config k]...
//	samsa topics reassign (--reassignment-json-file F | --topic T --partition P --replicas 1,2,3)
//	      [--cancel]
//	samsa topics reassign --list [--topic T]...
//
// describe prints Kafka's format (a topic line, then a line per partition), with each
// partition's log end offset and each replica's lag behind it when the brokers answer
// DescribeLogDirs; for a tiered topic (remote.storage.enable), each partition's local
// size (its leader's, from DescribeLogDirs) and remote size (remotesize.go).

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/remotelog"
	"github.com/samsa-broker/samsa/engine/remote"
)

func init() {
	register("topics", "topics: create, list, describe, delete, alter, reassign", runTopics)
}

const topicsUsage = `usage: samsa topics <command> [flags]
  create TOPIC...           --partitions N, --replication-factor R (default: the
                            broker's num.partitions, default.replication.factor),
                            --config k=v (repeatable), --replica-assignment
                            1:2:3,2:3:1 (partition 0 on brokers 1,2,3; ...),
                            --if-not-exists
  list                      topic names (--internal: with internal topics)
  describe [TOPIC...]       partitions, leaders, replicas, ISR, offline replicas,
                            end offsets, replica lag and the topic's configs
                            (tiered topics: local and remote sizes);
                            --under-replicated-partitions, --unavailable-partitions
  delete TOPIC...
  alter TOPIC...            --partitions N (the new total), --config k=v,
                            --delete-config k (repeatable)
  reassign                  --reassignment-json-file F (Kafka's format:
                            {"version":1,"partitions":[{"topic":"t","partition":0,
                            "replicas":[1,2,3]}]}) or --topic T --partition P
                            --replicas 1,2,3; --cancel to cancel them; --list to
                            show the reassignments in progress
common flags: --bootstrap-server host:port,... (default 127.0.0.1:9092),
  --command-config FILE (Kafka client properties), --timeout 30s`

type topicsOpts struct {
	partitions, rf     int
	configs, deletes   repeated
	assignment         string
	ifNotExists        bool
	internal           bool
	underReplicated    bool
	unavailable        bool
	jsonFile           string
	topics             repeated
	partition          int
	replicas           string
	cancel, listReassn bool
	newClient          func(...kgo.Opt) (*kgo.Client, error) // describe: a client for reading __remote_log_metadata
}

func runTopics(args []string) int { return topicsMain(args, os.Stdout) }

// topicsMain runs `samsa topics` with its results on out.
func topicsMain(args []string, out io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprintln(os.Stderr, topicsUsage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	sub := args[0]
	a := newAdminCmd("topics "+sub, topicsUsage)
	var o topicsOpts
	fs := a.fs
	fs.IntVar(&o.partitions, "partitions", -1, "partitions (create: count; alter: new total)")
	fs.IntVar(&o.rf, "replication-factor", -1, "replicas per partition")
	fs.Var(&o.configs, "config", "k=v topic config (repeatable)")
	fs.Var(&o.deletes, "delete-config", "alter: config key to remove (repeatable)")
	fs.StringVar(&o.assignment, "replica-assignment", "", "create: 1:2:3,2:3:1 (brokers of partition 0, 1, ...)")
	fs.BoolVar(&o.ifNotExists, "if-not-exists", false, "create: no error if the topic exists")
	fs.BoolVar(&o.internal, "internal", false, "list, describe: include internal topics")
	fs.BoolVar(&o.underReplicated, "under-replicated-partitions", false, "describe: only partitions with an ISR smaller than the replicas")
	fs.BoolVar(&o.unavailable, "unavailable-partitions", false, "describe: only partitions without a leader")
	fs.StringVar(&o.jsonFile, "reassignment-json-file", "", "reassign: Kafka's reassignment JSON")
	fs.Var(&o.topics, "topic", "reassign: the topic (repeatable with --list)")
	fs.IntVar(&o.partition, "partition", -1, "reassign: the partition")
	fs.StringVar(&o.replicas, "replicas", "", "reassign: the new replicas, 1,2,3")
	fs.BoolVar(&o.cancel, "cancel", false, "reassign: cancel the given reassignments")
	fs.BoolVar(&o.listReassn, "list", false, "reassign: list the reassignments in progress")
	pos, ok := a.parse(args[1:])
	if !ok {
		return 2
	}
	need := func() error {
		if len(pos) == 0 {
			return fmt.Errorf("%s needs a topic name", sub)
		}
		return nil
	}
	var f func(ctx context.Context, cl *kgo.Client, adm *kadm.Client) error
	switch sub {
	case "create":
		f = func(ctx context.Context, cl *kgo.Client, adm *kadm.Client) error {
			if err := need(); err != nil {
				return err
			}
			return topicsCreate(ctx, cl, out, pos, &o)
		}
	case "list":
		f = func(ctx context.Context, _ *kgo.Client, adm *kadm.Client) error {
			return topicsList(ctx, adm, out, o.internal)
		}
	case "describe":
		o.newClient = a.client
		f = func(ctx context.Context, _ *kgo.Client, adm *kadm.Client) error {
			return topicsDescribe(ctx, adm, out, pos, &o)
		}
	case "delete":
		f = func(ctx context.Context, _ *kgo.Client, adm *kadm.Client) error {
			if err := need(); err != nil {
				return err
			}
			return topicsDelete(ctx, adm, out, pos)
		}
	case "alter":
		f = func(ctx context.Context, _ *kgo.Client, adm *kadm.Client) error {
			if err := need(); err != nil {
				return err
			}
			return topicsAlter(ctx, adm, out, pos, &o)
		}
	case "reassign":
		f = func(ctx context.Context, _ *kgo.Client, adm *kadm.Client) error {
			return topicsReassign(ctx, adm, out, &o)
		}
	default:
		fmt.Fprintf(os.Stderr, "samsa topics: unknown command %q\n%s\n", sub, topicsUsage)
		return 2
	}
	return a.run(f)
}

// parseConfigs parses k=v pairs.
func parseConfigs(kvs []string) (map[string]*string, error) {
	out := map[string]*string{}
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return nil, fmt.Errorf("--config %q: want key=value", kv)
		}
		out[strings.TrimSpace(k)] = kadm.StringPtr(v)
	}
	return out, nil
}

// parseIDs parses "1,2,3" (or "1:2:3" with sep ':').
func parseIDs(s string, sep string) ([]int32, error) {
	var out []int32
	for _, f := range strings.Split(s, sep) {
		n, err := strconv.ParseInt(strings.TrimSpace(f), 10, 32)
		if err != nil {
			return nil, fmt.Errorf("bad broker id %q in %q", f, s)
		}
		out = append(out, int32(n))
	}
	return out, nil
}

func topicsCreate(ctx context.Context, cl *kgo.Client, w io.Writer, names []string, o *topicsOpts) error {
	cfgs, err := parseConfigs(o.configs)
	if err != nil {
		return err
	}
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 30000
	for _, name := range names {
		t := kmsg.NewCreateTopicsRequestTopic()
		t.Topic, t.NumPartitions, t.ReplicationFactor = name, int32(o.partitions), int16(o.rf)
		if o.assignment != "" {
			if o.partitions > 0 || o.rf > 0 {
				return errors.New("--replica-assignment replaces --partitions and --replication-factor")
			}
			t.NumPartitions, t.ReplicationFactor = -1, -1
			for i, p := range strings.Split(o.assignment, ",") {
				ids, err := parseIDs(p, ":")
				if err != nil {
					return fmt.Errorf("--replica-assignment: %w", err)
				}
				ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
				ra.Partition, ra.Replicas = int32(i), ids
				t.ReplicaAssignment = append(t.ReplicaAssignment, ra)
			}
		}
		for k, v := range cfgs {
			c := kmsg.NewCreateTopicsRequestTopicConfig()
			c.Name, c.Value = k, v
			t.Configs = append(t.Configs, c)
		}
		req.Topics = append(req.Topics, t)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	var errs []error
	for _, t := range resp.Topics {
		err := kerr.ErrorForCode(t.ErrorCode)
		switch {
		case err == nil:
			fmt.Fprintf(w, "Created topic %s (%d partitions, replication factor %d).\n", t.Topic, t.NumPartitions, t.ReplicationFactor)
		case errors.Is(err, kerr.TopicAlreadyExists) && o.ifNotExists:
			fmt.Fprintf(w, "Topic %s exists.\n", t.Topic)
		default:
			msg := ""
			if t.ErrorMessage != nil && *t.ErrorMessage != "" {
				msg = ": " + *t.ErrorMessage
			}
			errs = append(errs, fmt.Errorf("%s: %w%s", t.Topic, err, msg))
		}
	}
	return errors.Join(errs...)
}

func topicsList(ctx context.Context, adm *kadm.Client, w io.Writer, internal bool) error {
	var td kadm.TopicDetails
	var err error
	if internal {
		td, err = adm.ListTopicsWithInternal(ctx)
	} else {
		td, err = adm.ListTopics(ctx)
	}
	if err != nil {
		return err
	}
	for _, name := range td.Names() {
		fmt.Fprintln(w, name)
	}
	return nil
}

func topicsDescribe(ctx context.Context, adm *kadm.Client, w io.Writer, names []string, o *topicsOpts) error {
	var td kadm.TopicDetails
	var err error
	if o.internal || len(names) > 0 {
		td, err = adm.ListTopicsWithInternal(ctx, names...)
	} else {
		td, err = adm.ListTopics(ctx)
	}
	if err != nil {
		return err
	}
	if err := td.Error(); err != nil {
		return err
	}
	topics := td.Names()
	if len(topics) == 0 {
		return nil
	}
	ends, _ := adm.ListEndOffsets(ctx, topics...) // best effort: shown when answered
	lags, sizes := logDirStats(ctx, adm, td.TopicsSet())
	cfgs, _ := adm.DescribeTopicConfigs(ctx, topics...)
	tiered := map[string]bool{}
	for _, name := range topics {
		if rc, err := cfgs.On(name, nil); err == nil {
			for _, c := range rc.Configs {
				if c.Key == "remote.storage.enable" && c.Value != nil && *c.Value == "true" {
					tiered[name] = true
				}
			}
		}
	}
	var copies *remotelog.Sizes // best effort, as the offsets: shown when read
	if len(tiered) > 0 && o.newClient != nil {
		copies, _ = remoteSizes(ctx, adm, o.newClient)
	}
	bw := bufio.NewWriter(w)
	for _, name := range topics {
		t := td[name]
		parts := t.Partitions.Sorted()
		rf := 0
		if len(parts) > 0 {
			rf = len(parts[0].Replicas)
		}
		var set []string
		if rc, err := cfgs.On(name, nil); err == nil {
			for _, c := range rc.Configs {
				if c.Source == kmsg.ConfigSourceDynamicTopicConfig && c.Value != nil {
					set = append(set, c.Key+"="+*c.Value)
				}
			}
		}
		sort.Strings(set)
		if !o.underReplicated && !o.unavailable {
			fmt.Fprintf(bw, "Topic: %s\tTopicId: %s\tPartitionCount: %d\tReplicationFactor: %d\tConfigs: %s\n",
				name, base64.RawURLEncoding.EncodeToString(t.ID[:]), len(parts), rf, strings.Join(set, ","))
		}
		for _, p := range parts {
			if o.underReplicated && len(p.ISR) >= len(p.Replicas) {
				continue
			}
			if o.unavailable && p.Leader >= 0 {
				continue
			}
			leader := strconv.Itoa(int(p.Leader))
			if p.Leader < 0 {
				leader = "none"
			}
			line := fmt.Sprintf("\tTopic: %s\tPartition: %d\tLeader: %s\tReplicas: %s\tIsr: %s\tOffline: %s",
				name, p.Partition, leader, joinIDs(p.Replicas), joinIDs(p.ISR), joinIDs(p.OfflineReplicas))
			if lo, ok := ends.Lookup(name, p.Partition); ok && lo.Err == nil {
				line += fmt.Sprintf("\tLogEndOffset: %d", lo.Offset)
			}
			if l := lags[name][p.Partition]; len(l) > 0 {
				var rl []string
				for _, r := range p.Replicas {
					if lag, ok := l[r]; ok {
						rl = append(rl, fmt.Sprintf("%d=%d", r, lag))
					}
				}
				line += "\tReplicaLag: " + strings.Join(rl, ",")
			}
			if tiered[name] {
				local, ok := sizes[name][p.Partition][p.Leader]
				line += tieredSizes(local, ok, copies, t.ID, name, p.Partition)
			}
			if p.Err != nil {
				line += "\tError: " + p.Err.Error()
			}
			fmt.Fprintln(bw, line)
		}
	}
	return bw.Flush()
}

// logDirStats returns, by topic, partition and broker, each replica's lag and local
// bytes as DescribeLogDirs answers them (empty when the brokers do not answer).
func logDirStats(ctx context.Context, adm *kadm.Client, set kadm.TopicsSet) (lags, sizes map[string]map[int32]map[int32]int64) {
	lags, sizes = map[string]map[int32]map[int32]int64{}, map[string]map[int32]map[int32]int64{}
	dirs, err := adm.DescribeAllLogDirs(ctx, set)
	if err != nil {
		return lags, sizes
	}
	dirs.Each(func(d kadm.DescribedLogDir) {
		d.Topics.Each(func(p kadm.DescribedLogDirPartition) {
			if p.IsFuture {
				return
			}
			for _, m := range []map[string]map[int32]map[int32]int64{lags, sizes} {
				if m[p.Topic] == nil {
					m[p.Topic] = map[int32]map[int32]int64{}
				}
				if m[p.Topic][p.Partition] == nil {
					m[p.Topic][p.Partition] = map[int32]int64{}
				}
			}
			lags[p.Topic][p.Partition][p.Broker] = p.OffsetLag
			sizes[p.Topic][p.Partition][p.Broker] = p.Size
		})
	})
	return lags, sizes
}

// tieredSizes is a tiered partition's sizes on its describe line: LocalSize, its
// leader's local log (DescribeLogDirs, as Kafka's counts only the local segments), and
// RemoteSize, the bytes of its finished copies in remote storage (remotesize.go).
func tieredSizes(local int64, haveLocal bool, sizes *remotelog.Sizes, id [16]byte, topic string, partition int32) string {
	var s string
	if haveLocal {
		s = fmt.Sprintf("\tLocalSize: %d", local)
	}
	if sizes != nil {
		_, bytes := sizes.Of(remote.TopicIDPartition{TopicID: remote.Uuid(id), Topic: topic, Partition: partition})
		s += fmt.Sprintf("\tRemoteSize: %d", bytes)
	}
	return s
}

func topicsDelete(ctx context.Context, adm *kadm.Client, w io.Writer, names []string) error {
	resp, err := adm.DeleteTopics(ctx, names...)
	if err != nil {
		return err
	}
	var errs []error
	for _, name := range names {
		r, ok := resp[name]
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("%s: not in the answer", name))
		case r.Err != nil:
			errs = append(errs, fmt.Errorf("%s: %w", name, r.Err))
		default:
			fmt.Fprintf(w, "Deleted topic %s.\n", name)
		}
	}
	return errors.Join(errs...)
}

func topicsAlter(ctx context.Context, adm *kadm.Client, w io.Writer, names []string, o *topicsOpts) error {
	cfgs, err := parseConfigs(o.configs)
	if err != nil {
		return err
	}
	if o.partitions < 0 && len(cfgs) == 0 && len(o.deletes) == 0 {
		return errors.New("alter needs --partitions, --config or --delete-config")
	}
	var errs []error
	if o.partitions >= 0 {
		resp, err := adm.UpdatePartitions(ctx, o.partitions, names...)
		if err != nil {
			return err
		}
		for _, r := range resp.Sorted() {
			if r.Err != nil {
				msg := ""
				if r.ErrMessage != "" {
					msg = ": " + r.ErrMessage
				}
				errs = append(errs, fmt.Errorf("%s: %w%s", r.Topic, r.Err, msg))
				continue
			}
			fmt.Fprintf(w, "Topic %s now has %d partitions.\n", r.Topic, o.partitions)
		}
	}
	if len(cfgs) > 0 || len(o.deletes) > 0 {
		var alter []kadm.AlterConfig
		keys := make([]string, 0, len(cfgs))
		for k := range cfgs {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			alter = append(alter, kadm.AlterConfig{Op: kadm.SetConfig, Name: k, Value: cfgs[k]})
		}
		for _, k := range o.deletes {
			alter = append(alter, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: k})
		}
		resp, err := adm.AlterTopicConfigs(ctx, alter, names...)
		if err != nil {
			return err
		}
		for _, r := range resp {
			if r.Err != nil {
				msg := ""
				if r.ErrMessage != "" {
					msg = ": " + r.ErrMessage
				}
				errs = append(errs, fmt.Errorf("%s: %w%s", r.Name, r.Err, msg))
				continue
			}
			fmt.Fprintf(w, "Updated the configs of topic %s.\n", r.Name)
		}
	}
	return errors.Join(errs...)
}

// reassignmentFile is Kafka's reassignment JSON (kafka-reassign-partitions.sh).
type reassignmentFile struct {
	Version    int `json:"version"`
	Partitions []struct {
		Topic     string  `json:"topic"`
		Partition int32   `json:"partition"`
		Replicas  []int32 `json:"replicas"`
	} `json:"partitions"`
}

func topicsReassign(ctx context.Context, adm *kadm.Client, w io.Writer, o *topicsOpts) error {
	if o.listReassn {
		var set kadm.TopicsSet
		if len(o.topics) > 0 {
			td, err := adm.ListTopics(ctx, o.topics...)
			if err != nil {
				return err
			}
			set = td.TopicsSet()
		}
		resp, err := adm.ListPartitionReassignments(ctx, set)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "TOPIC\tPARTITION\tREPLICAS\tADDING\tREMOVING")
		for _, r := range resp.Sorted() {
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\n", r.Topic, r.Partition, joinIDs(r.Replicas), orDash(joinIDs(r.AddingReplicas)), orDash(joinIDs(r.RemovingReplicas)))
		}
		return tw.Flush()
	}
	var req kadm.AlterPartitionAssignmentsReq
	switch {
	case o.jsonFile != "":
		b, err := os.ReadFile(o.jsonFile)
		if err != nil {
			return err
		}
		var f reassignmentFile
		if err := json.Unmarshal(b, &f); err != nil {
			return fmt.Errorf("%s: %w", o.jsonFile, err)
		}
		if f.Version != 1 {
			return fmt.Errorf("%s: version %d (want 1)", o.jsonFile, f.Version)
		}
		for _, p := range f.Partitions {
			if o.cancel {
				req.CancelAssign(p.Topic, p.Partition)
			} else {
				req.Assign(p.Topic, p.Partition, p.Replicas)
			}
		}
	case len(o.topics) == 1 && o.partition >= 0 && (o.replicas != "" || o.cancel):
		if o.cancel {
			req.CancelAssign(o.topics[0], int32(o.partition))
			break
		}
		ids, err := parseIDs(o.replicas, ",")
		if err != nil {
			return fmt.Errorf("--replicas: %w", err)
		}
		req.Assign(o.topics[0], int32(o.partition), ids)
	default:
		return errors.New("reassign needs --reassignment-json-file F, or --topic T --partition P --replicas 1,2,3 (or --cancel), or --list")
	}
	if len(req) == 0 {
		return errors.New("no partitions to reassign")
	}
	resp, err := adm.AlterPartitionAssignments(ctx, req)
	if err != nil {
		return err
	}
	var errs []error
	for _, r := range resp.Sorted() {
		if r.Err != nil {
			msg := ""
			if r.ErrMessage != "" {
				msg = ": " + r.ErrMessage
			}
			errs = append(errs, fmt.Errorf("%s-%d: %w%s", r.Topic, r.Partition, r.Err, msg))
			continue
		}
		verb := "Reassigning"
		if o.cancel {
			verb = "Cancelled the reassignment of"
		}
		fmt.Fprintf(w, "%s %s-%d.\n", verb, r.Topic, r.Partition)
	}
	return errors.Join(errs...)
}
