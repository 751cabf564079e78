package controller

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// ControllerChannel sends a request to the active controller and returns its
// answer, finding the active controller among the voters (retrying NOT_CONTROLLER
// and broken connections) until ctx ends. net/peer implements it over the wire;
// LocalChannel in process.
type ControllerChannel interface {
	Request(ctx context.Context, req kmsg.Request) (kmsg.Response, error)
}

// MetadataSource reads the committed metadata log. net/peer implements it over the
// wire (Fetch of __cluster_metadata, FetchSnapshot); LogSource over a local voter.
type MetadataSource interface {
	// Fetch returns committed entries from offset on (long-polling up to wait), or
	// an error wrapping ErrSnapshotNeeded when offset is compacted away.
	Fetch(ctx context.Context, offset uint64, maxBytes int, wait time.Duration) (MetadataBatch, error)
	// Snapshot returns the latest snapshot (offset, data).
	Snapshot(ctx context.Context) (offset uint64, data []byte, err error)
}

// MetadataBatch answers MetadataSource.Fetch.
type MetadataBatch struct {
	// Entries are committed entries, consecutive from the offset asked for (none
	// when nothing new committed within the wait).
	Entries []MetadataEntry
	// HighWatermark is the last committed offset + 1, as the source knows it.
	HighWatermark uint64
	// Leader (-1: unknown) and Term of the quorum, as the source knows them: the
	// controller id a broker reports (DescribeCluster, Metadata).
	Leader int32
	Term   uint64
}

// LocalChannel is a ControllerChannel over controllers in this process (a
// combined node's own controller, simulations and tests): a request goes to the
// controller that last answered, else to each in turn, until one answers anything
// but NOT_CONTROLLER; between rounds it waits RetryInterval. Each controller must be
// running (Run) so that its proposals are observed.
type LocalChannel struct {
	controllers []*Controller
	// RetryInterval between rounds in which no controller was active (0: 50 ms).
	RetryInterval time.Duration
	mu            sync.Mutex
	last          int
}

// NewLocalChannel returns a channel to the given controllers.
func NewLocalChannel(cs ...*Controller) *LocalChannel { return &LocalChannel{controllers: cs} }

// Request implements ControllerChannel.
func (ch *LocalChannel) Request(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	if len(ch.controllers) == 0 {
		return nil, ErrNoController
	}
	wait := ch.RetryInterval
	if wait <= 0 {
		wait = 50 * time.Millisecond
	}
	for {
		ch.mu.Lock()
		start := ch.last
		ch.mu.Unlock()
		for k := range ch.controllers {
			i := (start + k) % len(ch.controllers)
			resp, err := ch.controllers[i].Handle(ctx, req)
			if err != nil {
				return nil, err
			}
			if ctx.Err() != nil {
				return nil, fmt.Errorf("%w: %w", ErrNoController, ctx.Err())
			}
			if !NotController(resp) {
				ch.mu.Lock()
				ch.last = i
				ch.mu.Unlock()
				return resp, nil
			}
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("%w: %w", ErrNoController, ctx.Err())
		case <-t.C:
		}
	}
}

// LogSource is a MetadataSource over a local voter's committed log (a combined
// node's broker reads its own voter).
type LogSource struct {
	Log CommittedLog
}

// Fetch implements MetadataSource.
func (s LogSource) Fetch(ctx context.Context, offset uint64, maxBytes int, wait time.Duration) (MetadataBatch, error) {
	offset = max(offset, 1)
	res, err := s.Log.ReadCommitted(offset, maxBytes)
	if err == nil && len(res.Entries) == 0 && !res.SnapshotNeeded && wait > 0 {
		wctx, cancel := context.WithTimeout(ctx, wait)
		_, werr := s.Log.WaitCommitted(wctx, offset-1)
		cancel()
		if werr != nil && ctx.Err() != nil {
			return MetadataBatch{}, ctx.Err()
		}
		res, err = s.Log.ReadCommitted(offset, maxBytes)
	}
	if err != nil {
		return MetadataBatch{}, err
	}
	if res.SnapshotNeeded {
		return MetadataBatch{}, fmt.Errorf("%w: offset %d, snapshot at %d", ErrSnapshotNeeded, offset, res.SnapshotOffset)
	}
	return MetadataBatch{Entries: res.Entries, HighWatermark: res.Committed + 1, Leader: res.Leader, Term: res.Term}, nil
}

// Snapshot implements MetadataSource.
func (s LogSource) Snapshot(ctx context.Context) (uint64, []byte, error) {
	off, _, data, err := s.Log.Snapshot()
	if err == nil && off == 0 {
		err = errors.New("controller: the log has no snapshot")
	}
	return off, data, err
}
