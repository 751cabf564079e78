package replication

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Sentinel errors. Callers test them with errors.Is; the net layer maps them to Kafka
// error codes (the Kafka name is given with each). Errors of the engine (an append
// refused, an I/O failure) are passed through unchanged, wrapped with %w.
var (
	// ErrNotLeader: this node does not lead the partition, or no longer in the leader
	// epoch a request was made in (NOT_LEADER_OR_FOLLOWER).
	ErrNotLeader = errors.New("replication: not the leader of the partition")
	// ErrUnknownPartition: this node has no replica of the partition
	// (UNKNOWN_TOPIC_OR_PARTITION).
	ErrUnknownPartition = errors.New("replication: no replica of the partition")
	// ErrFencedLeaderEpoch: a request named a leader epoch older than the partition's
	// (FENCED_LEADER_EPOCH).
	ErrFencedLeaderEpoch = errors.New("replication: fenced leader epoch")
	// ErrUnknownLeaderEpoch: a request named a leader epoch newer than the partition's
	// (UNKNOWN_LEADER_EPOCH).
	ErrUnknownLeaderEpoch = errors.New("replication: unknown leader epoch")
	// ErrNotEnoughReplicas: acks=all with fewer in-sync replicas than
	// min.insync.replicas; nothing was appended (NOT_ENOUGH_REPLICAS).
	ErrNotEnoughReplicas = errors.New("replication: not enough in-sync replicas")
	// ErrNotEnoughReplicasAfterAppend: the records were appended, but when the high
	// watermark passed them the ISR was smaller than min.insync.replicas
	// (NOT_ENOUGH_REPLICAS_AFTER_APPEND).
	ErrNotEnoughReplicasAfterAppend = errors.New("replication: not enough in-sync replicas after the append")
	// ErrTimeout: the high watermark did not pass an acks=all produce within its
	// timeout (REQUEST_TIMED_OUT).
	ErrTimeout = errors.New("replication: timed out waiting for the in-sync replicas")
	// ErrUnknownReplica: a follower fetch from a broker that is not a replica of the
	// partition (NOT_LEADER_OR_FOLLOWER, as Kafka answers).
	ErrUnknownReplica = errors.New("replication: fetch from a broker that is not a replica")
	// ErrStaleBrokerEpoch: a follower fetch carrying an older broker epoch than one
	// already seen from that broker: a fetch of a previous incarnation (KIP-903;
	// NOT_LEADER_OR_FOLLOWER, as Kafka answers).
	ErrStaleBrokerEpoch = errors.New("replication: fetch from a stale broker epoch")
	// ErrOffsetOutOfRange: a follower fetch offset below the log start or above the log
	// end (OFFSET_OUT_OF_RANGE).
	ErrOffsetOutOfRange = errors.New("replication: fetch offset out of range")
	// ErrOffsetMovedToTieredStorage: a follower fetch offset below the leader's
	// local log start but not below the whole log's start, on a tiered partition:
	// those records are in remote storage (OFFSET_MOVED_TO_TIERED_STORAGE; it wraps
	// kerr's, which the net layer answers as it is).
	ErrOffsetMovedToTieredStorage = fmt.Errorf("replication: fetch offset moved to tiered storage: %w", kerr.OffsetMovedToTieredStorage)
	// ErrInvalidAcks: a produce with acks other than 0, 1 and -1 (INVALID_REQUIRED_ACKS).
	ErrInvalidAcks = errors.New("replication: invalid required acks")
	// ErrInvalidConfig: a Config the Manager cannot run with.
	ErrInvalidConfig = errors.New("replication: invalid configuration")
)
