package broker

import (
	"context"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// pidBlock hands out producer ids from blocks the active controller allocates
// (AllocateProducerIds, recorded in the metadata log), so an id is never handed out
// twice, across restarts too (Kafka's ProducerIdManager). get may block on the
// controller: call it off the read path.
type pidBlock struct {
	mu        sync.Mutex
	next, end int64
}

func (p *pidBlock) get(b *Broker) (int64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.next >= p.end {
		first, n, err := b.allocateProducerIDs()
		if err != nil {
			return 0, err
		}
		p.next, p.end = first, first+n
	}
	id := p.next
	p.next++
	return id, nil
}

// producerID is the next producer id of the broker's block: InitProducerId's for
// idempotent producers (kafka.Deps.ProducerIDs) and the transaction coordinator's.
func (b *Broker) producerID() (int64, error) { return b.pids.get(b) }

// allocateProducerIDs asks the active controller for a block of producer ids for this
// broker and returns its first id and length.
func (b *Broker) allocateProducerIDs() (first, n int64, err error) {
	ctx, cancel := context.WithTimeout(b.ctx, forwardTimeout)
	defer cancel()
	req := kmsg.NewPtrAllocateProducerIDsRequest()
	req.BrokerID, req.BrokerEpoch = b.cfg.NodeID, b.brokerEpoch()
	resp, err := b.ctrl.Request(ctx, req)
	if err != nil {
		return 0, 0, fmt.Errorf("broker: allocating producer ids: %w", err)
	}
	ar := resp.(*kmsg.AllocateProducerIDsResponse)
	if ar.ErrorCode != 0 {
		return 0, 0, fmt.Errorf("broker: allocating producer ids: %w", kerr.ErrorForCode(ar.ErrorCode))
	}
	if ar.ProducerIDStart < 0 || ar.ProducerIDLen <= 0 {
		return 0, 0, fmt.Errorf("broker: allocating producer ids: block of %d from %d", ar.ProducerIDLen, ar.ProducerIDStart)
	}
	return ar.ProducerIDStart, int64(ar.ProducerIDLen), nil
}

// brokerEpoch is this broker's registration epoch in the published image (-1 when it
// is not registered).
func (b *Broker) brokerEpoch() int64 {
	if bi, ok := b.meta.Image().Broker(b.cfg.NodeID); ok {
		return bi.Epoch
	}
	return -1
}
