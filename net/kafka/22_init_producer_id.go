// InitProducerId (key 22), versions 0-5, for idempotent producers.
//
// Without a transactional id the request is accepted blindly, as Kafka does: a new
// producer id with epoch 0 (also when v3+ names an existing id and epoch: a fresh id
// is the simplest correct epoch bump for a non-transactional producer). Ids come from
// blocks of 1000 that the metadata store allocates durably, so an id is never handed
// out twice, across restarts too.
//
// Differences from Apache Kafka: transactions are not served. A transactional id is
// answered TRANSACTIONAL_ID_AUTHORIZATION_FAILED (fatal for the client, so a
// transactional producer fails fast instead of retrying forever).
package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	register(API{Key: 22, MinVersion: 0, MaxVersion: 5, Handle: handleInitProducerID})
}

func handleInitProducerID(b *Broker, r *Request) {
	req := r.Body.(*kmsg.InitProducerIDRequest)
	resp := r.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if req.TransactionalID != nil {
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		r.Respond(resp)
		return
	}
	id, err := b.data().pids.get(b)
	if err != nil {
		b.log.Error("allocating producer ids", "err", err)
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		r.Respond(resp)
		return
	}
	resp.ProducerID, resp.ProducerEpoch = id, 0
	r.Respond(resp)
}

// pidBlockSize is Kafka's producer-id block size.
const pidBlockSize = 1000

// allocateProducerIDs takes a block of producer ids for this broker and returns its
// first id and length.
func (b *Broker) allocateProducerIDs() (first, n int64, err error) {
	first, err = b.meta.AllocateProducerIDs(b.cfg.NodeID, pidBlockSize)
	return first, pidBlockSize, err
}
