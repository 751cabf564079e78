package replication

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/samsa-broker/samsa/engine"
)

// manyLeaders is a delta making node 1 the leader of topics × per partitions (a
// replica set of 1).
func manyLeaders(topics, per int) Delta {
	var d Delta
	for t := 0; t < topics; t++ {
		for p := 0; p < per; p++ {
			d.Leaders = append(d.Leaders, PartitionState{Topic: fmt.Sprintf("t%d", t), TopicID: [16]byte{byte(t + 1)},
				Partition: int32(p), Replicas: []int32{1}, ISR: []int32{1}, Leader: 1, MinISR: 1})
		}
	}
	return d
}

func sortedByTP(ps []*Partition) bool {
	return slices.IsSortedFunc(ps, func(a, b *Partition) int { return cmpTP(a.tp, b.tp) })
}

// TestManyPartitionsLookupAndList: with thousands of replicas added and removed while
// readers look them up, every lookup finds its replica and Partitions lists exactly
// the replicas, sorted.
func TestManyPartitionsLookupAndList(t *testing.T) {
	m, _, _ := newTestManager(t, false)
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // a reader beside Apply, for the race detector
		defer wg.Done()
		for !stop.Load() {
			if ps := m.Partitions(); !sortedByTP(ps) {
				t.Error("Partitions not sorted while applying")
				return
			}
			_ = m.Partition(engine.TopicPartition{Topic: "t1", Partition: 7})
		}
	}()
	if err := m.Apply(manyLeaders(3, 1000)); err != nil {
		t.Fatal(err)
	}
	for _, st := range manyLeaders(3, 1000).Leaders {
		p := m.Partition(st.TP())
		if p == nil || p.TopicPartition() != st.TP() || p.Role() != RoleLeader {
			t.Fatalf("%s: replica %v", st.TP(), p)
		}
	}
	ps := m.Partitions()
	if len(ps) != 3000 || !sortedByTP(ps) {
		t.Fatalf("Partitions: %d, sorted %v", len(ps), sortedByTP(ps))
	}
	var d Delta
	for p := 0; p < 1000; p++ {
		d.Stopped = append(d.Stopped, Stop{TP: engine.TopicPartition{Topic: "t1", Partition: int32(p)}, Delete: true})
	}
	if err := m.Apply(d); err != nil {
		t.Fatal(err)
	}
	stop.Store(true)
	wg.Wait()
	ps = m.Partitions()
	if len(ps) != 2000 || !sortedByTP(ps) {
		t.Fatalf("after stopping t1: %d partitions, sorted %v", len(ps), sortedByTP(ps))
	}
	for _, p := range ps {
		if p.TopicPartition().Topic == "t1" {
			t.Fatalf("%s still listed", p.TopicPartition())
		}
	}
	if p := m.Partition(engine.TopicPartition{Topic: "t1", Partition: 3}); p != nil {
		t.Fatalf("stopped replica still found: %v", p)
	}
	if p := m.Partition(engine.TopicPartition{Topic: "t2", Partition: 999}); p == nil {
		t.Fatal("t2-999 lost")
	}
}

// BenchmarkApplyNewPartitions: one Apply making this node the leader of n new
// partitions (what a broker does for a new topic, and at start-up for every
// partition). The cost per partition should not grow with n.
func BenchmarkApplyNewPartitions(b *testing.B) {
	for _, n := range []int{1000, 10000, 30000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			d := manyLeaders(1, n)
			b.ReportAllocs()
			var total time.Duration
			for b.Loop() {
				b.StopTimer()
				store := newMemStore(false)
				m, err := NewManager(Config{NodeID: 1, Logs: store, Clock: newFakeClock(), Manual: true, ReplicaLagTimeMax: time.Second})
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				t0 := time.Now()
				if err := m.Apply(d); err != nil {
					b.Fatal(err)
				}
				total += time.Since(t0)
				b.StopTimer()
				m.Close()
				b.StartTimer()
			}
			b.ReportMetric(float64(total.Nanoseconds())/float64(b.N)/float64(n), "ns/partition")
		})
	}
}

// BenchmarkPartitionLookup: the produce and fetch paths' lookup of a replica among
// 10,000.
func BenchmarkPartitionLookup(b *testing.B) {
	store := newMemStore(false)
	m, err := NewManager(Config{NodeID: 1, Logs: store, Clock: newFakeClock(), Manual: true, ReplicaLagTimeMax: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	if err := m.Apply(manyLeaders(10, 1000)); err != nil {
		b.Fatal(err)
	}
	tps := make([]engine.TopicPartition, 0, 10000)
	for _, st := range manyLeaders(10, 1000).Leaders {
		tps = append(tps, st.TP())
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if m.Partition(tps[i%len(tps)]) == nil {
			b.Fatal("missing")
		}
		i++
	}
}

// batchStore is a memStore that counts OpenLogs batches.
type batchStore struct {
	*memStore
	batches [][]engine.TopicPartition
}

func (b *batchStore) OpenLogs(tps []engine.TopicPartition, cfgs []engine.LogConfig) error {
	b.batches = append(b.batches, slices.Clone(tps))
	for i, tp := range tps {
		if _, err := b.OpenLog(tp, cfgs[i]); err != nil {
			return err
		}
	}
	return nil
}

// Apply opens the logs of a delta's new partitions in one batch when the LogStore
// can (the engine then syncs its directory once for all), and only the new ones.
func TestApplyOpensNewLogsInOneBatch(t *testing.T) {
	store := &batchStore{memStore: newMemStore(false)}
	m, err := NewManager(Config{NodeID: 1, Logs: store, Clock: newFakeClock(), Manual: true, ReplicaLagTimeMax: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := m.Apply(manyLeaders(2, 50)); err != nil {
		t.Fatal(err)
	}
	if len(store.batches) != 1 || len(store.batches[0]) != 100 {
		t.Fatalf("batches %d (first of %d), want one of 100", len(store.batches), len(store.batches[0]))
	}
	d := manyLeaders(3, 50) // t0 and t1 again, t2 new
	for i := range d.Leaders {
		d.Leaders[i].LeaderEpoch = 1
	}
	if err := m.Apply(d); err != nil {
		t.Fatal(err)
	}
	if len(store.batches) != 2 || len(store.batches[1]) != 50 || store.batches[1][0].Topic != "t2" {
		t.Fatalf("second batch %v, want t2's 50 partitions", store.batches[1:])
	}
	if n := len(m.Partitions()); n != 150 {
		t.Fatalf("%d replicas, want 150", n)
	}
}

func TestJoinFewKeepsTheFirstErrors(t *testing.T) {
	var errs []error
	for i := 0; i < 1000; i++ {
		errs = append(errs, fmt.Errorf("partition %d: %w", i, engine.ErrTooManyOpenFiles))
	}
	err := joinFew(errs)
	if !errors.Is(err, engine.ErrTooManyOpenFiles) || !strings.Contains(err.Error(), "and 995 more") || strings.Contains(err.Error(), "partition 7:") {
		t.Fatalf("joinFew: %v", err)
	}
	if err := joinFew(errs[:2]); !strings.Contains(err.Error(), "partition 1:") {
		t.Fatalf("joinFew of 2: %v", err)
	}
}
