// DescribeLogDirs (key 35), versions 0-5.
//
// One entry per log directory of the engine: its path, KAFKA_STORAGE_ERROR when the
// directory failed I/O, and per replica on this broker its size in bytes and its
// offset lag: on a leader, as Kafka, its log end offset minus its high watermark (what
// the followers have yet to confirm); on a follower, how far its log end is behind the
// leader's high watermark as of its fetcher's last answer (what it has yet to copy;
// the log end minus the high watermark before the first answer). Topics == null
// describes every partition; otherwise only the named ones. v4+: TotalBytes and
// UsableBytes from statfs(2) (-1 where unavailable). v3+: the top-level ErrorCode is
// always 0.
//
// Differences from Apache Kafka: a follower's lag is its distance behind the leader
// (Kafka reports log end minus high watermark for every current replica); no future
// (reassigning) replicas (IsFuture false); no cordoned directories (IsCordoned
// false).

package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/engine"
)

func init() {
	register(API{Key: 35, MinVersion: 0, MaxVersion: 5, Handle: handleDescribeLogDirs})
}

func handleDescribeLogDirs(b *Broker, r *Request) {
	req := r.Body.(*kmsg.DescribeLogDirsRequest)
	resp := r.ResponseKind().(*kmsg.DescribeLogDirsResponse)
	var want map[string]map[int32]bool
	if req.Topics != nil {
		want = make(map[string]map[int32]bool, len(req.Topics))
		for _, t := range req.Topics {
			ps := want[t.Topic]
			if ps == nil {
				ps = make(map[int32]bool, len(t.Partitions))
				want[t.Topic] = ps
			}
			for _, p := range t.Partitions {
				ps[p] = true
			}
		}
	}
	followerLag := b.followerLags()
	for _, ds := range b.eng.DirStats() {
		d := kmsg.NewDescribeLogDirsResponseDir()
		d.Dir = ds.Path
		if ds.Err != nil {
			d.ErrorCode = kerr.KafkaStorageError.Code
		}
		d.TotalBytes, d.UsableBytes = diskSpace(ds.Path)
		for _, ls := range ds.Logs {
			if want != nil && !want[ls.TP.Topic][ls.TP.Partition] {
				continue
			}
			if n := len(d.Topics); n == 0 || d.Topics[n-1].Topic != ls.TP.Topic {
				t := kmsg.NewDescribeLogDirsResponseDirTopic()
				t.Topic = ls.TP.Topic
				d.Topics = append(d.Topics, t)
			}
			t := &d.Topics[len(d.Topics)-1]
			p := kmsg.NewDescribeLogDirsResponseDirTopicPartition()
			p.Partition, p.Size, p.OffsetLag = ls.TP.Partition, ls.Size, ls.OffsetLag
			if lag, ok := followerLag[ls.TP]; ok {
				p.OffsetLag = lag
			}
			t.Partitions = append(t.Partitions, p)
		}
		resp.Dirs = append(resp.Dirs, d)
	}
	r.Respond(resp)
}

// followerLags is each followed partition's lag behind its leader, from the replica
// manager's fetchers (empty without followers).
func (b *Broker) followerLags() map[engine.TopicPartition]int64 {
	if b.repl == nil {
		return nil
	}
	lags := b.repl.Stats().FetcherLag
	out := make(map[engine.TopicPartition]int64, len(lags))
	for _, l := range lags {
		out[l.TP] = max(l.Lag, 0)
	}
	return out
}
