package kafka

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/controller"
)

// Controller is the active controller as handlers reach it (the node's assembly,
// net/broker, over its controller channel: net/peer's, or controller.LocalChannel to
// the node's own controller). Request sends req and returns the answer, retrying
// until ctx ends. Sync waits until the image handlers answer from has every change
// the active controller had committed when asked: after a write, so that a client
// that created a topic finds it in this broker's Metadata; on failure (ctx ended, no
// controller) it returns without waiting more.
type Controller interface {
	Request(ctx context.Context, req kmsg.Request) (kmsg.Response, error)
	Sync(ctx context.Context)
}

// defaultForwardTimeout bounds a forwarded request whose API carries no timeout
// (Kafka's request.timeout.ms).
const defaultForwardTimeout = 30 * time.Second

// forwarded describes how one API is forwarded to the active controller.
type forwarded struct {
	// timeout is the request's own (TimeoutMillis) where it has one; <= 0: the default.
	timeout time.Duration
	// write: the request changes the metadata, so the answer waits until this broker's
	// image shows the change (Controller.Sync).
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
// (Controller.Sync): a client that created a topic finds it in this broker's Metadata.
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
			code, msg := ForwardError(err)
			b.log.Debug("forwarding to the controller failed", "api", kmsg.NameForKey(req.Key()), "err", err)
			resp = controller.ErrorResponse(req, code, msg)
		} else {
			if f.write {
				b.ctrl.Sync(ctx)
			}
			if f.after != nil {
				f.after(resp)
			}
		}
		r.Respond(resp)
	})
}

// ForwardError maps a Controller error to the Kafka code and message a request sent to
// the active controller is answered with.
func ForwardError(err error) (int16, string) {
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
