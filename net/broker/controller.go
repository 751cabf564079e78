package broker

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/controller"
	"github.com/samsa-broker/samsa/net/peer"
)

// forwardTimeout bounds a request the broker sends the active controller on its own
// (a topic's creation, a producer-id block; Kafka's request.timeout.ms).
const forwardTimeout = 30 * time.Second

// forwarder is kafka.Controller over the broker's controller channel (Kafka's
// ForwardingManager): requests go to the active controller in the shape of their
// newest version, a failure is answered in the request's own kind, and a write waits
// for the image to catch up with the controller's commit (Sync).
type forwarder struct{ b *Broker }

// Forward implements kafka.Controller.
func (f forwarder) Forward(ctx context.Context, req kmsg.Request, write bool) kmsg.Response {
	normalizeForward(req)
	resp, err := f.b.ctrl.Request(ctx, req)
	if err != nil {
		code, msg := forwardError(err)
		f.b.log.Debug("forwarding to the controller failed", "api", kmsg.NameForKey(req.Key()), "err", err)
		return controller.ErrorResponse(req, code, msg)
	}
	if write {
		f.Sync(ctx)
	}
	return resp
}

// forwardError maps a failure to reach the active controller to the Kafka code and
// message a request sent to it is answered with.
func forwardError(err error) (int16, string) {
	msg := err.Error()
	var ke *kerr.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return kerr.RequestTimedOut.Code, msg
	case errors.Is(err, context.Canceled):
		return kerr.NotController.Code, msg // the broker is shutting down: look elsewhere
	case errors.As(err, &ke):
		return ke.Code, msg
	default:
		return kerr.NotController.Code, msg
	}
}

// normalizeForward puts a request into the shape of its newest version: the fields an
// older version spells differently move to where the newest keeps them (DeleteTopics
// names before v6), and the version is set to the newest kmsg knows. Every other
// forwarded API's older versions are subsets of its newest, with the defaults kmsg
// fills in for absent fields.
func normalizeForward(req kmsg.Request) {
	if d, ok := req.(*kmsg.DeleteTopicsRequest); ok && d.Version < 6 {
		d.Topics = make([]kmsg.DeleteTopicsRequestTopic, len(d.TopicNames))
		for i := range d.TopicNames {
			d.Topics[i].Topic = &d.TopicNames[i]
		}
		d.TopicNames = nil
	}
	req.SetVersion(req.MaxVersion())
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
