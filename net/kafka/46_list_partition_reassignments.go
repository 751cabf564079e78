// ListPartitionReassignments (key 46), version 0.
//
// Forwarded to the active controller, which answers from its image: every partition
// with a reassignment in progress (Topics == null), or those asked for, with its
// replicas and the replicas being added and removed. Partitions without a reassignment
// are left out. TimeoutMillis bounds the wait for the controller.
//
// Differences from Apache Kafka: none known.

package kafka

import (
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	register(API{Key: 46, MinVersion: 0, MaxVersion: 0, Handle: handleListPartitionReassignments})
}

func handleListPartitionReassignments(b *Broker, r *Request) {
	req := r.Body.(*kmsg.ListPartitionReassignmentsRequest)
	b.forward(r, forwarded{timeout: time.Duration(req.TimeoutMillis) * time.Millisecond})
}
