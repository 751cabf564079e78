// AddRaftVoter (key 80) on a broker listener: forwarded to the active controller, as
// Kafka's brokers do. The controller listener serves it (net/controllerapi, whose
// file of the same name says how, and where Samsa differs from Kafka).

package kafka

import (
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	register(API{Key: 80, MinVersion: 0, MaxVersion: 1, Handle: handleAddRaftVoter})
}

func handleAddRaftVoter(b *Broker, r *Request) {
	req := r.Body.(*kmsg.AddRaftVoterRequest)
	b.forward(r, forwarded{timeout: time.Duration(req.TimeoutMillis) * time.Millisecond, write: true})
}
