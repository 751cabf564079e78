package kafka

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Controller is the active controller as handlers reach it (the node's assembly,
// net/broker: Kafka's ForwardingManager over its controller channel). Forward sends
// req to it in the shape of its newest version and returns its answer, retrying until
// ctx ends; when none came, an answer of req's kind carrying the error
// (REQUEST_TIMED_OUT when ctx ended, NOT_CONTROLLER when no controller answered). With
// write, the answer is returned once the image handlers answer from has every change
// the active controller had committed when it answered, so that a client that created
// a topic finds it in this broker's Metadata.
type Controller interface {
	Forward(ctx context.Context, req kmsg.Request, write bool) kmsg.Response
}

// defaultForwardTimeout bounds a forwarded request whose API carries no timeout
// (Kafka's request.timeout.ms).
const defaultForwardTimeout = 30 * time.Second

// forwarded describes how one API is forwarded to the active controller.
type forwarded struct {
	// timeout is the request's own (TimeoutMillis) where it has one; <= 0: the default.
	timeout time.Duration
	// write: the request changes the metadata, so the answer waits until this broker's
	// image shows the change.
	write bool
	// after, if set, runs on the controller's answer before it is sent (on the
	// forwarding goroutine).
	after func(resp kmsg.Response)
}

// forward sends r's request to the active controller (Controller.Forward) and answers
// r with the controller's answer at the client's version, from a goroutine of its own
// (the controller answers once the change has committed, which the read path must not
// wait for).
func (b *Broker) forward(r *Request, f forwarded) {
	b.async(func(ctx context.Context) {
		timeout := f.timeout
		if timeout <= 0 {
			timeout = defaultForwardTimeout
		}
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		resp := b.ctrl.Forward(ctx, r.Body, f.write)
		if f.after != nil {
			f.after(resp)
		}
		r.Respond(resp)
	})
}
