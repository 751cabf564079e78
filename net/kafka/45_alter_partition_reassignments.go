// AlterPartitionReassignments (key 45), versions 0-1.
//
// Forwarded to the active controller and answered with its result once this broker's
// image has the change. Per partition, Replicas is the target assignment (the adding
// replicas full-sync, join the ISR, then the removed ones leave: the controller drives
// the steps as ISR changes commit); null Replicas cancels a reassignment in progress
// (NO_REASSIGNMENT_IN_PROGRESS when there is none). Unknown partitions:
// UNKNOWN_TOPIC_OR_PARTITION; brokers that are not registered, duplicates or an empty
// list: INVALID_REPLICA_ASSIGNMENT; v1's AllowReplicationFactorChange false refuses a
// target of another size (INVALID_REPLICATION_FACTOR). TimeoutMillis bounds the wait
// for the controller.
//
// Differences from Apache Kafka: none known.

package kafka

import (
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	register(API{Key: 45, MinVersion: 0, MaxVersion: 1, Handle: handleAlterPartitionReassignments})
}

func handleAlterPartitionReassignments(b *Broker, r *Request) {
	req := r.Body.(*kmsg.AlterPartitionAssignmentsRequest)
	b.forward(r, forwarded{timeout: time.Duration(req.TimeoutMillis) * time.Millisecond, write: true})
}
