// CreatePartitions (key 37), versions 0-3.
//
// Grows a topic to Count partitions: Count must exceed the current count
// (INVALID_PARTITIONS otherwise); an explicit Assignment must list exactly the new
// partitions, each with replicas [this node] (INVALID_REPLICA_ASSIGNMENT /
// INVALID_REPLICATION_FACTOR otherwise). Unknown topics: UNKNOWN_TOPIC_OR_PARTITION; a
// topic named twice: INVALID_REQUEST. ValidateOnly stops after validation. New
// partitions get leader epoch 0 and their logs at once.
//
// Differences from Apache Kafka: completes before the answer.
package kafka

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/metadata"
	"github.com/samsa-broker/samsa/engine"
)

func init() {
	register(API{Key: 37, MinVersion: 0, MaxVersion: 3, Handle: handleCreatePartitions})
}

func handleCreatePartitions(b *Broker, r *Request) {
	req := r.Body.(*kmsg.CreatePartitionsRequest)
	resp := r.ResponseKind().(*kmsg.CreatePartitionsResponse)
	seen := map[string]int{}
	for _, t := range req.Topics {
		seen[t.Topic]++
	}
	var used int32 // partitions created by this request
	for _, t := range req.Topics {
		rt := kmsg.NewCreatePartitionsResponseTopic()
		rt.Topic = t.Topic
		var err error
		if seen[t.Topic] > 1 {
			err = errf(kerr.InvalidRequest, "topic %q given more than once", t.Topic)
		} else {
			err = b.createPartitions(&t, req.ValidateOnly, &used)
		}
		rt.ErrorCode, rt.ErrorMessage = errCode(err), errMsg(err)
		resp.Topics = append(resp.Topics, rt)
	}
	r.Respond(resp)
}

func (b *Broker) createPartitions(t *kmsg.CreatePartitionsRequestTopic, validateOnly bool, used *int32) error {
	b.adminMu.Lock()
	defer b.adminMu.Unlock()
	ti, ok := b.meta.Image().Topic(t.Topic)
	if !ok {
		return errf(kerr.UnknownTopicOrPartition, "topic %q does not exist", t.Topic)
	}
	have := int32(len(ti.Partitions))
	if t.Count <= have {
		return errf(kerr.InvalidPartitions, "topic currently has %d partitions, which is higher than or equal to the requested %d", have, t.Count)
	}
	add := int(t.Count - have)
	if add > int(b.maxPartitionsPerOp-*used) {
		return errf(kerr.PolicyViolation, "excessively large number of partitions per request: %d more (at most %d per request)", add, b.maxPartitionsPerOp)
	}
	*used += int32(add)
	if t.Assignment != nil && len(t.Assignment) != add {
		return errf(kerr.InvalidReplicaAssignment, "increasing the number of partitions by %d but %d assignments provided", add, len(t.Assignment))
	}
	for i := range add {
		if t.Assignment != nil {
			if err := b.checkReplicas(t.Assignment[i].Replicas, int(have)+i); err != nil {
				return err
			}
		}
	}
	if validateOnly {
		return nil
	}
	var recs []metadata.Record
	for p := have; p < t.Count; p++ {
		replicas := []int32{b.cfg.NodeID}
		recs = append(recs, &metadata.PartitionRecord{TopicID: ti.ID, Partition: p, Replicas: replicas, ISR: replicas, Leader: b.cfg.NodeID})
	}
	if err := b.meta.Append(recs...); err != nil {
		if errors.Is(err, metadata.ErrUnknownTopic) {
			return errf(kerr.UnknownTopicOrPartition, "topic %q does not exist", t.Topic)
		}
		return errf(kerr.UnknownServerError, "recording partitions: %v", err)
	}
	cfg := b.topicLogConfig(b.meta.Image(), t.Topic)
	for p := have; p < t.Count; p++ {
		tp := engine.TopicPartition{Topic: t.Topic, Partition: p}
		if _, err := b.eng.CreateLog(tp, cfg); err != nil {
			b.log.Error("creating log", "partition", tp.String(), "err", err)
		}
	}
	return nil
}
