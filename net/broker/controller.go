package broker

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/net/peer"
)

// forwardTimeout bounds a request the broker sends the active controller on its own
// (a topic's creation, a producer-id block; Kafka's request.timeout.ms).
const forwardTimeout = 30 * time.Second

// forwarder is kafka.Controller over the broker's controller channel: requests go to
// the active controller, and Sync waits for the image to catch up with its commit.
type forwarder struct{ b *Broker }

func (f forwarder) Request(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	return f.b.ctrl.Request(ctx, req)
}

// Sync waits until this broker's published image has every change the active
// controller had committed when it answered: it asks the controller for its high
// watermark (DescribeQuorum) and waits for the image to reach it. On failure (ctx
// ended, no controller) it returns without waiting more: the write itself succeeded.
func (f forwarder) Sync(ctx context.Context) {
	b := f.b
	req := kmsg.NewPtrDescribeQuorumRequest()
	rt := kmsg.NewDescribeQuorumRequestTopic()
	rt.Topic = peer.MetadataTopic
	rt.Partitions = []kmsg.DescribeQuorumRequestTopicPartition{{Partition: 0}}
	req.Topics = []kmsg.DescribeQuorumRequestTopic{rt}
	req.SetVersion(req.MaxVersion())
	resp, err := b.ctrl.Request(ctx, req)
	if err != nil {
		b.log.Debug("metadata barrier: no high watermark", "err", err)
		return
	}
	dq := resp.(*kmsg.DescribeQuorumResponse)
	if dq.ErrorCode != 0 || len(dq.Topics) != 1 || len(dq.Topics[0].Partitions) != 1 {
		b.log.Debug("metadata barrier: no high watermark", "code", dq.ErrorCode)
		return
	}
	hw := dq.Topics[0].Partitions[0].HighWatermark
	if hw <= 0 {
		return
	}
	if err := b.meta.Wait(ctx, uint64(hw-1)); err != nil {
		b.log.Debug("metadata barrier: image behind the controller", "want", hw-1, "have", b.meta.Offset(), "err", err)
	}
}
