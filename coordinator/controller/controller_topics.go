package controller

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/configs"
	"github.com/samsa-broker/samsa/coordinator/metadata"
)

// OffsetsTopic is the group coordinator's internal topic. CreateTopics of it with
// NumPartitions -1 takes offsets.topic.num.partitions, and with ReplicationFactor -1
// takes offsets.topic.replication.factor capped at the number of usable brokers.
const OffsetsTopic = "__consumer_offsets"

// topicSpec is one topic of a CreateTopics request being validated.
type topicSpec struct {
	name        string
	partitions  int32     // -1: num.partitions
	replication int16     // -1: default.replication.factor
	assignment  [][]int32 // explicit replica assignment, or nil
	configs     map[string]string
}

// createTopicsLocked is CreateTopics (19). Each topic is validated alone, against
// the pending image with the request's earlier topics: name (INVALID_TOPIC_EXCEPTION,
// also for a name colliding with another's once '.' and '_' are identified), a name
// given twice (INVALID_REQUEST), counts (-1 takes num.partitions and
// default.replication.factor), explicit assignments (INVALID_REQUEST with counts;
// partitions numbered 0..n-1, registered brokers, one size:
// INVALID_REPLICA_ASSIGNMENT), a replication factor above the usable brokers
// (INVALID_REPLICATION_FACTOR), configs (INVALID_CONFIG), existence
// (TOPIC_ALREADY_EXISTS), at most MaxPartitionsPerOp partitions per request
// (POLICY_VIOLATION). Valid topics are created together in one entry; ValidateOnly
// stops after validation. v5+ answers with counts and configs, v7+ the topic id.
func (c *Controller) createTopicsLocked(r *kmsg.CreateTopicsRequest) *op {
	resp := r.ResponseKind().(*kmsg.CreateTopicsResponse)
	resp.SetVersion(r.GetVersion())
	seen := map[string]int{}
	for _, t := range r.Topics {
		seen[t.Topic]++
	}
	im := c.mu.pending
	var recs []metadata.Record
	used := 0
	for _, t := range r.Topics {
		rt := kmsg.NewCreateTopicsResponseTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = t.Topic, -1, -1
		spec, err := createSpec(&t, seen[t.Topic] > 1)
		var trecs []metadata.Record
		if err == nil {
			trecs, err = c.createTopicRecords(im, &spec, used)
		}
		if err == nil {
			used += int(spec.partitions)
			rt.NumPartitions, rt.ReplicationFactor = spec.partitions, spec.replication
			rt.Configs = c.createdConfigs(im, spec.configs)
			if !r.ValidateOnly {
				next, aerr := im.Apply(trecs...)
				if aerr != nil {
					err = errf(kerr.UnknownServerError, "recording topic: %v", aerr)
				} else {
					im = next
					recs = append(recs, trecs...)
					rt.TopicID = trecs[0].(*metadata.TopicRecord).ID
				}
			}
		}
		if err != nil {
			rt.NumPartitions, rt.ReplicationFactor, rt.Configs = -1, -1, nil
		}
		rt.ErrorCode, rt.ErrorMessage = errCode(err), errMsg(err)
		if r.GetVersion() < 1 {
			rt.ErrorMessage = nil
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if len(recs) == 0 {
		return &op{resp: resp}
	}
	return &op{recs: recs, finish: func(uint64) kmsg.Response { return resp }}
}

// createSpec turns a request topic into a spec (shape checks only).
func createSpec(t *kmsg.CreateTopicsRequestTopic, duplicate bool) (topicSpec, error) {
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

// createTopicRecords validates s against im (used: partitions this request already
// creates) and returns the records creating it: the topic, its partitions, its
// configs.
func (c *Controller) createTopicRecords(im *metadata.Image, s *topicSpec, used int) ([]metadata.Record, error) {
	if err := metadata.ValidTopicName(s.name); err != nil {
		return nil, errf(kerr.InvalidTopicException, "%s", topicNameProblem(s.name))
	}
	budget := c.cfg.MaxPartitionsPerOp - used
	usable := UsableBrokers(im)
	l := c.layers(im, "")
	if s.assignment != nil {
		if len(s.assignment) > budget {
			return nil, errf(kerr.PolicyViolation, "excessively large number of partitions per request: %d more (at most %d per request)", len(s.assignment), c.cfg.MaxPartitionsPerOp)
		}
		if s.partitions != -1 || s.replication != -1 {
			return nil, errf(kerr.InvalidRequest, "both numPartitions or replicationFactor and replicasAssignment were set")
		}
		if err := ValidateAssignment(im, s.assignment, 0, 0); err != nil {
			return nil, err
		}
		s.partitions, s.replication = int32(len(s.assignment)), int16(len(s.assignment[0]))
	} else {
		if s.partitions == -1 {
			s.partitions = int32(l.BrokerInt("num.partitions"))
			if s.name == OffsetsTopic {
				s.partitions = int32(l.BrokerInt("offsets.topic.num.partitions"))
			}
		}
		if s.replication == -1 {
			s.replication = int16(l.BrokerInt("default.replication.factor"))
			if s.name == OffsetsTopic {
				if rf := int16(l.BrokerInt("offsets.topic.replication.factor")); rf > 0 {
					s.replication = rf
				}
				s.replication = int16(min(int(s.replication), max(len(usable), 1)))
			}
		}
		if s.partitions <= 0 {
			return nil, errf(kerr.InvalidPartitions, "number of partitions must be larger than 0")
		}
		if s.replication <= 0 {
			return nil, errf(kerr.InvalidReplicationFactor, "replication factor must be larger than 0")
		}
		if int(s.partitions) > budget {
			return nil, errf(kerr.PolicyViolation, "excessively large number of partitions per request: %d more (at most %d per request)", s.partitions, c.cfg.MaxPartitionsPerOp)
		}
		a, err := PlaceReplicas(usable, 0, s.partitions, s.replication, placementStart(im))
		if err != nil {
			return nil, err
		}
		s.assignment = a
	}
	for k, v := range s.configs {
		canon, err := configs.ValidateTopic(k, &v)
		if err != nil {
			return nil, errf(kerr.InvalidConfig, "%v", err)
		}
		s.configs[k] = canon
	}
	after := c.layers(im, "")
	after.Topic = s.configs
	if err := configs.CheckRemoteStorage(configs.Layers{}, after); err != nil {
		return nil, errf(kerr.InvalidConfig, "%v", err)
	}
	if _, ok := im.Topic(s.name); ok {
		return nil, errf(kerr.TopicAlreadyExists, "topic %q already exists", s.name)
	}
	if clash, ok := im.CollidingTopic(s.name); ok {
		return nil, errf(kerr.InvalidTopicException, "topic %q collides with existing topic %q ('.' and '_' collide in metric names)", s.name, clash)
	}
	id := c.newTopic()
	for tries := 0; !id.ValidTopicID() || topicIDTaken(im, id); tries++ {
		if tries == 100 {
			return nil, errf(kerr.UnknownServerError, "no free topic id after %d tries", tries)
		}
		id = c.newTopic()
	}
	withTopic, err := im.Apply(&metadata.TopicRecord{Name: s.name, ID: id})
	if err != nil {
		return nil, errf(kerr.InvalidTopicException, "%v", err)
	}
	parts, err := NewPartitionRecords(withTopic, id, 0, s.assignment)
	if err != nil {
		return nil, err
	}
	recs := metadata.CreateTopicRecords(s.name, id, nil, s.configs)
	out := make([]metadata.Record, 0, len(recs)+len(parts))
	out = append(out, recs[0])
	out = append(out, parts...)
	return append(out, recs[1:]...), nil
}

func topicIDTaken(im *metadata.Image, id metadata.UUID) bool {
	_, ok := im.TopicByID(id)
	return ok
}

// placementStart is the start index of a placement: the number of partitions the
// image has, so that successive topics start on successive brokers (Kafka picks it
// at random; a deterministic choice keeps simulations replayable).
func placementStart(im *metadata.Image) int {
	n := 0
	for _, t := range im.Topics() {
		n += len(t.Partitions)
	}
	return n
}

// topicNameProblem explains why a name breaks metadata.ValidTopicName's rule.
func topicNameProblem(name string) string {
	if name == "" || name == "." || name == ".." || len(name) > 249 {
		return "topic name \"" + name + "\" is illegal"
	}
	return "topic name \"" + name + "\" contains a character other than ASCII alphanumerics, '.', '_' and '-'"
}

// createdConfigs lists a new topic's resulting configuration (CreateTopics v5+).
func (c *Controller) createdConfigs(im *metadata.Image, set map[string]string) []kmsg.CreateTopicsResponseTopicConfig {
	l := c.layers(im, "")
	l.Topic = set
	out := make([]kmsg.CreateTopicsResponseTopicConfig, 0, len(configs.TopicDefs))
	for _, d := range configs.TopicDefs {
		res := l.ResolveTopic(d, false)
		out = append(out, kmsg.CreateTopicsResponseTopicConfig{Name: d.Name, Value: res.Value, Source: int8(res.Source)})
	}
	return out
}

// deleteTopicsLocked is DeleteTopics (20): by name (v0-5 TopicNames, v6 Topics with
// a name) or by id (v6 Topics with a null name). The topic, its partitions and its
// configs leave the metadata in one record; brokers delete the logs when they apply
// it. Unknown names: UNKNOWN_TOPIC_OR_PARTITION; unknown ids: UNKNOWN_TOPIC_ID; both
// or neither: INVALID_REQUEST. Internal topics may be deleted (no authorizer).
func (c *Controller) deleteTopicsLocked(r *kmsg.DeleteTopicsRequest) *op {
	resp := r.ResponseKind().(*kmsg.DeleteTopicsResponse)
	resp.SetVersion(r.GetVersion())
	topics := r.Topics
	if r.GetVersion() < 6 {
		topics = make([]kmsg.DeleteTopicsRequestTopic, len(r.TopicNames))
		for i := range r.TopicNames {
			topics[i].Topic = &r.TopicNames[i]
		}
	}
	im := c.mu.pending
	var recs []metadata.Record
	for _, t := range topics {
		rt := kmsg.NewDeleteTopicsResponseTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		ti, err := lookupForDelete(im, t.Topic, t.TopicID)
		if err == nil {
			rec := &metadata.RemoveTopicRecord{ID: ti.ID}
			next, aerr := im.Apply(rec)
			if aerr != nil {
				err = errf(kerr.UnknownServerError, "recording deletion: %v", aerr)
			} else {
				im = next
				recs = append(recs, rec)
				name := ti.Name
				rt.Topic, rt.TopicID = &name, ti.ID // answered with the name also when deleted by id, as Kafka does
			}
		}
		rt.ErrorCode, rt.ErrorMessage = errCode(err), errMsg(err)
		resp.Topics = append(resp.Topics, rt)
	}
	if len(recs) == 0 {
		return &op{resp: resp}
	}
	return &op{recs: recs, finish: func(uint64) kmsg.Response { return resp }}
}

func lookupForDelete(im *metadata.Image, name *string, id [16]byte) (*metadata.TopicImage, error) {
	hasName, hasID := name != nil && *name != "", id != [16]byte{}
	switch {
	case hasName == hasID:
		return nil, errf(kerr.InvalidRequest, "give a topic name or a topic id, not both or neither")
	case hasName:
		t, ok := im.Topic(*name)
		if !ok {
			return nil, errf(kerr.UnknownTopicOrPartition, "topic %q does not exist", *name)
		}
		return t, nil
	}
	t, ok := im.TopicByID(metadata.UUID(id))
	if !ok {
		return nil, errf(kerr.UnknownTopicID, "topic id does not exist")
	}
	return t, nil
}

// createPartitionsLocked is CreatePartitions (37): grows a topic to Count partitions
// (INVALID_PARTITIONS unless Count exceeds the current count), placed as CreateTopics
// places them with the topic's replication factor, or as an explicit Assignment that
// lists exactly the new partitions (INVALID_REPLICA_ASSIGNMENT otherwise, or for
// unknown brokers or another replication factor). Unknown topics:
// UNKNOWN_TOPIC_OR_PARTITION; a topic named twice: INVALID_REQUEST; at most
// MaxPartitionsPerOp new partitions per request (POLICY_VIOLATION). ValidateOnly stops
// after validation.
func (c *Controller) createPartitionsLocked(r *kmsg.CreatePartitionsRequest) *op {
	resp := r.ResponseKind().(*kmsg.CreatePartitionsResponse)
	resp.SetVersion(r.GetVersion())
	seen := map[string]int{}
	for _, t := range r.Topics {
		seen[t.Topic]++
	}
	im := c.mu.pending
	var recs []metadata.Record
	used := 0
	for _, t := range r.Topics {
		rt := kmsg.NewCreatePartitionsResponseTopic()
		rt.Topic = t.Topic
		var err error
		var trecs []metadata.Record
		if seen[t.Topic] > 1 {
			err = errf(kerr.InvalidRequest, "topic %q given more than once", t.Topic)
		} else {
			trecs, err = c.createPartitionRecords(im, &t, &used)
		}
		if err == nil && !r.ValidateOnly {
			next, aerr := im.Apply(trecs...)
			if aerr != nil {
				err = errf(kerr.UnknownServerError, "recording partitions: %v", aerr)
			} else {
				im = next
				recs = append(recs, trecs...)
			}
		}
		rt.ErrorCode, rt.ErrorMessage = errCode(err), errMsg(err)
		resp.Topics = append(resp.Topics, rt)
	}
	if len(recs) == 0 {
		return &op{resp: resp}
	}
	return &op{recs: recs, finish: func(uint64) kmsg.Response { return resp }}
}

func (c *Controller) createPartitionRecords(im *metadata.Image, t *kmsg.CreatePartitionsRequestTopic, used *int) ([]metadata.Record, error) {
	ti, ok := im.Topic(t.Topic)
	if !ok {
		return nil, errf(kerr.UnknownTopicOrPartition, "topic %q does not exist", t.Topic)
	}
	have := int32(len(ti.Partitions))
	if t.Count <= have {
		return nil, errf(kerr.InvalidPartitions, "topic currently has %d partitions, which is higher than or equal to the requested %d", have, t.Count)
	}
	add := int(t.Count - have)
	if add > c.cfg.MaxPartitionsPerOp-*used {
		return nil, errf(kerr.PolicyViolation, "excessively large number of partitions per request: %d more (at most %d per request)", add, c.cfg.MaxPartitionsPerOp)
	}
	*used += add
	rf := 1
	if len(ti.Partitions) > 0 {
		p := ti.Partitions[0]
		rf = len(p.Replicas) - len(p.Removing)
	}
	var assignment [][]int32
	if t.Assignment != nil {
		if len(t.Assignment) != add {
			return nil, errf(kerr.InvalidReplicaAssignment, "increasing the number of partitions by %d but %d assignments provided", add, len(t.Assignment))
		}
		for _, a := range t.Assignment {
			assignment = append(assignment, slices.Clone(a.Replicas))
		}
		if err := ValidateAssignment(im, assignment, have, rf); err != nil {
			return nil, err
		}
	} else {
		a, err := PlaceReplicas(UsableBrokers(im), have, int32(add), int16(rf), placementStart(im))
		if err != nil {
			return nil, err
		}
		assignment = a
	}
	return NewPartitionRecords(im, ti.ID, have, assignment)
}
