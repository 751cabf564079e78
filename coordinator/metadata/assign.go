package metadata

import (
	"errors"
	"fmt"
	"slices"
)

var (
	// ErrInvalidPartitions: a partition count below one, or not above the current count.
	ErrInvalidPartitions = errors.New("metadata: invalid number of partitions")
	// ErrInvalidReplicationFactor: below one, or above the number of brokers.
	ErrInvalidReplicationFactor = errors.New("metadata: invalid replication factor")
)

// MaxPartitions bounds the partitions of one topic that the helpers below will build.
const MaxPartitions = 1 << 20

// AssignReplicas places partitions first..first+count-1 on brokers the simple way (rack
// awareness comes later): brokers sorted by id, partition i's j-th replica on broker
// (i + j) mod n. The first replica is the preferred leader.
func AssignReplicas(brokers []int32, first, count int32, replicationFactor int16) ([][]int32, error) {
	if count < 1 || first < 0 || int64(first)+int64(count) > MaxPartitions {
		return nil, fmt.Errorf("%w: %d partitions from %d", ErrInvalidPartitions, count, first)
	}
	ids := slices.Clone(brokers)
	slices.Sort(ids)
	ids = slices.Compact(ids)
	if replicationFactor < 1 || int(replicationFactor) > len(ids) {
		return nil, fmt.Errorf("%w: %d with %d brokers", ErrInvalidReplicationFactor, replicationFactor, len(ids))
	}
	n := len(ids)
	out := make([][]int32, count)
	for k := range out {
		i := int(first) + k
		reps := make([]int32, replicationFactor)
		for j := range reps {
			reps[j] = ids[(i+j)%n]
		}
		out[k] = reps
	}
	return out, nil
}

// PartitionRecords returns the records that create partitions first, first+1, ... of a
// topic with the given assignment: every replica in the ISR, the first one leading,
// leader epoch 0.
func PartitionRecords(topicID UUID, first int32, assignment [][]int32) []Record {
	out := make([]Record, 0, len(assignment))
	for k, reps := range assignment {
		out = append(out, &PartitionRecord{TopicID: topicID, Partition: first + int32(k),
			Replicas: reps, ISR: slices.Clone(reps), Leader: reps[0]})
	}
	return out
}

// CreateTopicRecords returns the records of a CreateTopics request: the topic, its
// partitions and its explicitly set configs (in key order). Append them together so the
// topic appears whole or not at all.
func CreateTopicRecords(name string, id UUID, assignment [][]int32, configs map[string]string) []Record {
	out := append(make([]Record, 0, 1+len(assignment)+len(configs)), &TopicRecord{Name: name, ID: id})
	out = append(out, PartitionRecords(id, 0, assignment)...)
	keys := make([]string, 0, len(configs))
	for k := range configs {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		out = append(out, &ConfigRecord{Resource: ResourceTopic, Name: name, Key: k, Value: StringPtr(configs[k])})
	}
	return out
}
