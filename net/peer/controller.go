package peer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/controller"
)

// ErrNotController: a voter answered NOT_CONTROLLER (no active controller yet, an
// election under way); it wraps controller.ErrNoController. A ControllerChannel
// retries it until its ctx ends.
var ErrNotController = fmt.Errorf("peer: voter is not the active controller: %w", controller.ErrNoController)

// ControllerChannel sends requests to the active controller (coordinator/controller's
// ControllerChannel): it tries the voter it last learned leads, then the others in id
// order, following NOT_CONTROLLER and broken connections, and after a round where
// none answered waits RetryBackoff and starts again, until ctx ends.
//
// A request whose connection broke after it was written may have been applied by the
// old controller; its retry then sees the result (TOPIC_ALREADY_EXISTS for a
// CreateTopics), as with Kafka's forwarding.
type ControllerChannel struct {
	c *Client
}

// ControllerChannel returns the client's channel to the active controller.
func (c *Client) ControllerChannel() *ControllerChannel { return &ControllerChannel{c: c} }

var _ controller.ControllerChannel = (*ControllerChannel)(nil)

// Request implements coordinator/controller.ControllerChannel. The response is the
// active controller's, at the version it was sent (req's Version is set to it).
func (ch *ControllerChannel) Request(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	return ch.c.toVoters(ctx, PurposeController, req, controller.NotController)
}

// toVoters sends req to the voter last learned to lead, else to the voters in id
// order, round after round (RetryBackoff apart), until one answers with a response
// refused is false for (refused nil: any response), or ctx ends. A voter that answers
// (and is not refused) becomes the leader hint when refused is set.
func (c *Client) toVoters(ctx context.Context, purpose Purpose, req kmsg.Request, refused func(kmsg.Response) bool) (kmsg.Response, error) {
	if len(c.voterIDs) == 0 {
		return nil, fmt.Errorf("%w: no voters configured (controller.quorum.voters)", ErrUnknownNode)
	}
	var lastErr error
	for {
		for _, v := range c.voterOrder() {
			resp, err := c.Request(ctx, Voter(v), purpose, req)
			if ctx.Err() != nil {
				return nil, errors.Join(ctx.Err(), lastErr)
			}
			if errors.Is(err, ErrClosed) {
				return nil, err
			}
			if err != nil {
				c.leader.clearIf(v)
				lastErr = err
				continue
			}
			if refused == nil {
				return resp, nil
			}
			if refused(resp) {
				c.leader.clearIf(v)
				lastErr = fmt.Errorf("%w: voter %d", ErrNotController, v)
				continue
			}
			c.leader.set(v)
			return resp, nil
		}
		t := time.NewTimer(c.cfg.RetryBackoff)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, errors.Join(ctx.Err(), lastErr)
		case <-c.ctx.Done():
			t.Stop()
			return nil, ErrClosed
		}
	}
}

// voterOrder is the order of one round: the known leader first, then the others by id.
func (c *Client) voterOrder() []int32 {
	order := make([]int32, 0, len(c.voterIDs))
	if l := c.leader.get(); l >= 0 {
		order = append(order, l)
	}
	for _, v := range c.voterIDs {
		if len(order) == 0 || order[0] != v {
			order = append(order, v)
		}
	}
	return order
}
