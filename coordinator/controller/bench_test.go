package controller

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/metadata"
)

// The scale KRaft claims, in the simulation (no processes): 100 brokers and
// 200,100 partition replicas (667 topics of 100 partitions, replication factor 3),
// built through a Controller (registrations, heartbeats, CreateTopics) over a
// one-voter MemLog.
const (
	scaleBrokers    = 100
	scaleTopics     = 667
	scalePartitions = 100
	scaleRF         = 3
)

var scale struct {
	once  sync.Once
	im    *metadata.Image
	off   uint64
	snap  []byte
	build time.Duration
	err   error
}

func scaleImage(b *testing.B) (*metadata.Image, uint64, []byte) { return scaleImageT(b) }

func scaleImageT(b testing.TB) (*metadata.Image, uint64, []byte) {
	scale.once.Do(func() {
		start := time.Now()
		h := newHarness(b, nil)
		h.log.SetAuto(true)
		ids := make([]int32, scaleBrokers)
		for i := range ids {
			ids[i] = int32(i + 1)
		}
		h.join(ids...)
		for i := range scaleTopics {
			if ct := h.createTopic(fmt.Sprintf("topic-%04d", i), scalePartitions, scaleRF); ct.ErrorCode != 0 {
				scale.err = fmt.Errorf("create topic %d: %v", i, code(ct.ErrorCode))
				return
			}
		}
		scale.build = time.Since(start)
		scale.off, scale.im = h.voter.Committed()
		scale.snap, scale.err = metadata.EncodeSnapshot(nil, scale.im)
	})
	if scale.err != nil {
		b.Fatal(scale.err)
	}
	return scale.im, scale.off, scale.snap
}

// BenchmarkFailover is the controller's work to fail over one broker's leaderships
// (its session expired): build the records (FenceBrokerRecords: the fence and a
// PartitionChange per partition whose ISR it leaves or that it led), apply them to
// the pending image, encode them as one entry, decode and apply them as every voter
// and broker does, and compute one broker's ReplicaDelta. The phases are reported
// per failover; records/op is the entry's size in records.
func BenchmarkFailover(b *testing.B) {
	im, _, _ := scaleImage(b)
	var build, apply, encode, replay, delta time.Duration
	var recs, bytes, leaders int
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		victim := int32(i%scaleBrokers + 1)
		t0 := time.Now()
		rs := FenceBrokerRecords(im, victim, never)
		t1 := time.Now()
		pending, err := im.Apply(rs...)
		t2 := time.Now()
		data := metadata.EncodeEntry(nil, rs...)
		t3 := time.Now()
		dec, _, derr := metadata.DecodeEntry(data)
		committed, aerr := im.Apply(dec...)
		t4 := time.Now()
		d := ReplicaDelta(victim%scaleBrokers+1, im, committed, nil)
		t5 := time.Now()
		if err != nil || derr != nil || aerr != nil || pending == nil {
			b.Fatal(err, derr, aerr)
		}
		build += t1.Sub(t0)
		apply += t2.Sub(t1)
		encode += t3.Sub(t2)
		replay += t4.Sub(t3)
		delta += t5.Sub(t4)
		recs += len(rs)
		bytes += len(data)
		leaders += len(d.Leaders)
	}
	n := float64(b.N)
	b.ReportMetric(float64((build+apply+encode+replay+delta).Microseconds())/n/1000, "ms/failover")
	b.ReportMetric(float64(recs)/n, "records/op")
	b.ReportMetric(float64(bytes)/n, "entry-bytes/op")
	b.ReportMetric(float64(build.Microseconds())/n, "build-µs/op")
	b.ReportMetric(float64(apply.Microseconds())/n, "apply-µs/op")
	b.ReportMetric(float64(encode.Microseconds())/n, "encode-µs/op")
	b.ReportMetric(float64(replay.Microseconds())/n, "decode+apply-µs/op")
	b.ReportMetric(float64(delta.Microseconds())/n, "delta-µs/op")
	b.ReportMetric(float64(leaders)/n, "new-leaderships/op")
}

// BenchmarkFailoverThroughController measures one broker's failover end to end in
// a Controller over a one-voter MemLog holding the scale image: the timer finds the
// expired session, the controller builds and proposes the records, the log commits
// and applies them, the controller observes the commit. Each iteration starts from a
// fresh log and controller (untimed).
func BenchmarkFailoverThroughController(b *testing.B) {
	im, off, snap := scaleImage(b)
	var recs int
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		victim := int32(i%scaleBrokers + 1)
		log := NewMemLog(1)
		log.image, log.end, log.snap = im, off, memSnapshot{offset: off, term: 1, data: snap}
		v := log.Voter(1)
		v.image, v.applied, v.term, v.knownTerm = im, off, 1, 1
		log.term = 1
		log.SetAuto(true)
		log.Elect(1, 0)
		clock := NewManualClock(t0)
		c, err := New(Config{NodeID: 1, Clock: clock, SessionTimeout: 9 * time.Second, TickInterval: 100 * time.Millisecond}, v)
		if err != nil {
			b.Fatal(err)
		}
		c.Start()
		c.Poll() // active: fresh sessions for every broker
		clock.Advance(5 * time.Second)
		for id := int32(1); id <= scaleBrokers; id++ {
			if id == victim {
				continue
			}
			br, _ := im.Broker(id)
			var got kmsg.Response
			c.Submit(heartbeat(id, br.Epoch, off+1), func(r kmsg.Response) { got = r })
			if got == nil {
				b.Fatal("heartbeat not answered")
			}
		}
		before := log.End()
		clock.Advance(4 * time.Second) // just short of the others' expiry
		b.StartTimer()
		clock.Advance(100 * time.Millisecond) // the victim's session ends; the next tick fences it
		b.StopTimer()
		if log.End() != before+1 {
			b.Fatalf("failover did not commit one entry: %d → %d", before, log.End())
		}
		_, after := v.Committed()
		if LeadsAny(after, victim) {
			b.Fatal("the victim still leads")
		}
		recs += len(log.Entries(log.End())[0].Data)
		c.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(recs)/float64(b.N), "entry-bytes/op")
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/1000, "ms/failover")
}

// BenchmarkSnapshotCatchUp is a broker catching up from a snapshot of the scale
// image: the follower decodes and installs it, and the broker computes its
// ReplicaDelta from nothing (every replica it holds). image-bytes is the heap the
// decoded image takes; the build time of the fixture is reported once.
func BenchmarkSnapshotCatchUp(b *testing.B) {
	_, off, snap := scaleImage(b)
	heap := imageHeap(b, snap)
	var replicas int
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		f := NewMetadataFollower(FollowerConfig{})
		if err := f.InstallSnapshot(off, snap); err != nil {
			b.Fatal(err)
		}
		_, got := f.Image()
		d := ReplicaDelta(int32(i%scaleBrokers+1), nil, got, nil)
		replicas += len(d.Leaders) + len(d.Followers)
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/1000, "ms/catch-up")
	b.ReportMetric(float64(heap)/(1<<20), "MiB/image")
	b.ReportMetric(float64(replicas)/float64(b.N), "replicas/op")
	b.ReportMetric(float64(len(snap)), "snapshot-bytes")
	b.ReportMetric(float64(heap), "image-heap-bytes")
	b.ReportMetric(scale.build.Seconds(), "fixture-build-s")
}

// imageHeap returns the heap bytes an image decoded from snap holds.
func imageHeap(b *testing.B, snap []byte) uint64 {
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	im, err := metadata.DecodeSnapshot(snap)
	if err != nil {
		b.Fatal(err)
	}
	im.Topics() // the sorted cache, as a live image has it
	runtime.GC()
	runtime.ReadMemStats(&m1)
	runtime.KeepAlive(im)
	return m1.HeapAlloc - m0.HeapAlloc
}
