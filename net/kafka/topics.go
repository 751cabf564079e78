package kafka

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/samsa-broker/samsa/coordinator/configs"
	"github.com/samsa-broker/samsa/coordinator/metadata"
	"github.com/samsa-broker/samsa/engine"
)

// Partition is a partition resolved for a data-path request.
type Partition struct {
	Topic *metadata.TopicImage
	Index int32
	Image metadata.PartitionImage
	Log   *engine.Log
}

// LookupPartition resolves topic/partition against the current metadata image and
// returns its log, creating the log when the metadata has the partition and the engine
// lacks it. The error is a Kafka error (*kerr.Error): UNKNOWN_TOPIC_OR_PARTITION,
// NOT_LEADER_OR_FOLLOWER (this node does not lead it), KAFKA_STORAGE_ERROR.
func (b *Broker) LookupPartition(topic string, partition int32) (Partition, error) {
	t, ok := b.meta.Image().Topic(topic)
	if !ok {
		return Partition{}, kerr.UnknownTopicOrPartition
	}
	return b.partitionOf(t, partition)
}

// LookupPartitionByID is LookupPartition by topic id (UNKNOWN_TOPIC_ID when unknown).
func (b *Broker) LookupPartitionByID(id metadata.UUID, partition int32) (Partition, error) {
	t, ok := b.meta.Image().TopicByID(id)
	if !ok {
		return Partition{}, kerr.UnknownTopicID
	}
	return b.partitionOf(t, partition)
}

func (b *Broker) partitionOf(t *metadata.TopicImage, partition int32) (Partition, error) {
	if partition < 0 || int(partition) >= len(t.Partitions) {
		return Partition{}, kerr.UnknownTopicOrPartition
	}
	p := Partition{Topic: t, Index: partition, Image: t.Partitions[partition]}
	if p.Image.Leader != b.cfg.NodeID {
		return p, kerr.NotLeaderForPartition
	}
	tp := engine.TopicPartition{Topic: t.Name, Partition: partition}
	if p.Log = b.eng.Log(tp); p.Log != nil {
		return p, nil
	}
	// Slow path: create the missing log, under adminMu so that a concurrent deletion
	// of the topic cannot be undone by re-creating its log.
	b.adminMu.Lock()
	defer b.adminMu.Unlock()
	im := b.meta.Image()
	if cur, ok := im.Topic(t.Name); !ok || cur.ID != t.ID || int(partition) >= len(cur.Partitions) {
		return Partition{}, kerr.UnknownTopicOrPartition
	}
	l, err := b.eng.CreateLog(tp, b.topicLogConfig(im, t.Name))
	if err != nil {
		b.log.Error("creating log", "partition", tp.String(), "err", err)
		return p, kerr.KafkaStorageError
	}
	p.Log = l
	return p, nil
}

// AutoCreateEnabled reports auto.create.topics.enable (dynamic override, else static).
func (b *Broker) AutoCreateEnabled() bool {
	return b.brokerValue(b.meta.Image(), "auto.create.topics.enable") == "true"
}

// AutoCreateTopic creates topic with the broker's defaults if auto.create.topics.enable
// and the name is valid. It returns the topic (also when another request created it
// first) or a Kafka error: UNKNOWN_TOPIC_OR_PARTITION when auto-creation is off,
// INVALID_TOPIC_EXCEPTION for a bad name.
//
// used, if not nil, counts the partitions the calling request created so far; it grows
// by what is created, and a request may create at most maxPartitionsPerOp
// (POLICY_VIOLATION beyond).
func (b *Broker) AutoCreateTopic(topic string, used *int32) (*metadata.TopicImage, error) {
	if t, ok := b.meta.Image().Topic(topic); ok {
		return t, nil
	}
	if !b.AutoCreateEnabled() {
		return nil, kerr.UnknownTopicOrPartition
	}
	if err := validTopicName(topic); err != nil {
		return nil, kerr.InvalidTopicException
	}
	spec := topicSpec{name: topic, partitions: -1, replication: -1}
	if used != nil {
		spec.used = *used
	}
	done, err := b.createTopic(spec, false)
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return nil, err
	}
	if err == nil && used != nil {
		*used += done.partitions
	}
	if t, ok := b.meta.Image().Topic(topic); ok {
		b.log.Info("auto-created topic", "topic", topic, "partitions", len(t.Partitions))
		return t, nil
	}
	return nil, kerr.UnknownTopicOrPartition
}

// validTopicName applies Kafka's rules: [a-zA-Z0-9._-], 1..249 chars, not "." or "..".
func validTopicName(name string) error {
	if name == "" || name == "." || name == ".." || len(name) > 249 {
		return fmt.Errorf("topic name %q is illegal", name)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("topic name %q contains a character other than ASCII alphanumerics, '.', '_' and '-'", name)
		}
	}
	return nil
}

// isInternalTopic reports Kafka's internal topics.
func isInternalTopic(name string) bool {
	return name == "__consumer_offsets" || name == "__transaction_state"
}

// topicSpec is a validated creation request.
type topicSpec struct {
	name        string
	partitions  int32     // -1: num.partitions
	replication int16     // -1: default.replication.factor
	assignment  [][]int32 // explicit replica assignment, or nil
	configs     map[string]string
	// used is how many partitions the request already created: a request may create at
	// most Broker.maxPartitionsPerOp in all (the zero value: nothing used yet).
	used int32
}

// kafkaErr pairs a Kafka error with a message for the response.
type kafkaErr struct {
	code *kerr.Error
	msg  string
}

func (e *kafkaErr) Error() string { return e.code.Message + ": " + e.msg }
func (e *kafkaErr) Unwrap() error { return e.code }

func errf(code *kerr.Error, format string, args ...any) error {
	return &kafkaErr{code: code, msg: fmt.Sprintf(format, args...)}
}

// errCode and errMsg map an error to a Kafka code and message at the edge.
func errCode(err error) int16 {
	if err == nil {
		return 0
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Code
	}
	if errors.Is(err, configs.ErrInvalidConfig) {
		return kerr.InvalidConfig.Code
	}
	return kerr.UnknownServerError.Code
}

func errMsg(err error) *string {
	if err == nil {
		return nil
	}
	var ke *kafkaErr
	if errors.As(err, &ke) {
		return &ke.msg
	}
	s := err.Error()
	return &s
}

// resolveSpec fills defaults and validates a creation request (everything but
// existence). Returns the partition count and replica assignment to create.
func (b *Broker) resolveSpec(im *metadata.Image, s *topicSpec) error {
	if err := validTopicName(s.name); err != nil {
		return errf(kerr.InvalidTopicException, "%v", err)
	}
	if s.assignment != nil {
		if len(s.assignment) > int(b.maxPartitionsPerOp-s.used) {
			return errf(kerr.PolicyViolation, "excessively large number of partitions per request: %d more (at most %d per request)", len(s.assignment), b.maxPartitionsPerOp)
		}
		if s.partitions != -1 || s.replication != -1 {
			return errf(kerr.InvalidRequest, "both numPartitions or replicationFactor and replicasAssignment were set")
		}
		for p, replicas := range s.assignment {
			if err := b.checkReplicas(replicas, p); err != nil {
				return err
			}
		}
		s.partitions, s.replication = int32(len(s.assignment)), int16(len(s.assignment[0]))
	} else {
		if s.partitions == -1 {
			s.partitions = int32(b.brokerInt(im, "num.partitions"))
		}
		if s.replication == -1 {
			s.replication = int16(b.brokerInt(im, "default.replication.factor"))
		}
		if s.partitions <= 0 {
			return errf(kerr.InvalidPartitions, "number of partitions must be larger than 0")
		}
		if s.replication <= 0 {
			return errf(kerr.InvalidReplicationFactor, "replication factor must be larger than 0")
		}
		if s.partitions > b.maxPartitionsPerOp-s.used {
			return errf(kerr.PolicyViolation, "excessively large number of partitions per request: %d more (at most %d per request)", s.partitions, b.maxPartitionsPerOp)
		}
		if s.replication > 1 {
			return errf(kerr.InvalidReplicationFactor, "replication factor: %d larger than available brokers: 1", s.replication)
		}
		for range s.partitions {
			s.assignment = append(s.assignment, []int32{b.cfg.NodeID})
		}
	}
	for k, v := range s.configs {
		canon, err := configs.ValidateTopic(k, &v)
		if err != nil {
			return errf(kerr.InvalidConfig, "%v", err)
		}
		s.configs[k] = canon
	}
	return nil
}

// checkReplicas validates one partition's replica list on this one-node cluster.
func (b *Broker) checkReplicas(replicas []int32, p int) error {
	if len(replicas) == 0 {
		return errf(kerr.InvalidReplicaAssignment, "partition %d has no replicas", p)
	}
	if len(replicas) > 1 {
		return errf(kerr.InvalidReplicationFactor, "partition %d: replication factor %d larger than available brokers: 1", p, len(replicas))
	}
	if replicas[0] != b.cfg.NodeID {
		return errf(kerr.InvalidReplicaAssignment, "partition %d: unknown broker %d", p, replicas[0])
	}
	return nil
}

// createTopic validates s and, unless validateOnly, records the topic in the metadata
// and creates its logs. Caller must not hold adminMu.
func (b *Broker) createTopic(s topicSpec, validateOnly bool) (*topicSpec, error) {
	b.adminMu.Lock()
	defer b.adminMu.Unlock()
	im := b.meta.Image()
	if err := b.resolveSpec(im, &s); err != nil {
		return &s, err
	}
	if _, ok := im.Topic(s.name); ok {
		return &s, errf(kerr.TopicAlreadyExists, "topic %q already exists", s.name)
	}
	if clash := collidingTopic(im, s.name); clash != "" {
		return &s, errf(kerr.InvalidTopicException, "topic %q collides with existing topic %q ('.' and '_' collide in metric names)", s.name, clash)
	}
	if validateOnly {
		return &s, nil
	}
	id := metadata.NewUUID()
	recs := []metadata.Record{&metadata.TopicRecord{Name: s.name, ID: id}}
	for p, replicas := range s.assignment {
		recs = append(recs, &metadata.PartitionRecord{TopicID: id, Partition: int32(p), Replicas: replicas, ISR: replicas, Leader: replicas[0], LeaderEpoch: 0})
	}
	for k, v := range s.configs {
		recs = append(recs, &metadata.ConfigRecord{Resource: metadata.ResourceTopic, Name: s.name, Key: k, Value: &v})
	}
	if err := b.meta.Append(recs...); err != nil {
		if errors.Is(err, metadata.ErrTopicExists) {
			return &s, errf(kerr.TopicAlreadyExists, "topic %q already exists", s.name)
		}
		return &s, errf(kerr.UnknownServerError, "recording topic: %v", err)
	}
	cfg := b.topicLogConfig(b.meta.Image(), s.name)
	for p := range s.assignment {
		tp := engine.TopicPartition{Topic: s.name, Partition: int32(p)}
		if _, err := b.eng.CreateLog(tp, cfg); err != nil {
			// The metadata has the partition; LookupPartition retries the log later.
			b.log.Error("creating log", "partition", tp.String(), "err", err)
		}
	}
	return &s, nil
}

// collidingTopic returns an existing topic whose name equals name once '.' and '_' are
// identified (Kafka refuses those), or "".
func collidingTopic(im *metadata.Image, name string) string {
	if !strings.ContainsAny(name, "._") {
		return ""
	}
	norm := strings.ReplaceAll(name, ".", "_")
	for _, t := range im.Topics() {
		if t.Name != name && strings.ReplaceAll(t.Name, ".", "_") == norm {
			return t.Name
		}
	}
	return ""
}

// deleteTopic removes t from the metadata and deletes its logs. Caller holds adminMu.
func (b *Broker) deleteTopicLocked(t *metadata.TopicImage) error {
	// RemoveTopicRecord takes the topic's partitions and config overrides with it.
	if err := b.meta.Append(&metadata.RemoveTopicRecord{ID: t.ID}); err != nil {
		if errors.Is(err, metadata.ErrUnknownTopic) {
			return errf(kerr.UnknownTopicOrPartition, "topic %q does not exist", t.Name)
		}
		return errf(kerr.UnknownServerError, "recording deletion: %v", err)
	}
	for p := range t.Partitions {
		tp := engine.TopicPartition{Topic: t.Name, Partition: int32(p)}
		if err := b.eng.DeleteLog(tp); err != nil && !errors.Is(err, engine.ErrNoLog) {
			b.log.Error("deleting log", "partition", tp.String(), "err", err)
		}
	}
	return nil
}

// isUnder reports whether path is dir or inside it.
func isUnder(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

func stringPtr(s string) *string { return &s }
