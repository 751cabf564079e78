package main

// The remote size of a tiered topic's partitions for `samsa topics describe`: the
// bytes of each partition's finished copies in remote storage, replayed from
// __remote_log_metadata over the Kafka protocol (coordinator/remotelog.Sizes), as
// every broker replays it. It is read there rather than from each broker's admin
// /metrics (samsa_remote_log_size_bytes, Kafka's RemoteLogSizeBytes): the command
// reaches the cluster through --bootstrap-server alone and the admin listeners are not
// in the cluster's metadata; the metric is kept by each partition's leader only, as of
// its last task, while the topic holds every partition's state, a dead leader's too.

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/samsa-broker/samsa/coordinator/remotelog"
)

// remoteSizes reads __remote_log_metadata from its start to its end offsets as
// ListOffsets answers them when called. newClient makes the consumer.
func remoteSizes(ctx context.Context, adm *kadm.Client, newClient func(...kgo.Opt) (*kgo.Client, error)) (*remotelog.Sizes, error) {
	ends, err := adm.ListEndOffsets(ctx, remotelog.Topic)
	if err != nil {
		return nil, err
	}
	sizes := remotelog.NewSizes()
	want, from := map[int32]int64{}, map[int32]kgo.Offset{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err == nil && o.Offset > 0 {
			want[o.Partition], from[o.Partition] = o.Offset, kgo.NewOffset().AtStart()
		}
	})
	if len(want) == 0 {
		return sizes, nil // no copy recorded (or no such topic: nothing tiered yet)
	}
	cl, err := newClient(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{remotelog.Topic: from}))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	for len(want) > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("reading %s: %w", remotelog.Topic, err)
		}
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) { ferr = err })
		if ferr != nil {
			return nil, fmt.Errorf("reading %s: %w", remotelog.Topic, ferr)
		}
		fs.EachRecord(func(r *kgo.Record) {
			end, ok := want[r.Partition]
			if !ok || r.Offset >= end {
				return
			}
			sizes.Apply(r.Value)
			if r.Offset+1 >= end {
				delete(want, r.Partition)
			}
		})
	}
	return sizes, nil
}
