package broker

import (
	"context"
	"fmt"
	"strconv"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/group"
	"github.com/samsa-broker/samsa/coordinator/metadata"
	"github.com/samsa-broker/samsa/coordinator/remotelog"
	"github.com/samsa-broker/samsa/coordinator/share"
	"github.com/samsa-broker/samsa/coordinator/txn"
)

// The creation of topics on the broker's behalf (Kafka's AutoTopicCreationManager):
// auto-created topics and a streams group's internal topics as the handlers ask
// (internalTopics.Create), and the coordinators' internal topics, created through the
// active controller on first use (a FindCoordinator, a share group's first heartbeat)
// with Kafka's keys and defaults (internalTopics.EnsureInternal):
//
//	topic                 partitions (default 50)                        replication factor (default 3)                   min.insync.replicas (default 2)   segment.bytes (default 100 MiB)
//	__consumer_offsets    offsets.topic.num.partitions                   offsets.topic.replication.factor                 -                                 offsets.topic.segment.bytes
//	__transaction_state   transaction.state.log.num.partitions           transaction.state.log.replication.factor         transaction.state.log.min.isr     transaction.state.log.segment.bytes
//	__share_group_state   share.coordinator.state.topic.num.partitions   share.coordinator.state.topic.replication.factor share.coordinator.state.topic.min.isr share.coordinator.state.topic.segment.bytes
//	__remote_log_metadata rlmm.config.remote.log.metadata.topic.num.partitions, .replication.factor, .min.isr, .segment.bytes (tiered storage only)
//
// The replication factor is capped at the live brokers and min.insync.replicas at the
// replication factor; every one is never deleted by retention, and compacted but
// __remote_log_metadata (cleanup.policy delete, retention.ms -1, as Kafka creates it);
// compression.type=producer for the first two.

// internalTopic is one internal topic's creation: its name and keys.
type internalTopic struct {
	name                             string
	partitionsKey, rfKey, segmentKey string
	minISRKey                        string // "": none set
	producerCompression              bool
	// deletePolicy: cleanup.policy delete with retention.ms -1 (kept for ever, never
	// compacted), as Kafka creates __remote_log_metadata; the others are compacted.
	deletePolicy bool
}

var (
	offsetsTopicSpec = internalTopic{name: group.OffsetsTopic, partitionsKey: "offsets.topic.num.partitions",
		rfKey: "offsets.topic.replication.factor", segmentKey: "offsets.topic.segment.bytes", producerCompression: true}
	txnTopicSpec = internalTopic{name: txn.StateTopic, partitionsKey: "transaction.state.log.num.partitions",
		rfKey: "transaction.state.log.replication.factor", segmentKey: "transaction.state.log.segment.bytes",
		minISRKey: "transaction.state.log.min.isr", producerCompression: true}
	shareStateTopicSpec = internalTopic{name: share.StateTopic, partitionsKey: "share.coordinator.state.topic.num.partitions",
		rfKey: "share.coordinator.state.topic.replication.factor", segmentKey: "share.coordinator.state.topic.segment.bytes",
		minISRKey: "share.coordinator.state.topic.min.isr"}
	// Kafka's TopicBasedRemoteLogMetadataManager's keys, under its default
	// remote.log.metadata.manager.impl.prefix.
	remoteLogMetadataTopicSpec = internalTopic{name: remotelog.Topic, partitionsKey: "rlmm.config.remote.log.metadata.topic.num.partitions",
		rfKey: "rlmm.config.remote.log.metadata.topic.replication.factor", segmentKey: "rlmm.config.remote.log.metadata.topic.segment.bytes",
		minISRKey: "rlmm.config.remote.log.metadata.topic.min.isr", deletePolicy: true}
)

// request is the CreateTopics of t with the keys of image im.
func (t internalTopic) request(b *Broker, im *metadata.Image) *kmsg.CreateTopicsRequest {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = int32(forwardTimeout.Milliseconds())
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic = t.name
	rt.NumPartitions = int32(b.groupInt(im, t.partitionsKey, 50))
	rf := max(min(b.groupInt(im, t.rfKey, 3), int64(len(im.UnfencedBrokers()))), 1)
	rt.ReplicationFactor = int16(rf)
	policy := "compact"
	if t.deletePolicy {
		policy = "delete"
	}
	kvs := [][2]string{
		{"cleanup.policy", policy},
		{"segment.bytes", strconv.FormatInt(b.groupInt(im, t.segmentKey, 104857600), 10)},
		{"retention.ms", "-1"},
		{"retention.bytes", "-1"},
	}
	if t.minISRKey != "" {
		kvs = append(kvs, [2]string{"min.insync.replicas", strconv.FormatInt(min(max(b.groupInt(im, t.minISRKey, 2), 1), rf), 10)})
	}
	if t.producerCompression {
		kvs = append(kvs, [2]string{"compression.type", "producer"})
	}
	for _, kv := range kvs {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = kv[0], &kv[1]
		rt.Configs = append(rt.Configs, c)
	}
	req.Topics = []kmsg.CreateTopicsRequestTopic{rt}
	return req
}

// internalTopics is kafka.Topics: the creation of topics through the active
// controller, the broker's internal ones one at a time each.
type internalTopics struct {
	b     *Broker
	gates map[string]*topicGate // by internal topic; read-only after newInternalTopics

	// streams are the streams groups' internal topics whose creation is under way.
	streams struct {
		sync.Mutex
		creating map[string]bool
	}
}

// topicGate makes the creation of one internal topic one at a time for the whole
// broker.
type topicGate struct {
	spec     internalTopic
	mu       sync.Mutex
	creating chan struct{} // closed when the running creation ends
}

func newInternalTopics(b *Broker) *internalTopics {
	t := &internalTopics{b: b, gates: map[string]*topicGate{}}
	for _, spec := range []internalTopic{offsetsTopicSpec, txnTopicSpec, shareStateTopicSpec, remoteLogMetadataTopicSpec} {
		t.gates[spec.name] = &topicGate{spec: spec}
	}
	return t
}

// EnsureInternal returns once the image has the internal topic name, creating it
// through the active controller if it has not (ensureInternalTopic).
func (t *internalTopics) EnsureInternal(ctx context.Context, name string) error {
	gate, ok := t.gates[name]
	if !ok {
		return fmt.Errorf("broker: %s is not an internal topic", name)
	}
	return t.b.ensureInternalTopic(ctx, gate, gate.spec)
}

// Create sends req (topics this broker creates on its own: auto-created ones, a
// streams group's internal topics, the internal topics) to the active controller, waits for its image to show them and
// returns each topic's code (TOPIC_ALREADY_EXISTS counts as 0).
func (t *internalTopics) Create(ctx context.Context, req *kmsg.CreateTopicsRequest) map[string]int16 {
	b := t.b
	codes := make(map[string]int16, len(req.Topics))
	req.SetVersion(req.MaxVersion())
	resp, err := b.ctrl.Request(ctx, req)
	if err != nil {
		code, _ := forwardError(err)
		for _, t := range req.Topics {
			codes[t.Topic] = code
		}
		b.log.Warn("creating topics through the controller", "topics", len(req.Topics), "err", err)
		return codes
	}
	exists := false
	for _, t := range resp.(*kmsg.CreateTopicsResponse).Topics {
		switch t.ErrorCode {
		case 0:
			b.log.Info("created topic", "topic", t.Topic, "partitions", t.NumPartitions, "replication_factor", t.ReplicationFactor)
		case kerr.TopicAlreadyExists.Code: // created by another request, maybe on another broker
			t.ErrorCode = 0
		}
		exists = exists || t.ErrorCode == 0
		codes[t.Topic] = t.ErrorCode
	}
	if exists {
		forwarder{b}.Sync(ctx)
	}
	return codes
}

// AutoCreate creates topics with the broker's defaults: NumPartitions and
// ReplicationFactor -1, which the controller reads as num.partitions and
// default.replication.factor.
func (t *internalTopics) AutoCreate(ctx context.Context, topics []string) map[string]int16 {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = int32(forwardTimeout.Milliseconds())
	for _, name := range topics {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, -1, -1
		req.Topics = append(req.Topics, rt)
	}
	return t.Create(ctx, req)
}

// CreateStreamsTopics starts the creation of a streams group's internal topics not
// under way already, on a goroutine of the broker's (kafka.Topics).
func (t *internalTopics) CreateStreamsTopics(topics []group.StreamsTopicInfo) {
	s := &t.streams
	s.Lock()
	if s.creating == nil {
		s.creating = map[string]bool{}
	}
	var todo []group.StreamsTopicInfo
	for _, st := range topics {
		if !s.creating[st.Name] {
			s.creating[st.Name] = true
			todo = append(todo, st)
		}
	}
	s.Unlock()
	if len(todo) == 0 {
		return
	}
	t.b.async(func(ctx context.Context) {
		defer func() {
			s.Lock()
			for _, st := range todo {
				delete(s.creating, st.Name)
			}
			s.Unlock()
		}()
		ctx, cancel := context.WithTimeout(ctx, forwardTimeout)
		defer cancel()
		req := kmsg.NewPtrCreateTopicsRequest()
		req.TimeoutMillis = int32(forwardTimeout.Milliseconds())
		for _, st := range todo {
			rt := kmsg.NewCreateTopicsRequestTopic()
			rt.Topic, rt.NumPartitions, rt.ReplicationFactor = st.Name, st.Partitions, st.ReplicationFactor
			for _, kv := range st.Configs {
				cfg := kmsg.NewCreateTopicsRequestTopicConfig()
				cfg.Name, cfg.Value = kv.Key, &kv.Value
				rt.Configs = append(rt.Configs, cfg)
			}
			req.Topics = append(req.Topics, rt)
		}
		for name, code := range t.Create(ctx, req) {
			if code != 0 && code != kerr.TopicAlreadyExists.Code {
				t.b.log.Warn("creating a streams group's internal topic", "topic", name, "err", kerr.ErrorForCode(code))
			}
		}
	})
}

// ensureInternalTopic returns once the image has the internal topic t, creating it
// through the active controller if it has not; gate makes it one creation at a time
// for the whole broker. It blocks: call it off the read path.
func (b *Broker) ensureInternalTopic(ctx context.Context, gate *topicGate, t internalTopic) error {
	for {
		im := b.meta.Image()
		if _, ok := im.Topic(t.name); ok {
			return nil
		}
		gate.mu.Lock()
		if ch := gate.creating; ch != nil {
			gate.mu.Unlock()
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		ch := make(chan struct{})
		gate.creating = ch
		gate.mu.Unlock()

		code := b.topics.Create(ctx, t.request(b, im))[t.name]

		gate.mu.Lock()
		gate.creating = nil
		close(ch)
		gate.mu.Unlock()
		if code != 0 && code != kerr.TopicAlreadyExists.Code {
			return kerr.ErrorForCode(code)
		}
		if _, ok := b.meta.Image().Topic(t.name); ok {
			return nil
		}
		return kerr.CoordinatorNotAvailable
	}
}
