package quorum

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/samsa-broker/samsa/coordinator/metadata"
)

// BenchmarkProposeCommit measures propose → commit+apply latency of one-record
// entries, one at a time, through voters on DiskStorage in a temporary directory,
// each in its Run loop (an in-process transport between them). fdatasync
// dominates: one for a single voter, two in sequence for three (the leader's and
// then a follower's, in parallel with the other follower's).
func BenchmarkProposeCommit(b *testing.B) {
	for _, voters := range []int{1, 3} {
		b.Run(fmt.Sprintf("voters=%d", voters), func(b *testing.B) {
			root := b.TempDir()
			ids := make([]int32, voters)
			for i := range ids {
				ids[i] = int32(i + 1)
			}
			net := newInprocNet()
			var nodes []*rtNode
			for _, id := range ids {
				st, err := OpenDiskStorage(filepath.Join(root, fmt.Sprint(id)), DiskOptions{})
				if err != nil {
					b.Fatal(err)
				}
				q, err := New(Config{NodeID: id, Voters: ids, TickInterval: 10 * time.Millisecond}, st, inprocTransport{net, id})
				if err != nil {
					b.Fatal(err)
				}
				ctx, cancel := context.WithCancel(context.Background())
				n := &rtNode{id: id, st: st, q: q, cancel: cancel, done: make(chan error, 1)}
				net.set(id, q, false)
				go func() { n.done <- q.Run(ctx) }()
				nodes = append(nodes, n)
			}
			defer func() {
				for _, n := range nodes {
					n.cancel()
					<-n.done
					n.st.Close()
				}
			}()
			var leader *Quorum
			deadline := time.Now().Add(10 * time.Second)
			for leader == nil {
				for _, n := range nodes {
					if n.q.ReadyForWrites() {
						leader = n.q
					}
				}
				if time.Now().After(deadline) {
					b.Fatal("no leader")
				}
				runtime.Gosched()
			}
			lat := make([]time.Duration, 0, b.N)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				start := time.Now()
				r := <-leader.Propose([]metadata.Record{topic(fmt.Sprintf("bench-%d", i))})
				if r.Err != nil {
					b.Fatal(r.Err)
				}
				lat = append(lat, time.Since(start))
			}
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
		})
	}
}

// scaleRecords returns the records of the scale Kafka's KRaft is sized for: 100
// brokers and 1,000 topics of 67 partitions with 3 replicas each (67,000
// partitions, 201,000 partition replicas), placed round-robin, plus one config
// per topic.
func scaleRecords() []metadata.Record {
	const brokers, topics, partitions, rf = 100, 1000, 67, 3
	var recs []metadata.Record
	for i := int32(0); i < brokers; i++ {
		recs = append(recs, &metadata.RegisterBrokerRecord{ID: i, IncarnationID: metadata.UUID{0: byte(i), 15: 1}, Epoch: int64(i) + 1,
			Endpoints: []metadata.Endpoint{{Name: "PLAINTEXT", Host: fmt.Sprintf("broker-%d.example.internal", i), Port: 9092}},
			Rack:      metadata.StringPtr(fmt.Sprintf("rack-%d", i%5))})
	}
	for t := 0; t < topics; t++ {
		tr := topic(fmt.Sprintf("topic-%04d", t))
		recs = append(recs, tr)
		for p := int32(0); p < partitions; p++ {
			first := (int32(t) + p) % brokers
			replicas := []int32{first, (first + 1) % brokers, (first + 2) % brokers}
			recs = append(recs, &metadata.PartitionRecord{TopicID: tr.ID, Partition: p, Replicas: replicas,
				ISR: slices.Clone(replicas), Leader: first, LeaderEpoch: 3, PartitionEpoch: 5})
		}
		recs = append(recs, &metadata.ConfigRecord{Resource: metadata.ResourceTopic, Name: tr.Name, Key: "retention.ms", Value: metadata.StringPtr("604800000")})
	}
	return recs
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// BenchmarkScaleSnapshot: the image of 100 brokers and 201,000 partition replicas
// as a raft snapshot: its size, the time to encode it (metadata.EncodeSnapshot), to decode its
// entry frames, to apply the records to the empty image, and the image's memory.
func BenchmarkScaleSnapshot(b *testing.B) {
	recs := scaleRecords()
	im, err := (&metadata.Image{}).Apply(recs...)
	if err != nil {
		b.Fatal(err)
	}
	data := encodeImage(im)
	b.Run("encode", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(data)))
		for i := 0; i < b.N; i++ {
			encodeImage(im)
		}
		b.ReportMetric(float64(len(data)), "snapshot-bytes")
	})
	b.Run("decode", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(data)))
		for i := 0; i < b.N; i++ {
			for rest := data; len(rest) > 0; {
				_, n, err := metadata.DecodeEntry(rest)
				if err != nil {
					b.Fatal(err)
				}
				rest = rest[n:]
			}
		}
	})
	b.Run("apply", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if _, err := (&metadata.Image{}).Apply(recs...); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode+apply", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(data)))
		for i := 0; i < b.N; i++ {
			if _, err := metadata.DecodeSnapshot(data); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("memory", func(b *testing.B) {
		var keep []*metadata.Image
		before := heapInUse()
		for i := 0; i < b.N; i++ {
			im, err := metadata.DecodeSnapshot(data)
			if err != nil {
				b.Fatal(err)
			}
			keep = append(keep, im)
		}
		after := heapInUse()
		b.ReportMetric(float64(after-before)/float64(b.N)/(1<<20), "MiB/image")
		runtime.KeepAlive(keep)
	})
}

// BenchmarkSimSnapshotCatchUp, in the simulation (seeded network and clock, three
// voters on MemStorage): a follower is cut off while the leader commits the scale
// image (chunks of 1,000 records per entry) and compacts its log; on its return the
// leader sends the snapshot. Reported: the wall time of the follower's HandleReady
// that installs it (decode, ApplySnapshot, apply) and the simulated time from the
// return to the follower having applied the leader's offset.
func BenchmarkSimSnapshotCatchUp(b *testing.B) {
	recs := scaleRecords()
	var install, catchUp time.Duration
	var snapBytes int
	for i := 0; i < b.N; i++ {
		s := newQuietSimWith(b, uint64(i+1), 3, func(p *simParams) {
			p.drop, p.dup, p.snapshotEntries = 0, 0, 20
			p.minDelay, p.maxDelay = time.Millisecond, 2*time.Millisecond
		})
		s.advance(2 * time.Second)
		li := s.leaderIndex()
		if li < 0 {
			b.Fatal("no leader")
		}
		f := (li + 1) % 3
		s.nodes[f].group = 1
		for rest := recs; len(rest) > 0; {
			n := min(len(rest), 1000)
			ch := s.nodes[li].q.Propose(rest[:n])
			s.handle(li)
			s.advance(s.now + 20*time.Millisecond)
			if r := <-ch; r.Err != nil {
				b.Fatal(r.Err)
			}
			rest = rest[n:]
		}
		// Commit small entries until a snapshot covers the whole scale image.
		last, _ := s.nodes[li].q.Committed()
		for pad := 0; s.nodes[li].q.Status().SnapshotIndex < last; pad++ {
			ch := s.nodes[li].q.Propose([]metadata.Record{topic(fmt.Sprintf("pad-%d", pad))})
			s.handle(li)
			s.advance(s.now + 5*time.Millisecond)
			if r := <-ch; r.Err != nil {
				b.Fatal(r.Err)
			}
		}
		target, _ := s.nodes[li].q.Committed()
		if st := s.nodes[li].q.Status(); st.FirstIndex <= 2 {
			b.Fatalf("the leader did not compact: %+v", st)
		}
		s.installTime = 0
		s.nodes[f].group = 0
		healed := s.now
		for {
			s.advance(s.now + 10*time.Millisecond)
			if off, _ := s.nodes[f].q.Committed(); off >= target {
				break
			}
			if s.now > healed+time.Minute {
				b.Fatal("the follower did not catch up")
			}
		}
		install += s.installTime
		catchUp += s.now - healed
		_, _, data, _ := s.nodes[li].q.Snapshot()
		snapBytes = len(data)
	}
	b.ReportMetric(float64(install.Milliseconds())/float64(b.N), "install-ms")
	b.ReportMetric(float64(catchUp.Milliseconds())/float64(b.N), "ms/catch-up")
	b.ReportMetric(float64(snapBytes), "snapshot-bytes")
}

var _ = raftpb.MsgSnap
