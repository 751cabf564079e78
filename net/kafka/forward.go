package kafka

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/controller"
	"github.com/samsa-broker/samsa/coordinator/metadata"
)

// ControllerChannel sends a request to the active controller and returns its answer
// (coordinator/controller's ControllerChannel: net/peer's over the network,
// controller.LocalChannel to the node's own controller). It retries until ctx ends.
type ControllerChannel interface {
	Request(ctx context.Context, req kmsg.Request) (kmsg.Response, error)
}

// MetadataView is the broker's published metadata: coordinator/controller's
// MetadataFollower. Image returns
// the published image (never nil) and its metadata offset. The broker reads it once,
// at NewBroker; later images reach it through MetadataChanged.
type MetadataView interface {
	Image() (uint64, *metadata.Image)
}

// defaultForwardTimeout bounds a forwarded request whose API carries no timeout
// (Kafka's request.timeout.ms).
const defaultForwardTimeout = 30 * time.Second

// forwarded describes how one API is forwarded to the active controller.
type forwarded struct {
	// timeout is the request's own (TimeoutMillis) where it has one; <= 0: the default.
	timeout time.Duration
	// write: the request changes the metadata, so the answer waits until this broker's
	// image shows the change (syncMetadata).
	write bool
	// after, if set, runs on the controller's answer before it is sent (on the
	// forwarding goroutine).
	after func(resp kmsg.Response)
}

// forward sends r's request to the active controller and answers r with the
// controller's answer at the client's version, from a goroutine of its own (the
// controller answers once the change has committed, which the read path must not wait
// for). The request is sent in the shape of its newest version (normalizeForward), so
// the controller sees one shape whatever the client's version. A write is answered
// once this broker's published image is at least as new as the controller's commit
// (syncMetadata): a client that created a topic finds it in this broker's Metadata.
func (b *Broker) forward(r *Request, f forwarded) {
	req := r.Body
	normalizeForward(req)
	b.async(func(ctx context.Context) {
		timeout := f.timeout
		if timeout <= 0 {
			timeout = defaultForwardTimeout
		}
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		resp, err := b.ctrl.Request(ctx, req)
		if err != nil {
			code, msg := forwardError(err)
			b.log.Debug("forwarding to the controller failed", "api", kmsg.NameForKey(req.Key()), "err", err)
			resp = controller.ErrorResponse(req, code, msg)
		} else {
			if f.write {
				b.syncMetadata(ctx)
			}
			if f.after != nil {
				f.after(resp)
			}
		}
		r.Respond(resp)
	})
}

// forwardError maps a ControllerChannel error to a Kafka code and message.
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

// syncMetadata waits until this broker's published image has every change the active
// controller had committed when it answered: it asks the controller for its high
// watermark (DescribeQuorum) and waits for the image to reach it. On failure (ctx
// ended, no controller) it returns without waiting more: the write itself succeeded.
func (b *Broker) syncMetadata(ctx context.Context) {
	req := kmsg.NewPtrDescribeQuorumRequest()
	rt := kmsg.NewDescribeQuorumRequestTopic()
	rt.Topic = metadataTopic
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
	if err := b.awaitOffset(ctx, uint64(hw-1)); err != nil {
		b.log.Debug("metadata barrier: image behind the controller", "want", hw-1, "have", b.meta.Offset(), "err", err)
	}
}

// awaitOffset waits until the published image is at offset or later, or ctx ends. It
// wakes on MetadataChanged.
func (b *Broker) awaitOffset(ctx context.Context, offset uint64) error {
	for {
		ch := b.published.wait()
		if b.meta.Offset() >= offset {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// async runs fn on a goroutine the broker waits for in Close; fn's ctx ends when the
// broker closes. Once Close has begun waiting, fn does not run (an Add racing the
// WaitGroup's Wait is a data race).
func (b *Broker) async(fn func(ctx context.Context)) {
	b.asyncMu.Lock()
	if b.asyncDone {
		b.asyncMu.Unlock()
		return
	}
	b.wg.Add(1)
	b.asyncMu.Unlock()
	go func() {
		defer b.wg.Done()
		fn(b.ctx)
	}()
}
