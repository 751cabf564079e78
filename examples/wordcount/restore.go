package wordcount

import (
	"context"
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Restore reads the changelog topic, read_committed, from its start up to the last
// stable offset of each partition as it is when Restore begins, and returns the last
// count of each word. It fetches with raw Fetch requests so that it knows where each
// partition's reading stands: aborted records and transaction markers move that
// position but are never returned to a consumer, so a consumer cannot tell that it
// has reached the end.
func Restore(ctx context.Context, brokers []string, changelog string) (map[string]int64, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	topics, err := adm.ListTopics(ctx, changelog)
	if err != nil {
		return nil, err
	}
	td, ok := topics[changelog]
	if !ok || td.Err != nil {
		return nil, fmt.Errorf("changelog topic %s: %v", changelog, td.Err)
	}
	starts, err := adm.ListStartOffsets(ctx, changelog)
	if err != nil {
		return nil, err
	}
	stables, err := adm.ListCommittedOffsets(ctx, changelog) // the last stable offsets
	if err != nil {
		return nil, err
	}
	counts := map[string]int64{}
	for _, p := range td.Partitions.Sorted() {
		start, ok1 := starts.Lookup(changelog, p.Partition)
		stable, ok2 := stables.Lookup(changelog, p.Partition)
		if !ok1 || !ok2 || start.Err != nil || stable.Err != nil {
			return nil, fmt.Errorf("changelog %s/%d: no start or stable offset (%v, %v)", changelog, p.Partition, start.Err, stable.Err)
		}
		err := readPartition(ctx, cl, changelog, td.ID, p.Partition, p.Leader, start.Offset, stable.Offset, func(r *kgo.Record) error {
			if r.Value == nil {
				delete(counts, string(r.Key)) // a tombstone
				return nil
			}
			c, err := strconv.ParseInt(string(r.Value), 10, 64)
			if err != nil {
				return fmt.Errorf("changelog %s/%d offset %d: value %q is not a count", changelog, p.Partition, r.Offset, r.Value)
			}
			counts[string(r.Key)] = c
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return counts, nil
}

// readPartition fetches [from, to) of one partition from its leader, read_committed,
// and calls fn with each committed data record in offset order.
func readPartition(ctx context.Context, cl *kgo.Client, topic string, id kadm.TopicID, partition, leader int32,
	from, to int64, fn func(*kgo.Record) error) error {
	decompressor := kgo.DefaultDecompressor()
	for at := from; at < to; {
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID = -1
		req.MaxWaitMillis = 500
		req.MinBytes = 1
		req.MaxBytes = 16 << 20
		req.IsolationLevel = 1 // read_committed
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = topic, id
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.LogStartOffset, rp.PartitionMaxBytes = partition, at, -1, 8<<20
		rp.CurrentLeaderEpoch = -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl.Broker(int(leader)))
		if err != nil {
			return fmt.Errorf("fetch %s/%d at %d: %w", topic, partition, at, err)
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			return fmt.Errorf("fetch %s/%d at %d: %w", topic, partition, at, err)
		}
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			return fmt.Errorf("fetch %s/%d at %d: an answer for %d topics", topic, partition, at, len(resp.Topics))
		}
		fp, next := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{
			Offset: at, IsolationLevel: kgo.ReadCommitted(), Topic: topic, Partition: partition,
		}, &resp.Topics[0].Partitions[0], decompressor, nil)
		if fp.Err != nil {
			return fmt.Errorf("fetch %s/%d at %d: %w", topic, partition, at, fp.Err)
		}
		for _, r := range fp.Records {
			if r.Offset >= to {
				break
			}
			if err := fn(r); err != nil {
				return err
			}
		}
		if next <= at && fp.HighWatermark >= to {
			return fmt.Errorf("fetch %s/%d at %d: no progress below the stable offset %d", topic, partition, at, to)
		}
		at = max(at, next)
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	return nil
}
