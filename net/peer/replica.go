package peer

import (
	"context"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/controller"
)

// ReplicaClient sends replica fetchers' requests to source brokers (the partitions'
// leaders, on their inter-broker listener): replication's FetchClient on the wire.
// Requests go at the version the caller set (replication picks its Fetch version: from
// v13 topics are named by id), ErrUnsupportedVersion when the source does not serve
// it; Fetch's MaxWaitMillis is added to the request timeout.
//
// Each request in flight to a broker has a connection of its own (the lowest
// FetchPurpose index free at the time), so the long polls of num.replica.fetchers
// fetchers to one source never queue behind each other.
type ReplicaClient struct {
	c *Client

	mu    sync.Mutex
	inUse map[int32][]bool // per source broker, fetch connection i has a request in flight
}

// ReplicaClient returns the client's replica fetch client.
func (c *Client) ReplicaClient() *ReplicaClient {
	return &ReplicaClient{c: c, inUse: map[int32][]bool{}}
}

func (rc *ReplicaClient) acquire(broker int32) int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	used := rc.inUse[broker]
	for i, u := range used {
		if !u {
			used[i] = true
			return i
		}
	}
	rc.inUse[broker] = append(used, true)
	return len(used)
}

func (rc *ReplicaClient) release(broker int32, i int) {
	rc.mu.Lock()
	rc.inUse[broker][i] = false
	rc.mu.Unlock()
}

func (rc *ReplicaClient) request(ctx context.Context, broker int32, req kmsg.Request) (kmsg.Response, error) {
	i := rc.acquire(broker)
	defer rc.release(broker, i)
	cn, err := rc.c.conn(ctx, Broker(broker), FetchPurpose(i))
	if err != nil {
		return nil, err
	}
	return cn.roundTripAt(ctx, req, req.GetVersion())
}

// Fetch sends a follower's Fetch to broker.
func (rc *ReplicaClient) Fetch(ctx context.Context, broker int32, req *kmsg.FetchRequest) (*kmsg.FetchResponse, error) {
	resp, err := rc.request(ctx, broker, req)
	if err != nil {
		return nil, err
	}
	return resp.(*kmsg.FetchResponse), nil
}

// OffsetForLeaderEpoch asks broker where the follower's epochs end on the leader (for
// logs that have no epoch to send in Fetch).
func (rc *ReplicaClient) OffsetForLeaderEpoch(ctx context.Context, broker int32, req *kmsg.OffsetForLeaderEpochRequest) (*kmsg.OffsetForLeaderEpochResponse, error) {
	resp, err := rc.request(ctx, broker, req)
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
	resp, err := ic.c.toVoters(ctx, PurposeISR, req, controller.NotController)
	if err != nil {
		return nil, err
	}
	r, ok := resp.(*kmsg.AlterPartitionResponse)
	if !ok {
		return nil, fmt.Errorf("%w: %T for AlterPartition", ErrMalformedResponse, resp)
	}
	return r, nil
}
