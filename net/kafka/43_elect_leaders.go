// ElectLeaders (key 43), versions 0-2.
//
// Forwarded to the active controller and answered with its result once this broker's
// image has the new leaders. ElectionType (v1+) 0 elects the preferred replica (the
// first of the assignment) where it is in the ISR and not already leading
// (ELECTION_NOT_NEEDED when it leads, PREFERRED_LEADER_NOT_AVAILABLE when it cannot);
// 1 elects any live replica for partitions without a leader, outside the ISR if need
// be (unclean; ELECTION_NOT_NEEDED when the partition has a leader). Topics == null
// means every partition. Unknown partitions: UNKNOWN_TOPIC_OR_PARTITION.
// TimeoutMillis bounds the wait for the controller; v1+ carries a top-level error code
// for errors of the whole request.
//
// Differences from Apache Kafka: none known.

package kafka

import (
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	register(API{Key: 43, MinVersion: 0, MaxVersion: 2, Handle: handleElectLeaders})
}

func handleElectLeaders(b *Broker, r *Request) {
	req := r.Body.(*kmsg.ElectLeadersRequest)
	b.forward(r, forwarded{timeout: time.Duration(req.TimeoutMillis) * time.Millisecond, write: true})
}
