package peer

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/controller"
	"github.com/samsa-broker/samsa/replication"
)

// Fetcher sends one replica fetcher's requests to its source broker (the partitions'
// leader, on its inter-broker listener), on the fetcher's own connection (purpose
// FetchPurpose(index)), so the long polls of num.replica.fetchers fetchers to one
// source never queue behind each other: replication's FetchClient on the wire. A
// request goes at the version its caller set when the source serves it, else at the
// highest version both serve (the fetcher fills both topic names and ids, ReplicaID
// and ReplicaState); the response's Version is the one it was read at. Fetch's
// MaxWaitMillis is added to the request timeout.
type Fetcher struct {
	c       *Client
	source  int32
	purpose Purpose
}

var _ replication.FetchClient = (*Fetcher)(nil)

// Fetcher returns fetcher index's client for source broker.
func (c *Client) Fetcher(source int32, index int) *Fetcher {
	return &Fetcher{c: c, source: source, purpose: FetchPurpose(index)}
}

// FetchClient is Fetcher as replication's Config.Fetch wants it.
func (c *Client) FetchClient(source int32, index int) replication.FetchClient {
	return c.Fetcher(source, index)
}

// Source is the broker the fetcher reads from.
func (f *Fetcher) Source() int32 { return f.source }

func (f *Fetcher) request(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	cn, err := f.c.conn(ctx, Broker(f.source), f.purpose)
	if err != nil {
		return nil, err
	}
	if r, ok := cn.versions[req.Key()]; ok && req.GetVersion() >= r.min && req.GetVersion() <= r.max {
		return cn.roundTripAt(ctx, req, req.GetVersion())
	}
	return cn.roundTrip(ctx, req)
}

// Fetch sends a follower's Fetch to the source broker.
func (f *Fetcher) Fetch(ctx context.Context, req *kmsg.FetchRequest) (*kmsg.FetchResponse, error) {
	resp, err := f.request(ctx, req)
	if err != nil {
		return nil, err
	}
	return resp.(*kmsg.FetchResponse), nil
}

// OffsetForLeaderEpoch asks the source broker where the follower's epochs end on the
// leader (for logs that have no epoch to send in Fetch).
func (f *Fetcher) OffsetForLeaderEpoch(ctx context.Context, req *kmsg.OffsetForLeaderEpochRequest) (*kmsg.OffsetForLeaderEpochResponse, error) {
	resp, err := f.request(ctx, req)
	if err != nil {
		return nil, err
	}
	return resp.(*kmsg.OffsetForLeaderEpochResponse), nil
}

// ListOffsets asks the source broker for its earliest local offsets (a follower whose
// fetch offset moved to tiered storage).
func (f *Fetcher) ListOffsets(ctx context.Context, req *kmsg.ListOffsetsRequest) (*kmsg.ListOffsetsResponse, error) {
	resp, err := f.request(ctx, req)
	if err != nil {
		return nil, err
	}
	return resp.(*kmsg.ListOffsetsResponse), nil
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
	resp, err := ic.c.toVoters(ctx, PurposeISR, req, controller.NotController, 0)
	if err != nil {
		return nil, err
	}
	r, ok := resp.(*kmsg.AlterPartitionResponse)
	if !ok {
		return nil, fmt.Errorf("%w: %T for AlterPartition", ErrMalformedResponse, resp)
	}
	return r, nil
}
