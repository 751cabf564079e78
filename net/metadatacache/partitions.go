package metadatacache

import (
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/samsa-broker/samsa/coordinator/metadata"
	"github.com/samsa-broker/samsa/engine"
	"github.com/samsa-broker/samsa/replication"
)

// Partitions resolves the partitions of data-path requests: the published image
// (Deps.View) names the leader, the replica manager (Deps.Replicas) holds this node's
// replica and its log. It only reads: no replica or log is created here. Safe from
// any goroutine.
type Partitions struct {
	NodeID int32
	View   *View
	Repl   *replication.Manager
}

// Partition is a partition resolved for a data-path request.
type Partition struct {
	Topic *metadata.TopicImage
	Index int32
	Image metadata.PartitionImage
	// Rep is this node's leader replica of the partition (replication owns it and its
	// log: it created both from a metadata delta), and Log its log.
	Rep *replication.Partition
	Log *engine.Log
}

// Lookup resolves topic/partition against the published image and returns
// this node's leader replica of it and its log. The replica manager applies an image
// before the broker publishes it (MetadataChanged), so a partition the image has this
// node lead has its replica and log already; no log is created here. The error is a
// Kafka error (*kerr.Error): UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER (this
// node does not lead it, or the replica manager is already past the image: the
// returned Partition's Image names the leader and its epoch, for KIP-951's
// CurrentLeader, and LeaderEndpoint its address), KAFKA_STORAGE_ERROR (the image has
// this node lead it but its log could not be opened).
func (ps Partitions) Lookup(topic string, partition int32) (Partition, error) {
	t, ok := ps.View.Image().Topic(topic)
	if !ok {
		return Partition{}, kerr.UnknownTopicOrPartition
	}
	return ps.of(t, partition)
}

// LookupByID is Lookup by topic id (UNKNOWN_TOPIC_ID when unknown).
func (ps Partitions) LookupByID(id metadata.UUID, partition int32) (Partition, error) {
	t, ok := ps.View.Image().TopicByID(id)
	if !ok {
		return Partition{}, kerr.UnknownTopicID
	}
	return ps.of(t, partition)
}

func (ps Partitions) of(t *metadata.TopicImage, partition int32) (Partition, error) {
	if partition < 0 || int(partition) >= len(t.Partitions) {
		return Partition{}, kerr.UnknownTopicOrPartition
	}
	p := Partition{Topic: t, Index: partition, Image: t.Partitions[partition]}
	if p.Image.Leader != ps.NodeID {
		return p, kerr.NotLeaderForPartition
	}
	rp := ps.Repl.Partition(engine.TopicPartition{Topic: t.Name, Partition: partition})
	switch {
	case rp == nil || rp.TopicID() != [16]byte(t.ID):
		return p, kerr.KafkaStorageError
	case rp.Role() != replication.RoleLeader:
		return p, kerr.NotLeaderForPartition
	case rp.EngineLog() == nil:
		return p, kerr.KafkaStorageError
	}
	p.Rep, p.Log = rp, rp.EngineLog()
	return p, nil
}

// Leader returns this node's leader replica of p, resolved by Lookup, while it still
// leads it (NOT_LEADER_OR_FOLLOWER once another broker does).
func (p *Partition) Leader() (*replication.Partition, *kerr.Error) {
	if p.Rep == nil {
		return nil, kerr.KafkaStorageError
	}
	if p.Rep.Role() != replication.RoleLeader {
		return nil, kerr.NotLeaderForPartition
	}
	return p.Rep, nil
}

// LeaderOf returns the leader and leader epoch to tell a client that asked this node
// for tp (KIP-951): replication's view when it has a replica, else the image's.
func (ps Partitions) LeaderOf(tp engine.TopicPartition, im metadata.PartitionImage) (int32, int32) {
	if rp := ps.Repl.Partition(tp); rp != nil && rp.Role() != replication.RoleLeader {
		if id, epoch := rp.Leader(); epoch >= 0 {
			return id, epoch
		}
	}
	return im.Leader, im.LeaderEpoch
}
