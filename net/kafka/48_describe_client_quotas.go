// DescribeClientQuotas (key 48), versions 0-1 (KIP-546).
//
// Answered from this broker's image, as Kafka's brokers answer it: the entities
// (user, client-id, ip; by name or default) matching the filter components (exact
// name, default, or any entity of the type; strict leaves out entities with other
// types) with their quota keys and values. A malformed filter (an unknown entity
// type, a type given twice, ip with user or client-id) is INVALID_REQUEST. Needs
// DESCRIBE_CONFIGS on the cluster (its row, net/authz).

package kafka

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/controller"
)

func init() {
	register(API{Key: 48, MinVersion: 0, MaxVersion: 1, Handle: handleDescribeClientQuotas})
}

func handleDescribeClientQuotas(b *Broker, r *Request) {
	_, im := b.Image()
	r.Respond(controller.DescribeQuotasResponse(im, r.Body.(*kmsg.DescribeClientQuotasRequest)))
}
