package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Admin asks the cluster what the nemesis and the workload need to know: partition
// leaders, the active controller, end offsets; and creates the workload's topic.
type Admin struct {
	cl  *kgo.Client
	adm *kadm.Client
}

// Admin makes a client of every node.
func (c *Cluster) Admin() (*Admin, error) {
	opts := []kgo.Opt{kgo.SeedBrokers(c.Bootstrap()...), kgo.RetryTimeout(5 * time.Second), kgo.DialTimeout(2 * time.Second),
		kgo.RequestTimeoutOverhead(3 * time.Second)}
	cl, err := kgo.NewClient(append(opts, c.AdminOpts()...)...)
	if err != nil {
		return nil, fmt.Errorf("cluster: admin client: %w", err)
	}
	return &Admin{cl: cl, adm: kadm.NewClient(cl)}, nil
}

// Close closes the client.
func (a *Admin) Close() { a.cl.Close() }

// Client is the underlying franz-go client.
func (a *Admin) Client() *kgo.Client { return a.cl }

// CreateTopic creates topic with partitions and replication factor rf, retrying until
// ctx ends while the cluster is not ready; a topic that exists already is fine.
func (a *Admin) CreateTopic(ctx context.Context, topic string, partitions int32, rf int16) error {
	return a.CreateTopicWith(ctx, topic, partitions, rf, nil)
}

// CreateTopicWith is CreateTopic with topic configs.
func (a *Admin) CreateTopicWith(ctx context.Context, topic string, partitions int32, rf int16, configs map[string]*string) error {
	var last error
	for {
		resp, err := a.adm.CreateTopic(ctx, partitions, rf, configs, topic)
		if err == nil {
			err = resp.Err
		}
		if err == nil || errors.Is(err, kerr.TopicAlreadyExists) {
			return a.waitLeaders(ctx, topic, partitions)
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster: create topic %s: %w (last: %v)", topic, ctx.Err(), last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (a *Admin) waitLeaders(ctx context.Context, topic string, partitions int32) error {
	for {
		ls, err := a.Leaders(ctx, topic)
		if err == nil && int32(len(ls)) == partitions {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster: topic %s: leaders of %d partitions: %w (last: %v, %d known)", topic, partitions, ctx.Err(), err, len(ls))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Leaders maps each partition of topic that has a leader to its node id.
func (a *Admin) Leaders(ctx context.Context, topic string) (map[int32]int, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	md, err := a.adm.Metadata(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("cluster: metadata: %w", err)
	}
	t, ok := md.Topics[topic]
	if !ok {
		return nil, fmt.Errorf("cluster: metadata has no topic %s", topic)
	}
	if t.Err != nil {
		return nil, fmt.Errorf("cluster: metadata of %s: %w", topic, t.Err)
	}
	out := map[int32]int{}
	for p, d := range t.Partitions {
		if d.Err == nil && d.Leader >= 0 {
			out[p] = int(d.Leader)
		}
	}
	return out, nil
}

// Controller names the active controller and how it was learnt: DescribeQuorum's
// leader (KRaft), else DescribeCluster's controller, else Metadata's.
func (a *Admin) Controller(ctx context.Context) (int, string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	q := kmsg.NewPtrDescribeQuorumRequest()
	t := kmsg.NewDescribeQuorumRequestTopic()
	t.Topic = "__cluster_metadata"
	p := kmsg.NewDescribeQuorumRequestTopicPartition()
	t.Partitions = append(t.Partitions, p)
	q.Topics = append(q.Topics, t)
	if resp, err := q.RequestWith(ctx, a.cl); err == nil && resp.ErrorCode == 0 && len(resp.Topics) == 1 && len(resp.Topics[0].Partitions) == 1 {
		if p := resp.Topics[0].Partitions[0]; p.ErrorCode == 0 && p.LeaderID >= 0 {
			return int(p.LeaderID), "DescribeQuorum leader", nil
		}
	}
	dc := kmsg.NewPtrDescribeClusterRequest()
	if resp, err := dc.RequestWith(ctx, a.cl); err == nil && resp.ErrorCode == 0 && resp.ControllerID >= 0 {
		return int(resp.ControllerID), "DescribeCluster controller", nil
	}
	md := kmsg.NewPtrMetadataRequest()
	resp, err := md.RequestWith(ctx, a.cl)
	if err != nil {
		return 0, "", fmt.Errorf("cluster: controller: %w", err)
	}
	if resp.ControllerID < 0 {
		return 0, "", fmt.Errorf("cluster: no controller known")
	}
	return int(resp.ControllerID), "Metadata controller", nil
}

// EndOffsets is the high watermark of every partition of topic.
func (a *Admin) EndOffsets(ctx context.Context, topic string) (map[int32]int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	offs, err := a.adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("cluster: end offsets: %w", err)
	}
	if err := offs.Error(); err != nil {
		return nil, fmt.Errorf("cluster: end offsets: %w", err)
	}
	out := map[int32]int64{}
	offs.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
	return out, nil
}

// StableOffsets is the last stable offset of every partition of topic: what a
// read_committed consumer may read up to (the high watermark once no transaction is
// open).
func (a *Admin) StableOffsets(ctx context.Context, topic string) (map[int32]int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	offs, err := a.adm.ListCommittedOffsets(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("cluster: stable offsets: %w", err)
	}
	if err := offs.Error(); err != nil {
		return nil, fmt.Errorf("cluster: stable offsets: %w", err)
	}
	out := map[int32]int64{}
	offs.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
	return out, nil
}

// NotInISR lists the partitions of topic that have node id as a replica but not in
// their ISR (by one node's Metadata).
func (a *Admin) NotInISR(ctx context.Context, topic string, id int) ([]int32, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	md, err := a.adm.Metadata(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("cluster: metadata: %w", err)
	}
	t, ok := md.Topics[topic]
	if !ok || t.Err != nil {
		return nil, fmt.Errorf("cluster: metadata of %s: %v", topic, t.Err)
	}
	var out []int32
	for p, d := range t.Partitions {
		if slices.Contains(d.Replicas, int32(id)) && !slices.Contains(d.ISR, int32(id)) {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out, nil
}

// PartitionState is a partition as DescribeTopicPartitions reports it: with eligible
// leader replicas (KIP-966) the ISR may be empty and the ELR names the replicas that
// hold every committed record outside it.
type PartitionState struct {
	Leader       int32
	Replicas     []int32
	ISR          []int32
	ELR          []int32
	LastKnownELR []int32
}

func (s PartitionState) String() string {
	return fmt.Sprintf("leader %d ISR %v ELR %v last known %v", s.Leader, s.ISR, s.ELR, s.LastKnownELR)
}

// Partition describes partition p of topic (DescribeTopicPartitions), asked of node
// via (0: any node the client reaches; a paused one would hold the answer back).
func (a *Admin) Partition(ctx context.Context, topic string, p int32, via int) (PartitionState, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req := kmsg.NewPtrDescribeTopicPartitionsRequest()
	rt := kmsg.NewDescribeTopicPartitionsRequestTopic()
	rt.Topic = topic
	req.Topics = append(req.Topics, rt)
	var r kmsg.Requestor = a.cl
	if via > 0 {
		r = a.cl.Broker(via)
	}
	resp, err := req.RequestWith(ctx, r)
	if err != nil {
		return PartitionState{}, fmt.Errorf("cluster: describe %s: %w", topic, err)
	}
	if len(resp.Topics) != 1 {
		return PartitionState{}, fmt.Errorf("cluster: describe %s: %d topics answered", topic, len(resp.Topics))
	}
	if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil {
		return PartitionState{}, fmt.Errorf("cluster: describe %s: %w", topic, err)
	}
	for _, d := range resp.Topics[0].Partitions {
		if d.Partition == p {
			return PartitionState{Leader: d.LeaderID, Replicas: d.Replicas, ISR: d.ISR, ELR: d.EligibleLeaderReplicas, LastKnownELR: d.LastKnownELR}, nil
		}
	}
	return PartitionState{}, fmt.Errorf("cluster: describe %s: no partition %d", topic, p)
}
