package peer

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Fetcher sends a replica fetcher's requests to one source broker (the partitions'
// leader) on the fetcher's own connection: replication's FetchClient on the wire.
// Requests go at the highest version both sides serve (Fetch v13+ names topics by id:
// fill both Topic and TopicID), with Fetch's MaxWaitMillis added to the request
// timeout.
type Fetcher struct {
	c       *Client
	source  int32
	purpose Purpose
}

// Fetcher returns fetcher index's client for source broker (index < num.replica.fetchers).
func (c *Client) Fetcher(source int32, index int) *Fetcher {
	return &Fetcher{c: c, source: source, purpose: FetchPurpose(index)}
}

// Source is the broker the fetcher reads from.
func (f *Fetcher) Source() int32 { return f.source }

// Fetch sends a follower's Fetch to the source broker.
func (f *Fetcher) Fetch(ctx context.Context, req *kmsg.FetchRequest) (*kmsg.FetchResponse, error) {
	resp, err := f.c.Request(ctx, Broker(f.source), f.purpose, req)
	if err != nil {
		return nil, err
	}
	return resp.(*kmsg.FetchResponse), nil
}

// OffsetForLeaderEpoch asks the source broker where the follower's epochs end on the
// leader (for logs that have no epoch to send in Fetch).
func (f *Fetcher) OffsetForLeaderEpoch(ctx context.Context, req *kmsg.OffsetForLeaderEpochRequest) (*kmsg.OffsetForLeaderEpochResponse, error) {
	resp, err := f.c.Request(ctx, Broker(f.source), f.purpose, req)
	if err != nil {
		return nil, err
	}
	return resp.(*kmsg.OffsetForLeaderEpochResponse), nil
}

// ISRClient sends a partition leader's AlterPartition to the active controller, on a
// connection of its own (an ISR change does not wait behind a forwarded CreateTopics):
// replication's ISRClient on the wire. Like ControllerChannel it follows
// NOT_CONTROLLER and retries until ctx ends.
type ISRClient struct {
	c *Client
}

// ISRClient returns the client's AlterPartition sender.
func (c *Client) ISRClient() *ISRClient { return &ISRClient{c: c} }

// AlterPartition sends req to the active controller and returns its answer.
func (ic *ISRClient) AlterPartition(ctx context.Context, req *kmsg.AlterPartitionRequest) (*kmsg.AlterPartitionResponse, error) {
	resp, err := ic.c.toVoters(ctx, PurposeISR, req, notController)
	if err != nil {
		return nil, err
	}
	r, ok := resp.(*kmsg.AlterPartitionResponse)
	if !ok {
		return nil, fmt.Errorf("%w: %T for AlterPartition", ErrMalformedResponse, resp)
	}
	return r, nil
}
