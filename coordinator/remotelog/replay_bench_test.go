package remotelog

import (
	"context"
	"testing"

	"github.com/samsa-broker/samsa/engine"
	"github.com/samsa-broker/samsa/engine/remote"
)

// BenchmarkManagerReplay is a Manager's first read of a metadata partition
// holding 100,000 records (40,000 copies of 100 partitions' segments, each
// started and finished, 10,000 of them deleted again), from the local
// replica and from the leader (the leader's log read in 1 MiB fetches, in
// process: no network): what a node that starts spends before it lists a
// partition's copies, the cost a snapshot of the state would save.
func BenchmarkManagerReplay(b *testing.B) {
	ctx := context.Background()
	leader := openBareNode(b, b.TempDir(), 1, engine.SyncNone)
	b.Cleanup(leader.close)
	leader.lead(b, 0)
	l := &leaderFor{leader: func() *node { return leader }, fetchMax: 1 << 20}
	var recs []engine.Record
	records := 0
	flush := func() {
		if len(recs) == 0 {
			return
		}
		batch, err := engine.AppendRecords(nil, recs)
		if err == nil {
			_, err = l.forward(ctx, 0, batch)
		}
		if err != nil {
			b.Fatal(err)
		}
		records += len(recs)
		recs = recs[:0]
	}
	add := func(v []byte) {
		recs = append(recs, engine.Record{Timestamp: 1_700_000_000_000, Value: v})
		if len(recs) == 100 {
			flush()
		}
	}
	for i := range 40_000 {
		md := testSegment()
		md.ID.Partition, md.ID.ID = int32(i%100), remote.RandomUuid()
		md.StartOffset, md.EndOffset = int64(i/100)*1000, int64(i/100)*1000+999
		md.LeaderEpochs = []remote.EpochEntry{{Epoch: 1, StartOffset: md.StartOffset}}
		add(EncodeSegment(md))
		add(EncodeUpdate(&Update{ID: md.ID, BrokerID: 1, EventTimestamp: 2, State: remote.CopySegmentFinished}))
		if (i/100)%4 == 0 { // every fourth copy of each partition
			add(EncodeUpdate(&Update{ID: md.ID, BrokerID: 1, EventTimestamp: 3, State: remote.DeleteSegmentStarted}))
			add(EncodeUpdate(&Update{ID: md.ID, BrokerID: 1, EventTimestamp: 4, State: remote.DeleteSegmentFinished}))
		}
	}
	flush()
	one := func() int32 { return 1 } // every partition's metadata in partition 0
	el := l.log(0)
	b.Logf("%d records, %d bytes, in %s-0", records, el.Size(), Topic)
	list := func(b *testing.B, m *Manager) {
		segs, err := m.ListRemoteLogSegments(testTP)
		if err != nil {
			b.Fatal(err)
		}
		if len(segs) != 300 {
			b.Fatalf("%d copies of %v listed, want 300", len(segs), testTP)
		}
	}
	b.Run("local", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			list(b, New(Config{Replicas: leader.m, Partitions: one}))
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(records), "ns/record")
	})
	b.Run("from-leader", func(b *testing.B) {
		bare := openBareNode(b, b.TempDir(), 2, engine.SyncNone)
		defer bare.close()
		b.ReportAllocs()
		for b.Loop() {
			list(b, New(Config{Replicas: bare.m, Partitions: one, Fetch: l.fetch}))
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(records), "ns/record")
	})
}
