// CreateTopics (key 19), versions 0-7.
//
// Each topic is validated alone: name (INVALID_TOPIC_EXCEPTION), partitions and
// replication factor (-1 takes num.partitions and default.replication.factor; v4+),
// explicit replica assignments (INVALID_REQUEST when combined with counts; partitions
// must be numbered 0..n-1; on this one-node cluster every replica list must be exactly
// [this node]: a longer list is INVALID_REPLICATION_FACTOR, another broker
// INVALID_REPLICA_ASSIGNMENT), configs by name and value (INVALID_CONFIG), existence
// (TOPIC_ALREADY_EXISTS). A name given twice in one request fails with INVALID_REQUEST
// for each occurrence. ValidateOnly (v1+) stops after validation. v5+ answers with the
// partition count, replication factor and the topic's full configuration; v7+ with the
// topic id.
//
// Differences from Apache Kafka: creation completes before the answer (TimeoutMillis
// is not needed; the topic is usable at once). A replication factor above 1 is refused
// since there is one node.
package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/configs"
)

func init() {
	register(API{Key: 19, MinVersion: 0, MaxVersion: 7, Handle: handleCreateTopics})
}

func handleCreateTopics(b *Broker, r *Request) {
	req := r.Body.(*kmsg.CreateTopicsRequest)
	resp := r.ResponseKind().(*kmsg.CreateTopicsResponse)
	seen := map[string]int{}
	for _, t := range req.Topics {
		seen[t.Topic]++
	}
	var used int32 // partitions created by this request
	for _, t := range req.Topics {
		rt := kmsg.NewCreateTopicsResponseTopic()
		rt.Topic = t.Topic
		rt.NumPartitions, rt.ReplicationFactor = -1, -1
		spec, err := b.createSpec(&t, seen[t.Topic] > 1)
		spec.used = used
		if err == nil {
			var done *topicSpec
			done, err = b.createTopic(spec, req.ValidateOnly)
			if err == nil {
				used += done.partitions
				rt.NumPartitions, rt.ReplicationFactor = done.partitions, done.replication
				if !req.ValidateOnly {
					if ti, ok := b.meta.Image().Topic(t.Topic); ok {
						rt.TopicID = ti.ID
					}
				}
				rt.Configs = b.createdConfigs(done)
			}
		}
		rt.ErrorCode, rt.ErrorMessage = errCode(err), errMsg(err)
		if r.Header.Version < 1 {
			rt.ErrorMessage = nil
		}
		resp.Topics = append(resp.Topics, rt)
	}
	r.Respond(resp)
}

// createSpec turns a request topic into a spec (shape checks only).
func (b *Broker) createSpec(t *kmsg.CreateTopicsRequestTopic, duplicate bool) (topicSpec, error) {
	s := topicSpec{name: t.Topic, partitions: t.NumPartitions, replication: t.ReplicationFactor, configs: map[string]string{}}
	if duplicate {
		return s, errf(kerr.InvalidRequest, "topic %q given more than once", t.Topic)
	}
	if len(t.ReplicaAssignment) > 0 {
		s.assignment = make([][]int32, len(t.ReplicaAssignment))
		for _, a := range t.ReplicaAssignment {
			if a.Partition < 0 || int(a.Partition) >= len(t.ReplicaAssignment) || s.assignment[a.Partition] != nil {
				return s, errf(kerr.InvalidReplicaAssignment, "partitions should be numbered 0 to %d, each once", len(t.ReplicaAssignment)-1)
			}
			s.assignment[a.Partition] = a.Replicas
			if a.Replicas == nil {
				s.assignment[a.Partition] = []int32{}
			}
		}
	}
	for _, c := range t.Configs {
		if _, dup := s.configs[c.Name]; dup {
			return s, errf(kerr.InvalidRequest, "config %q given more than once", c.Name)
		}
		if c.Value == nil {
			return s, errf(kerr.InvalidConfig, "null value for config %q", c.Name)
		}
		s.configs[c.Name] = *c.Value
	}
	return s, nil
}

// createdConfigs lists the topic's resulting configuration (v5+).
func (b *Broker) createdConfigs(s *topicSpec) []kmsg.CreateTopicsResponseTopicConfig {
	l := b.layers(b.meta.Image(), "")
	l.Topic = s.configs
	out := make([]kmsg.CreateTopicsResponseTopicConfig, 0, len(configs.TopicDefs))
	for _, d := range configs.TopicDefs {
		res := l.ResolveTopic(d, false)
		out = append(out, kmsg.CreateTopicsResponseTopicConfig{Name: d.Name, Value: res.Value, Source: int8(res.Source)})
	}
	return out
}
