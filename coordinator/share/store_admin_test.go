package share

import (
	"errors"
	"slices"
	"sync"
	"testing"
	"time"
)

func storeDo(f func(done func(error))) error {
	ch := make(chan error, 1)
	f(func(err error) { ch <- err })
	return <-ch
}

// TestStoreInitializeDeleteSummary: the share coordinator's InitializeShareGroupState,
// DeleteShareGroupState and ReadShareGroupStateSummary, as Kafka's
// ShareCoordinatorShard serves them: a write needs an initialized state, an
// initialization starts afresh unless its state epoch is older than the stored one,
// a deletion writes a tombstone (replayed by the next leader), and a summary counts
// the completed deliveries above the start.
func TestStoreInitializeDeleteSummary(t *testing.T) {
	log := &memLog{}
	h := newHarness(t, log)
	st := h.store
	k := Key{Group: "g", TopicID: [16]byte{7}, Partition: 1}

	if err := storeDo(func(d func(error)) { st.Write(k, &Snapshot{StartOffset: 3}, d) }); !errors.Is(err, ErrUninitialized) {
		t.Fatalf("write before initialize: %v", err)
	}
	if s, err := st.Summary(k); err != nil || s.Found || s.StartOffset != -1 || s.StateEpoch != 0 || s.LeaderEpoch != 0 || s.DeliveryComplete != -1 {
		t.Fatalf("summary of no state: %+v %v", s, err)
	}
	if err := storeDo(func(d func(error)) { st.Initialize(k, 4, -1, d) }); err != nil {
		t.Fatal(err)
	}
	if s, _ := st.Summary(k); !s.Found || s.StartOffset != -1 || s.StateEpoch != 4 || s.DeliveryComplete != -1 {
		t.Fatalf("summary after initialize: %+v", s)
	}
	w := &Snapshot{StateEpoch: 4, LeaderEpoch: 2, StartOffset: 10, Batches: []Batch{
		{First: 8, Last: 11, State: Acknowledged, Count: 1}, // 10 and 11 count
		{First: 12, Last: 12, State: Available, Count: 1},
		{First: 13, Last: 15, State: Archived, Count: 5},
	}}
	if err := storeDo(func(d func(error)) { st.Write(k, w, d) }); err != nil {
		t.Fatal(err)
	}
	if s, _ := st.Summary(k); s.StartOffset != 10 || s.LeaderEpoch != 2 || s.StateEpoch != 4 || s.DeliveryComplete != 5 {
		t.Fatalf("summary after a write: %+v", s)
	}
	// An older state epoch is fenced (-1 is not checked); an equal or newer one starts afresh.
	if err := storeDo(func(d func(error)) { st.Initialize(k, 3, 0, d) }); !errors.Is(err, ErrFencedState) {
		t.Fatalf("initialize of an older state epoch: %v", err)
	}
	if err := storeDo(func(d func(error)) { st.Initialize(k, 5, 20, d) }); err != nil {
		t.Fatal(err)
	}
	if snap, found, _ := st.Read(k); !found || snap.StartOffset != 20 || snap.LeaderEpoch != 0 || len(snap.Batches) != 0 {
		t.Fatalf("state after the second initialize: %+v", snap)
	}
	// Delete: a tombstone; the key is uninitialized again, also for the next leader.
	if err := storeDo(func(d func(error)) { st.Delete(k, d) }); err != nil {
		t.Fatal(err)
	}
	if _, found, _ := st.Read(k); found {
		t.Fatal("state still there after Delete")
	}
	p := PartitionFor(k, 4)
	recs := log.parts[p]
	if last := recs[len(recs)-1]; last.Value != nil {
		t.Fatalf("Delete wrote %x, want a tombstone", last.Value)
	}
	n := len(recs)
	if err := storeDo(func(d func(error)) { st.Delete(k, d) }); err != nil || len(log.parts[p]) != n {
		t.Fatalf("deleting no state: %v, %d records (want %d)", err, len(log.parts[p]), n)
	}
	next := NewStore(log, 4, nil)
	if err := next.Load(p); err != nil {
		t.Fatal(err)
	}
	if _, found, _ := next.Read(k); found {
		t.Fatal("the deleted state came back on replay")
	}
	if err := storeDo(func(d func(error)) { next.Write(k, w, d) }); !errors.Is(err, ErrUninitialized) {
		t.Fatalf("a stale leader's write after Delete: %v", err)
	}
	// Not loaded here: not the coordinator.
	other := NewStore(log, 4, nil)
	if err := storeDo(func(d func(error)) { other.Initialize(k, 0, 0, d) }); !errors.Is(err, ErrNotCoordinator) {
		t.Fatalf("initialize without the partition: %v", err)
	}
	if _, err := other.Summary(k); !errors.Is(err, ErrNotCoordinator) {
		t.Fatalf("summary without the partition: %v", err)
	}
}

// TestManagerStartsInitializedState: a share partition the group coordinator
// initialized (start -1, its state epoch) gets its start from initial() and keeps the
// state epoch; a deleted one held in memory has its next write refused and is read
// again (here: no state, so the leader initializes it itself at state epoch 0).
func TestManagerStartsInitializedState(t *testing.T) {
	h := newHarness(t, &memLog{})
	k := Key{Group: "g", Partition: 1}
	if err := storeDo(func(d func(error)) { h.store.Initialize(k, 6, -1, d) }); err != nil {
		t.Fatal(err)
	}
	if off := h.ready(k, 0, 42); off != 42 {
		t.Fatalf("fetch offset %d, want 42", off)
	}
	eventually(t, "the start written", func() bool {
		snap, _, _ := h.store.Read(k)
		return snap.StartOffset == 42 && snap.StateEpoch == 6
	})
	h.m.Acquire(k, 0, "m1", 42, 44, 0)
	if err := storeDo(func(d func(error)) { h.store.Delete(k, d) }); err != nil {
		t.Fatal(err)
	}
	if err := h.ack(k, 0, "m1", AckBatch{42, 42, []AckType{AckAccept}}); !errors.Is(err, ErrUninitialized) {
		t.Fatalf("ack after the state was deleted: %v", err)
	}
	if off := h.ready(k, 0, 7); off != 7 {
		t.Fatalf("after the delete the fetch offset is %d, want 7", off)
	}
	if snap, found, _ := h.store.Read(k); !found || snap.StateEpoch != 0 || snap.StartOffset != 7 {
		t.Fatalf("state after the leader initialized it: %+v %v", snap, found)
	}
}

// TestManagerRenewByGroupConfig: share.renew.acknowledge.enable=false (RenewDisabled)
// refuses a renew acknowledgement with INVALID_RECORD_STATE and leaves the lock as it
// was; set back, the next renew restarts the lock.
func TestManagerRenewByGroupConfig(t *testing.T) {
	h := newHarness(t, &memLog{})
	var mu sync.Mutex
	off := true
	h.m = NewManager(ManagerConfig{Partition: testCfg(), Persister: localPersister{h.store}, Clock: h.clock,
		ForGroup: func(string) Config {
			mu.Lock()
			defer mu.Unlock()
			return Config{RenewDisabled: off}
		}})
	k := Key{Group: "g", Partition: 0}
	h.ready(k, 0, 0)
	if got, _ := h.m.Acquire(k, 0, "m1", 0, 2, 0); !slices.Equal(got, []Range{{0, 1, 1}}) {
		t.Fatalf("acquire %v", got)
	}
	renew := func() error {
		ch := make(chan error, 1)
		h.m.Acknowledge(k, 0, "m1", []AckBatch{{0, 1, []AckType{AckRenew}}}, true, func(err error) { ch <- err })
		return <-ch
	}
	h.clock.advance(testCfg().LockDuration / 2)
	if err := renew(); !errors.Is(err, ErrInvalidRecordState) {
		t.Fatalf("renew with renew disabled: %v", err)
	}
	h.clock.advance(testCfg().LockDuration/2 + time.Millisecond)
	if next, _ := h.m.NextFetchOffset(k, 0, nil); next != 0 {
		t.Fatalf("the refused renew extended the lock: fetch offset %d", next)
	}
	mu.Lock()
	off = false
	mu.Unlock()
	h.m.Acquire(k, 0, "m1", 0, 2, 0)
	h.clock.advance(testCfg().LockDuration / 2)
	if err := renew(); err != nil {
		t.Fatalf("renew with renew enabled: %v", err)
	}
	h.clock.advance(testCfg().LockDuration/2 + time.Millisecond)
	if next, _ := h.m.NextFetchOffset(k, 0, nil); next != 2 {
		t.Fatalf("the renewed lock expired early: fetch offset %d", next)
	}
}
