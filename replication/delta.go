package replication

import "github.com/samsa-broker/samsa/engine"

// PartitionState is what the committed metadata says of one partition that has a
// replica on this broker: its assignment, leadership and epochs, and the topic's
// settings a replica needs. The controller package builds it from a metadata image
// (this package knows no metadata types). Slices are owned by the receiver.
type PartitionState struct {
	Topic     string
	TopicID   [16]byte
	Partition int32

	Replicas []int32 // in preference order: Replicas[0] is the preferred leader
	ISR      []int32
	Adding   []int32 // replicas a reassignment is adding (nil: none)
	Removing []int32 // replicas a reassignment is removing (nil: none)

	Leader         int32 // -1: no leader
	LeaderEpoch    int32
	PartitionEpoch int32
	// LeaderRecovering: the leader was elected uncleanly (outside the ISR) and has not
	// yet recovered (Kafka's LeaderRecoveryState RECOVERING).
	LeaderRecovering bool

	MinISR    int              // min.insync.replicas of the topic
	LogConfig engine.LogConfig // the topic's log configuration (creating the log, changes)
	// StrictMinISR: the cluster keeps eligible leader replicas
	// (eligible.leader.replicas.version 1, KIP-966), so a leader moves its high
	// watermark only while its ISR holds at least min(MinISR, replicas) members: a
	// replica that leaves a smaller ISR then holds every committed record and may be
	// elected.
	StrictMinISR bool
}

// TP returns the state's topic-partition.
func (s *PartitionState) TP() engine.TopicPartition {
	return engine.TopicPartition{Topic: s.Topic, Partition: s.Partition}
}

// Stop ends this broker's replica of a partition: it was moved away (Delete false
// keeps the log until the topic is deleted or the replica is reassigned away for good,
// Kafka's StopReplica without deletion) or its topic was deleted / the replica removed
// (Delete true: the log is deleted).
type Stop struct {
	TP     engine.TopicPartition
	Delete bool
}

// Delta is what one metadata change asks of this broker's replicas, computed by the
// controller package from the images before and after it: partitions it now leads,
// partitions it now follows (or whose state changed while it keeps its role), and
// replicas to stop. A partition appears at most once. Manager.Apply applies Deltas in
// metadata-offset order; Offset is the metadata offset of the image that produced it.
type Delta struct {
	Offset    uint64
	Leaders   []PartitionState
	Followers []PartitionState
	Stopped   []Stop
}
