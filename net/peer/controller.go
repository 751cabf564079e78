package peer

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/controller"
)

// ErrNotController: a voter answered NOT_CONTROLLER (no active controller yet, an
// election under way); it wraps controller.ErrNoController. A ControllerChannel
// retries it until its ctx ends.
var ErrNotController = fmt.Errorf("peer: voter is not the active controller: %w", controller.ErrNoController)

// ControllerChannel sends requests to the active controller (coordinator/controller's
// ControllerChannel): it tries the voter it last learned leads, then the others in id
// order (voters that left a request unanswered last: see leaderHint), following
// NOT_CONTROLLER and broken connections, and after a round where none answered waits
// RetryBackoff and starts again, until ctx ends.
//
// A request whose connection broke after it was written may have been applied by the
// old controller; its retry then sees the result (TOPIC_ALREADY_EXISTS for a
// CreateTopics), as with Kafka's forwarding. The channel of forwarded requests waits
// for each voter as long as ctx allows (a CreateTopics is not sent twice because a
// commit was slow); the heartbeat channel moves on after VoterTimeout.
type ControllerChannel struct {
	c       *Client
	purpose Purpose
	attempt time.Duration // per voter (0: as long as ctx allows)
}

// ControllerChannel returns the client's channel to the active controller for
// forwarded requests (purpose controller).
func (c *Client) ControllerChannel() *ControllerChannel {
	return &ControllerChannel{c: c, purpose: PurposeController}
}

// HeartbeatChannel returns the channel of the broker lifecycle (registration and
// heartbeats), on a connection of its own (purpose heartbeat): no forwarded request
// delays a heartbeat, and the active controller learns that the broker is gone when
// that connection closes. A voter that has not answered within VoterTimeout is left
// for the next (a heartbeat may be sent again).
func (c *Client) HeartbeatChannel() *ControllerChannel {
	return &ControllerChannel{c: c, purpose: PurposeHeartbeat, attempt: c.cfg.VoterTimeout}
}

var _ controller.ControllerChannel = (*ControllerChannel)(nil)

// Request implements coordinator/controller.ControllerChannel. The response is the
// active controller's, at the version it was sent (req's Version is set to it).
func (ch *ControllerChannel) Request(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	return ch.c.toVoters(ctx, ch.purpose, req, controller.NotController, ch.attempt)
}

// toVoters sends req to the voter last learned to lead, else to the voters in the
// hint's order, round after round (RetryBackoff apart), until one answers with a
// response refused is false for (refused nil: any response), or ctx ends. Each voter
// is given attempt (plus the long poll req asks for; 0: until ctx ends). A voter
// that answers (and is not refused) becomes the leader hint when refused is set; one
// that does not answer in time, or whose connection fails, is suspected (asked last).
// Before the first round of a client configured with bootstrap servers only, the
// voters are asked of them.
func (c *Client) toVoters(ctx context.Context, purpose Purpose, req kmsg.Request, refused func(kmsg.Response) bool, attempt time.Duration) (kmsg.Response, error) {
	var lastErr error
	for {
		vs := c.voters.Load()
		if vs == nil {
			var err error
			if vs, err = c.discoverVoters(ctx); err != nil {
				if errors.Is(err, ErrClosed) {
					return nil, err
				}
				if done := callerDone(ctx); done != nil {
					return nil, errors.Join(done, lastErr, err)
				}
				lastErr = err
			}
		}
		if vs != nil && len(vs.ids) == 0 {
			return nil, fmt.Errorf("%w: no voters configured (controller.quorum.voters)", ErrUnknownNode)
		}
		if vs != nil {
			for _, v := range c.leader.order(vs.ids) {
				resp, err := c.attemptVoter(ctx, v, purpose, req, attempt)
				if errors.Is(err, ErrClosed) {
					return nil, err
				}
				if err != nil {
					c.leader.unanswered(v)
					if done := callerDone(ctx); done != nil {
						// err is the deadline's, not the voter's: the error of
						// an earlier attempt says more.
						return nil, errors.Join(done, lastErr, err)
					}
					lastErr = err
					continue
				}
				c.leader.answered(v)
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

// attemptVoter sends req to voter v, waiting at most attempt (plus its long poll)
// when attempt > 0.
func (c *Client) attemptVoter(ctx context.Context, v int32, purpose Purpose, req kmsg.Request, attempt time.Duration) (kmsg.Response, error) {
	if attempt <= 0 {
		return c.Request(ctx, Voter(v), purpose, req)
	}
	bound := attempt + longPoll(req)
	actx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	resp, err := c.Request(actx, Voter(v), purpose, req)
	if err != nil && ctx.Err() == nil && actx.Err() != nil {
		err = fmt.Errorf("%w: voter %d did not answer %s within %v", ErrTimeout, v, kmsg.NameForKey(req.Key()), bound)
	}
	return resp, err
}

// discoverVoters asks the bootstrap servers, in order, for the voters
// (DescribeCluster with EndpointType 2) and keeps the first answer.
func (c *Client) discoverVoters(ctx context.Context) (*voterSet, error) {
	if len(c.cfg.BootstrapServers) == 0 {
		return nil, fmt.Errorf("%w: no voters configured (controller.quorum.voters)", ErrUnknownNode)
	}
	var errs []error
	for i, addr := range c.cfg.BootstrapServers {
		req := kmsg.NewPtrDescribeClusterRequest()
		req.EndpointType = 2
		to := Target{Node: int32(i), Role: roleBootstrap}
		resp, err := c.attemptBootstrap(ctx, to, req)
		if errors.Is(err, ErrClosed) {
			return nil, err
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", addr, err))
			continue
		}
		r := resp.(*kmsg.DescribeClusterResponse)
		switch {
		case r.ErrorCode != 0:
			err = fmt.Errorf("%s: DescribeCluster: %w", addr, kerr.ErrorForCode(r.ErrorCode))
		case c.cfg.ClusterID != "" && r.ClusterID != c.cfg.ClusterID:
			err = fmt.Errorf("%w: %s is a controller of cluster %q, not %q", ErrWrongNode, addr, r.ClusterID, c.cfg.ClusterID)
		case len(r.Brokers) == 0:
			err = fmt.Errorf("%s: DescribeCluster named no voters", addr)
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		addrs := map[int32]string{}
		for _, b := range r.Brokers {
			if b.NodeID < 0 || b.Port <= 0 || b.Port > 65535 || b.Host == "" {
				err = fmt.Errorf("%w: %s named voter %d at %s:%d", ErrMalformedResponse, addr, b.NodeID, b.Host, b.Port)
				break
			}
			addrs[b.NodeID] = net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		vs := newVoterSet(addrs)
		if c.voters.CompareAndSwap(nil, vs) {
			c.log.Info("learned the controller quorum's voters from controller.quorum.bootstrap.servers", "from", addr, "voters", vs.String())
		}
		c.closeBootstrapSlots()
		return c.voters.Load(), nil
	}
	return nil, fmt.Errorf("%w: no server of controller.quorum.bootstrap.servers (%s) named the voters: %w",
		ErrUnknownNode, strings.Join(c.cfg.BootstrapServers, ","), errors.Join(errs...))
}

// attemptBootstrap sends req to a bootstrap server, waiting at most VoterTimeout.
func (c *Client) attemptBootstrap(ctx context.Context, to Target, req kmsg.Request) (kmsg.Response, error) {
	actx, cancel := context.WithTimeout(ctx, c.cfg.VoterTimeout)
	defer cancel()
	return c.Request(actx, to, purposeBootstrap, req)
}

// closeBootstrapSlots closes the connections to the bootstrap servers, which are not
// used once the voters are known.
func (c *Client) closeBootstrapSlots() {
	c.mu.Lock()
	var slots []*slot
	for k, s := range c.mu.slots {
		if k.to.Role == roleBootstrap {
			slots = append(slots, s)
			delete(c.mu.slots, k)
		}
	}
	c.mu.Unlock()
	for _, s := range slots {
		s.close()
	}
}
