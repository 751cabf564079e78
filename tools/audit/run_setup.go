package audit

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

// setupTimeout bounds the set-up: the topic created and led, its end offsets listed.
const setupTimeout = 60 * time.Second

// canaryRetention is the retention of a canary topic the audit creates: a day of
// canary records (about 60 bytes each) is kept, whatever the cluster's default.
const canaryRetention = "86400000"

type setupResult struct {
	rf   int
	how  string          // "created" or "existing"
	ends map[int32]int64 // each partition's end offset before the run's first record
	// committed: the group's offsets were set to ends before it started (else it
	// starts from the first record written after the set-up, by timestamp).
	committed bool
	at        time.Time
}

// setup makes sure the topic exists with a leader for every partition, lists its end
// offsets and commits them for the run's group, so that both readers start where the
// run's records will begin.
func (a *auditor) setup(ctx context.Context, cl *kgo.Client, adm *kadm.Client) (setupResult, error) {
	ctx, cancel := context.WithTimeout(ctx, setupTimeout)
	defer cancel()
	res := setupResult{how: "existing"}
	topic := a.cfg.Topic
	brokers, parts, err := topicMetadata(ctx, cl, topic)
	if errors.Is(err, kerr.UnknownTopicOrPartition) {
		rf := max(1, min(3, brokers))
		_, err = adm.CreateTopic(ctx, a.cfg.Partitions, int16(rf), map[string]*string{"retention.ms": kadm.StringPtr(canaryRetention)}, topic)
		if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return res, fmt.Errorf("creating topic %s (%d partitions, replication factor %d): %w", topic, a.cfg.Partitions, rf, err)
		}
		if err == nil {
			res.how = "created"
		}
		parts = nil
	} else if err != nil {
		return res, err
	}
	// Every partition led (a new topic's leaders take a moment).
	for {
		if len(parts) > 0 && !slices.ContainsFunc(parts, func(p partInfo) bool { return p.leader < 0 }) {
			break
		}
		select {
		case <-ctx.Done():
			return res, fmt.Errorf("topic %s: partitions without a leader after %s (last: %v, %v)", topic, setupTimeout, parts, err)
		case <-time.After(200 * time.Millisecond):
		}
		_, parts, err = topicMetadata(ctx, cl, topic)
	}
	for _, p := range parts {
		a.parts = append(a.parts, p.id)
	}
	slices.Sort(a.parts)
	res.rf = parts[0].replicas
	// End offsets: every partition answered.
	for {
		ends, err := adm.ListEndOffsets(ctx, topic)
		if err == nil {
			err = ends.Error()
		}
		if err == nil {
			res.ends = map[int32]int64{}
			ends.Each(func(o kadm.ListedOffset) { res.ends[o.Partition] = o.Offset })
			if len(res.ends) == len(a.parts) {
				break
			}
			err = fmt.Errorf("end offsets of %d of %d partitions", len(res.ends), len(a.parts))
		}
		select {
		case <-ctx.Done():
			return res, fmt.Errorf("topic %s: listing end offsets: %w", topic, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
	res.at = time.Now()
	offs := kadm.Offsets{}
	for p, o := range res.ends {
		offs.Add(kadm.Offset{Topic: topic, Partition: p, At: o, LeaderEpoch: -1})
	}
	resp, err := adm.CommitOffsets(ctx, a.group, offs)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		a.cfg.Log.Warn("audit: committing the start offsets of the audit's group failed; it starts by timestamp instead", "group", a.group, "err", err)
	} else {
		res.committed = true
	}
	return res, nil
}

type partInfo struct {
	id       int32
	leader   int32
	replicas int
}

// topicMetadata asks for topic's metadata (without creating it) and returns the number
// of brokers and its partitions; an error wraps the topic's error code.
func topicMetadata(ctx context.Context, cl *kgo.Client, topic string) (int, []partInfo, error) {
	req := kmsg.NewPtrMetadataRequest()
	req.AllowAutoTopicCreation = false
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return 0, nil, fmt.Errorf("metadata: %w", err)
	}
	for _, t := range resp.Topics {
		if t.Topic == nil || *t.Topic != topic {
			continue
		}
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			return len(resp.Brokers), nil, fmt.Errorf("topic %s: %w", topic, err)
		}
		var parts []partInfo
		for _, p := range t.Partitions {
			parts = append(parts, partInfo{id: p.Partition, leader: p.Leader, replicas: len(p.Replicas)})
		}
		return len(resp.Brokers), parts, nil
	}
	return len(resp.Brokers), nil, fmt.Errorf("topic %s: %w", topic, kerr.UnknownTopicOrPartition)
}
