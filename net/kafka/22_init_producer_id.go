// InitProducerId (key 22), versions 0-5, for idempotent and transactional producers.
//
// With a transactional id the request goes to the transaction coordinator
// (coordinator/txn's InitProducerID, from a goroutine of its own: a new id may wait for
// a producer-id block): NOT_COORDINATOR unless this broker leads the id's
// __transaction_state partition, a new producer id or the epoch bumped (fencing the
// previous producer of the id, aborting its open transaction: CONCURRENT_TRANSACTIONS
// until that abort is done), PRODUCER_FENCED (INVALID_PRODUCER_EPOCH before v4) for a
// KIP-360 retry naming a stale epoch; answered once the new state is durable in
// __transaction_state (acks=all).
//
// Without a transactional id the request is accepted blindly, as Kafka does: a new
// producer id with epoch 0 (also when v3+ names an existing id and epoch: a fresh id
// is the simplest correct epoch bump for a non-transactional producer). Ids come from
// blocks of 1000 that the active controller hands out (AllocateProducerIds, key 67) and
// records in the metadata log, so an id is never handed out twice in the cluster,
// across restarts too. When the broker's block is used up the request waits for the
// next block on a goroutine of its own; COORDINATOR_NOT_AVAILABLE when the controller
// cannot be reached.
//
// Differences from Apache Kafka: no authorization (WRITE on the transactional id,
// IDEMPOTENT_WRITE on the cluster) is checked.

package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/net/authz"
)

func init() {
	register(API{Key: 22, MinVersion: 0, MaxVersion: 5, Handle: handleInitProducerID, Authz: authz.InitProducerID})
}

func handleInitProducerID(b *Broker, r *Request) {
	req := r.Body.(*kmsg.InitProducerIDRequest)
	resp := r.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if req.TransactionalID != nil {
		b.async(func(context.Context) {
			c := b.txnCoordinatorOr(func(code int16) {
				resp.ErrorCode = code
				r.Respond(resp)
			})
			if c != nil {
				c.InitProducerID(req, func(resp *kmsg.InitProducerIDResponse) { r.Respond(resp) })
			}
		})
		return
	}
	b.async(func(context.Context) {
		id, err := b.pids()
		if err != nil {
			b.log.Error("allocating producer ids", "err", err)
			resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
			r.Respond(resp)
			return
		}
		resp.ProducerID, resp.ProducerEpoch = id, 0
		r.Respond(resp)
	})
}
