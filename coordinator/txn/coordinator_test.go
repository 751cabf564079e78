package txn

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var (
	tpA = TopicPartition{"a", 0}
	tpB = TopicPartition{"b", 3}
)

func wantCode(t *testing.T, what string, got, want int16) {
	t.Helper()
	if got != want {
		t.Fatalf("%s: %v, want %v", what, kerr.ErrorForCode(got), kerr.ErrorForCode(want))
	}
}

func TestCommitAndAbortWriteMarkers(t *testing.T) {
	h := newHarness(t, nil)
	r := h.init("tx", 10_000, -1, -1)
	wantCode(t, "init", r.ErrorCode, 0)
	if r.ProducerID != 1000 || r.ProducerEpoch != 0 {
		t.Fatalf("init gave %d/%d", r.ProducerID, r.ProducerEpoch)
	}
	pid := r.ProducerID
	wantCode(t, "add", h.add("tx", pid, 0, tpA, tpB), 0)
	wantCode(t, "add again", h.add("tx", pid, 0, tpA), 0)
	if d := h.describe("tx"); d.State != "Ongoing" || len(d.Topics) != 2 || d.TimeoutMillis != 10_000 {
		t.Fatalf("describe %+v", d)
	}
	e := h.end("tx", pid, 0, true, 3)
	wantCode(t, "commit", e.ErrorCode, 0)
	want := []writtenMarker{{tpA, pid, 0, true, 1}, {tpB, pid, 0, true, 1}}
	if got := h.markers.markers(); !sameMarkers(got, want) {
		t.Fatalf("markers %+v", got)
	}
	if d := h.describe("tx"); d.State != "CompleteCommit" || len(d.Topics) != 0 {
		t.Fatalf("after the markers %+v", d)
	}
	// The log holds Kafka's sequence of states.
	var states []State
	h.log.Replay(PartitionFor("tx", 4), func(rec Record) error {
		v, err := DecodeValue(rec.Value)
		if err != nil {
			t.Fatal(err)
		}
		states = append(states, v.State)
		return nil
	})
	if !reflect.DeepEqual(states, []State{Empty, Ongoing, PrepareCommit, CompleteCommit}) {
		t.Fatalf("logged states %v", states)
	}
	// A retry of the commit is fine, an abort of it is not; a new
	// transaction then aborts.
	wantCode(t, "commit retry", h.end("tx", pid, 0, true, 3).ErrorCode, 0)
	wantCode(t, "abort after commit", h.end("tx", pid, 0, false, 3).ErrorCode, kerr.InvalidTxnState.Code)
	wantCode(t, "add", h.add("tx", pid, 0, tpB), 0)
	wantCode(t, "abort", h.end("tx", pid, 0, false, 3).ErrorCode, 0)
	if got := h.markers.markers(); len(got) != 3 || got[2] != (writtenMarker{tpB, pid, 0, false, 1}) {
		t.Fatalf("abort markers %+v", got)
	}
	wantCode(t, "end with no transaction", h.end("tx", pid, 0, true, 3).ErrorCode, kerr.InvalidTxnState.Code)
}

func sameMarkers(got, want []writtenMarker) bool {
	m := map[writtenMarker]int{}
	for _, w := range got {
		m[w]++
	}
	for _, w := range want {
		m[w]--
	}
	for _, n := range m {
		if n != 0 {
			return false
		}
	}
	return true
}

func TestInitProducerIDEpochsAndFencing(t *testing.T) {
	h := newHarness(t, nil)
	wantCode(t, "no timeout", h.init("tx", 0, -1, -1).ErrorCode, kerr.InvalidTransactionTimeout.Code)
	wantCode(t, "too long", h.init("tx", 61_000, -1, -1).ErrorCode, kerr.InvalidTransactionTimeout.Code)
	wantCode(t, "epoch without id", h.init("tx", 1000, -1, 3).ErrorCode, kerr.InvalidRequest.Code)
	r0 := h.init("tx", 1000, -1, -1)
	r1 := h.init("tx", 1000, -1, -1)
	if r1.ProducerID != r0.ProducerID || r1.ProducerEpoch != 1 {
		t.Fatalf("second init %d/%d", r1.ProducerID, r1.ProducerEpoch)
	}
	pid := r0.ProducerID
	// The fenced producer (epoch 0) is refused everywhere.
	wantCode(t, "fenced add", h.add("tx", pid, 0, tpA), kerr.ProducerFenced.Code)
	wantCode(t, "fenced end", h.end("tx", pid, 0, true, 3).ErrorCode, kerr.ProducerFenced.Code)
	wantCode(t, "fenced end v1", h.end("tx", pid, 0, true, 1).ErrorCode, kerr.InvalidProducerEpoch.Code)
	wantCode(t, "wrong producer", h.add("tx", pid+7, 1, tpA), kerr.InvalidProducerIDMapping.Code)
	// KIP-360: the current epoch bumps, the last one is a retry, others are fenced.
	r2 := h.init("tx", 1000, pid, 1)
	if r2.ErrorCode != 0 || r2.ProducerEpoch != 2 {
		t.Fatalf("init with the current epoch: %+v", r2)
	}
	r3 := h.init("tx", 1000, pid, 1)
	if r3.ErrorCode != 0 || r3.ProducerEpoch != 2 {
		t.Fatalf("retry with the last epoch: %+v", r3)
	}
	wantCode(t, "init with an old epoch", h.init("tx", 1000, pid, 0).ErrorCode, kerr.ProducerFenced.Code)
	wantCode(t, "init with another producer id", h.init("tx", 1000, pid+9, 2).ErrorCode, kerr.ProducerFenced.Code)

	// An InitProducerId during a transaction fences it: its epoch bumped,
	// the transaction aborted, CONCURRENT_TRANSACTIONS until then.
	wantCode(t, "add", h.add("tx", pid, 2, tpA), 0)
	h.markers.manual = true
	wantCode(t, "init during a transaction", h.init("tx", 1000, -1, -1).ErrorCode, kerr.ConcurrentTransactions.Code)
	if d := h.describe("tx"); d.State != "PrepareAbort" || d.ProducerEpoch != 3 {
		t.Fatalf("fenced: %+v", d)
	}
	wantCode(t, "init while the markers go", h.init("tx", 1000, -1, -1).ErrorCode, kerr.ConcurrentTransactions.Code)
	wantCode(t, "old producer's end", h.end("tx", pid, 2, true, 3).ErrorCode, kerr.ProducerFenced.Code)
	h.markers.answer(h.markers.take(), nil)
	if got := h.markers.markers(); len(got) != 1 || got[0] != (writtenMarker{tpA, pid, 3, false, 1}) {
		t.Fatalf("fence markers %+v", got)
	}
	r4 := h.init("tx", 1000, -1, -1)
	if r4.ErrorCode != 0 || r4.ProducerEpoch != 4 {
		t.Fatalf("init after the fence: %+v", r4)
	}
}

func TestEpochExhaustionRotatesProducerID(t *testing.T) {
	h := newHarness(t, nil)
	r := h.init("tx", 1000, -1, -1)
	part := h.c.mu.parts[PartitionFor("tx", 4)]
	part.txns["tx"].epoch = math.MaxInt16 - 1
	r2 := h.init("tx", 1000, r.ProducerID, math.MaxInt16-1)
	if r2.ErrorCode != 0 || r2.ProducerID == r.ProducerID || r2.ProducerEpoch != 0 {
		t.Fatalf("rotation: %+v", r2)
	}
	// A retry of the rotation (the client has the old id and exhausted epoch).
	r3 := h.init("tx", 1000, r.ProducerID, math.MaxInt16-1)
	if r3.ErrorCode != 0 || r3.ProducerID != r2.ProducerID || r3.ProducerEpoch != 0 {
		t.Fatalf("retry of the rotation: %+v", r3)
	}
}

// TestTransactionVersion2 is KIP-890 part 2: EndTxn v5 bumps the epoch,
// the markers carry the bumped epoch, a retry with the old epoch is
// recognised, an abort with no transaction bumps too, and an exhausted
// epoch moves to a new producer id at the completion.
func TestTransactionVersion2(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.TransactionVersion = 2 })
	r := h.init("tx", 1000, -1, -1)
	pid := r.ProducerID
	wantCode(t, "add", h.add("tx", pid, 0, tpA), 0)
	e := h.end("tx", pid, 0, true, 5)
	if e.ErrorCode != 0 || e.ProducerID != pid || e.ProducerEpoch != 1 {
		t.Fatalf("end v5: %+v", e)
	}
	if got := h.markers.markers(); len(got) != 1 || got[0] != (writtenMarker{tpA, pid, 1, true, 1}) {
		t.Fatalf("markers %+v", got)
	}
	if e := h.end("tx", pid, 0, true, 5); e.ErrorCode != 0 || e.ProducerEpoch != 1 {
		t.Fatalf("retry with the epoch before the bump: %+v", e)
	}
	wantCode(t, "old epoch after the bump", h.add("tx", pid, 0, tpA), kerr.ProducerFenced.Code)
	if e := h.end("tx", pid, 1, false, 5); e.ErrorCode != 0 || e.ProducerEpoch != 2 {
		t.Fatalf("empty abort: %+v", e)
	}
	wantCode(t, "empty commit", h.end("tx", pid, 2, true, 5).ErrorCode, kerr.InvalidTxnState.Code)
	// Version 2 records are TransactionLogValue v1.
	v := h.log.states(t, PartitionFor("tx", 4))["tx"]
	if v.Version != 1 || v.ClientTxnVersion != 2 || v.State != CompleteAbort || v.ProducerEpoch != 2 {
		t.Fatalf("logged %+v", v)
	}
	// Exhaustion: the end hands out the next producer id.
	h.c.mu.parts[PartitionFor("tx", 4)].txns["tx"].epoch = math.MaxInt16 - 1
	wantCode(t, "add", h.add("tx", pid, math.MaxInt16-1, tpA), 0)
	e = h.end("tx", pid, math.MaxInt16-1, true, 5)
	if e.ErrorCode != 0 || e.ProducerID == pid || e.ProducerEpoch != 0 {
		t.Fatalf("end at an exhausted epoch: %+v", e)
	}
	if d := h.describe("tx"); d.ProducerID != e.ProducerID || d.ProducerEpoch != 0 || d.State != "CompleteCommit" {
		t.Fatalf("after the overflow %+v", d)
	}
	if e2 := h.end("tx", pid, math.MaxInt16-1, true, 5); e2.ErrorCode != 0 {
		t.Fatalf("retry after the overflow: %+v", e2)
	}
	// A v4 client of a version-2 coordinator keeps its epoch.
	wantCode(t, "add", h.add("tx", e.ProducerID, 0, tpB), 0)
	if e := h.end("tx", e.ProducerID, 0, true, 4); e.ErrorCode != 0 || e.ProducerEpoch != 0 {
		t.Fatalf("end v4: %+v", e)
	}
}

func TestTimeoutAbortsAndFences(t *testing.T) {
	h := newHarness(t, nil)
	r := h.init("tx", 5000, -1, -1)
	pid := r.ProducerID
	wantCode(t, "add", h.add("tx", pid, 0, tpA), 0)
	h.clock.advance(4 * time.Second)
	if d := h.describe("tx"); d.State != "Ongoing" {
		t.Fatalf("before the timeout %+v", d)
	}
	h.clock.advance(2 * time.Second)
	d := h.describe("tx")
	if d.State != "CompleteAbort" || d.ProducerEpoch != 1 {
		t.Fatalf("after the timeout %+v", d)
	}
	if got := h.markers.markers(); len(got) != 1 || got[0] != (writtenMarker{tpA, pid, 1, false, 1}) {
		t.Fatalf("markers %+v", got)
	}
	wantCode(t, "the timed-out producer's commit", h.end("tx", pid, 0, true, 3).ErrorCode, kerr.ProducerFenced.Code)
}

func TestExpirationRemovesIdleIDs(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.IDExpiration = time.Minute; c.ExpirationInterval = 10 * time.Second })
	r := h.init("idle", 1000, -1, -1)
	h.init("busy", 1000, -1, -1)
	for i := 0; i < 5; i++ {
		h.clock.advance(15 * time.Second)
		h.init("busy", 1000, -1, -1)
	}
	wantCode(t, "idle", h.describe("idle").ErrorCode, kerr.TransactionalIDNotFound.Code)
	wantCode(t, "busy", h.describe("busy").ErrorCode, 0)
	if _, ok := h.log.states(t, PartitionFor("idle", 4))["idle"]; ok {
		t.Fatal("no tombstone for the expired id")
	}
	// Coming back gets a new producer id.
	if r2 := h.init("idle", 1000, -1, -1); r2.ProducerID == r.ProducerID {
		t.Fatalf("expired id kept its producer id %d", r2.ProducerID)
	}
}

// TestFailoverCompletesPreparedTransaction: a coordinator that logged
// PrepareCommit and lost its partition before the markers went; the next
// one loads the partition, writes the markers with its epoch and
// completes.
func TestFailoverCompletesPreparedTransaction(t *testing.T) {
	h := newHarness(t, nil)
	r := h.init("tx", 60_000, -1, -1)
	pid := r.ProducerID
	wantCode(t, "add", h.add("tx", pid, 0, tpA, tpB), 0)
	h.markers.manual = true
	wantCode(t, "commit", h.end("tx", pid, 0, true, 3).ErrorCode, 0)
	if s := h.markers.take(); s == nil {
		t.Fatal("no marker request")
	} // lost with its coordinator
	h.markers.manual = false
	h.start() // coordinator epoch 2
	if got := h.markers.markers(); !sameMarkers(got, []writtenMarker{{tpA, pid, 0, true, 2}, {tpB, pid, 0, true, 2}}) {
		t.Fatalf("markers after failover %+v", got)
	}
	if d := h.describe("tx"); d.State != "CompleteCommit" {
		t.Fatalf("after failover %+v", d)
	}
	// The new coordinator carries on with the id.
	if r2 := h.init("tx", 60_000, pid, 0); r2.ErrorCode != 0 || r2.ProducerEpoch != 1 {
		t.Fatalf("init after failover %+v", r2)
	}
}

func TestMarkerRetriesAndDroppedPartitions(t *testing.T) {
	h := newHarness(t, nil)
	pid := h.init("tx", 60_000, -1, -1).ProducerID
	gone := TopicPartition{"deleted", 0}
	wantCode(t, "add", h.add("tx", pid, 0, tpA, tpB, gone), 0)
	h.markers.gone[gone] = true
	h.markers.leaders[tpB] = -1                            // no leader for now
	h.markers.codes[tpA] = kerr.NotLeaderForPartition.Code // moving
	wantCode(t, "commit", h.end("tx", pid, 0, true, 3).ErrorCode, 0)
	if d := h.describe("tx"); d.State != "PrepareCommit" {
		t.Fatalf("%+v", d)
	}
	h.markers.codes[tpA] = 0
	h.clock.advance(100 * time.Millisecond)
	if got := h.markers.markers(); len(got) != 1 || got[0].tp != tpA {
		t.Fatalf("after the retry %+v", got)
	}
	h.markers.leaders[tpB] = 2
	h.clock.advance(100 * time.Millisecond)
	if d := h.describe("tx"); d.State != "CompleteCommit" {
		t.Fatalf("after the leader came back %+v", d)
	}
	// A network failure retries; a fenced coordinator stops.
	wantCode(t, "add", h.add("tx", pid, 0, tpA), 0)
	h.markers.manual = true
	wantCode(t, "abort", h.end("tx", pid, 0, false, 3).ErrorCode, 0)
	h.markers.answer(h.markers.take(), errNetwork)
	h.clock.advance(100 * time.Millisecond)
	s := h.markers.take()
	if s == nil {
		t.Fatal("no retry after a network failure")
	}
	h.markers.codes[tpA] = kerr.TransactionCoordinatorFenced.Code
	h.markers.answer(s, nil)
	h.clock.advance(time.Second)
	if h.markers.take() != nil {
		t.Fatal("markers sent again by a fenced coordinator")
	}
	if d := h.describe("tx"); d.State != "PrepareAbort" {
		t.Fatalf("fenced coordinator's transaction %+v", d)
	}
}

func TestLogFailures(t *testing.T) {
	h := newHarness(t, nil)
	pid := h.init("tx", 60_000, -1, -1).ProducerID
	h.log.fail = fmt.Errorf("%w: moved", ErrNotLeader)
	wantCode(t, "add to a moved partition", h.add("tx", pid, 0, tpA), kerr.NotCoordinator.Code)
	h.log.fail = errors.New("not enough replicas")
	wantCode(t, "add without replicas", h.add("tx", pid, 0, tpA), kerr.CoordinatorNotAvailable.Code)
	h.log.fail = nil
	wantCode(t, "add once it works", h.add("tx", pid, 0, tpA), 0)
	// A completion that fails is retried until logged.
	h.log.fail = errors.New("not enough replicas")
	wantCode(t, "prepare", h.end("tx", pid, 0, true, 3).ErrorCode, kerr.CoordinatorNotAvailable.Code)
	h.log.fail = nil
	wantCode(t, "prepare", h.end("tx", pid, 0, true, 3).ErrorCode, 0)
	if d := h.describe("tx"); d.State != "CompleteCommit" {
		t.Fatalf("%+v", d)
	}
	// An append answered after the partition moved applies nothing.
	h.log.manual = true
	wantCode(t, "add", func() int16 {
		req := kmsg.NewPtrAddPartitionsToTxnRequest()
		req.Version, req.TransactionalID, req.ProducerID, req.ProducerEpoch = 3, "tx", pid, 0
		rt := kmsg.NewAddPartitionsToTxnRequestTopic()
		rt.Topic, rt.Partitions = "a", []int32{0}
		req.Topics = append(req.Topics, rt)
		var got int16 = -99
		h.c.AddPartitionsToTxn(req, nil, func(r *kmsg.AddPartitionsToTxnResponse) { got = r.Topics[0].Partitions[0].ErrorCode })
		h.c.UnloadPartition(PartitionFor("tx", 4), -1)
		h.log.completeAll()
		return got
	}(), kerr.NotCoordinator.Code)
	wantCode(t, "unloaded", h.c.Status("tx"), kerr.NotCoordinator.Code)
}

func TestAddPartitionsVersions(t *testing.T) {
	h := newHarness(t, nil)
	pid := h.init("tx", 60_000, -1, -1).ProducerID
	// A check failing one partition: the others are not attempted.
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.Version, req.TransactionalID, req.ProducerID, req.ProducerEpoch = 3, "tx", pid, 0
	for _, tp := range []TopicPartition{tpA, {"nope", 0}} {
		rt := kmsg.NewAddPartitionsToTxnRequestTopic()
		rt.Topic, rt.Partitions = tp.Topic, []int32{tp.Partition}
		req.Topics = append(req.Topics, rt)
	}
	check := func(topic string, p int32) int16 {
		if topic == "nope" {
			return kerr.UnknownTopicOrPartition.Code
		}
		return 0
	}
	resp := call(t, func(done func(*kmsg.AddPartitionsToTxnResponse)) { h.c.AddPartitionsToTxn(req, check, done) })
	wantCode(t, "checked", resp.Topics[0].Partitions[0].ErrorCode, kerr.OperationNotAttempted.Code)
	wantCode(t, "unknown", resp.Topics[1].Partitions[0].ErrorCode, kerr.UnknownTopicOrPartition.Code)
	// v4: a batch with an add and a verification.
	wantCode(t, "add", h.add("tx", pid, 0, tpA), 0)
	v4 := kmsg.NewPtrAddPartitionsToTxnRequest()
	v4.Version = 4
	for _, verify := range []bool{true, false} {
		tr := kmsg.NewAddPartitionsToTxnRequestTransaction()
		tr.TransactionalID, tr.ProducerID, tr.ProducerEpoch, tr.VerifyOnly = "tx", pid, 0, verify
		for _, tp := range []TopicPartition{tpA, tpB} {
			rt := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
			rt.Topic, rt.Partitions = tp.Topic, []int32{tp.Partition}
			tr.Topics = append(tr.Topics, rt)
		}
		v4.Transactions = append(v4.Transactions, tr)
	}
	r4 := call(t, func(done func(*kmsg.AddPartitionsToTxnResponse)) { h.c.AddPartitionsToTxn(v4, nil, done) })
	ver := r4.Transactions[0]
	wantCode(t, "verified a", ver.Topics[0].Partitions[0].ErrorCode, 0)
	wantCode(t, "verified b", ver.Topics[1].Partitions[0].ErrorCode, kerr.TransactionAbortable.Code)
	wantCode(t, "added b", r4.Transactions[1].Topics[1].Partitions[0].ErrorCode, 0)
	if d := h.describe("tx"); len(d.Topics) != 2 {
		t.Fatalf("%+v", d)
	}
	codes := h.c.VerifyPartitions("tx", pid, 1, []TopicPartition{tpA})
	wantCode(t, "verify with another epoch", codes[tpA], kerr.ProducerFenced.Code)
	// AddOffsetsToTxn adds the group's __consumer_offsets partition.
	ao := kmsg.NewPtrAddOffsetsToTxnRequest()
	ao.TransactionalID, ao.ProducerID, ao.ProducerEpoch, ao.Group = "tx", pid, 0, "g"
	aor := call(t, func(done func(*kmsg.AddOffsetsToTxnResponse)) { h.c.AddOffsetsToTxn(ao, done) })
	wantCode(t, "add offsets", aor.ErrorCode, 0)
	found := false
	for _, tp := range h.describe("tx").Topics {
		found = found || tp.Topic == OffsetsTopic && tp.Partitions[0] == PartitionFor("g", 50)
	}
	if !found {
		t.Fatalf("offsets partition not in %+v", h.describe("tx").Topics)
	}
}

func TestListTransactions(t *testing.T) {
	h := newHarness(t, nil)
	for i := 0; i < 4; i++ {
		pid := h.init(fmt.Sprint("app-", i), 60_000, -1, -1).ProducerID
		if i%2 == 0 {
			wantCode(t, "add", h.add(fmt.Sprint("app-", i), pid, 0, tpA), 0)
		}
	}
	h.init("other", 60_000, -1, -1)
	list := func(mod func(*kmsg.ListTransactionsRequest)) *kmsg.ListTransactionsResponse {
		req := kmsg.NewPtrListTransactionsRequest()
		req.Version = 2
		mod(req)
		return h.c.ListTransactions(req)
	}
	ids := func(r *kmsg.ListTransactionsResponse) []string {
		var out []string
		for _, s := range r.TransactionStates {
			out = append(out, s.TransactionalID)
		}
		return out
	}
	if got := ids(list(func(*kmsg.ListTransactionsRequest) {})); len(got) != 5 {
		t.Fatalf("all: %v", got)
	}
	r := list(func(r *kmsg.ListTransactionsRequest) { r.StateFilters = []string{"Ongoing", "Bogus"} })
	if got := ids(r); !reflect.DeepEqual(got, []string{"app-0", "app-2"}) || !reflect.DeepEqual(r.UnknownStateFilters, []string{"Bogus"}) {
		t.Fatalf("ongoing: %v %v", got, r.UnknownStateFilters)
	}
	pat := "app-[13]"
	if got := ids(list(func(r *kmsg.ListTransactionsRequest) { r.TransactionalIDPattern = &pat })); !reflect.DeepEqual(got, []string{"app-1", "app-3"}) {
		t.Fatalf("pattern: %v", got)
	}
	bad := "("
	wantCode(t, "bad pattern", list(func(r *kmsg.ListTransactionsRequest) { r.TransactionalIDPattern = &bad }).ErrorCode,
		kerr.InvalidRegularExpression.Code)
	h.clock.advance(30 * time.Second)
	if got := ids(list(func(r *kmsg.ListTransactionsRequest) { r.DurationFilterMillis = 20_000 })); !reflect.DeepEqual(got,
		[]string{"app-0", "app-1", "app-2", "app-3", "other"}) {
		// Empty ones have no start: they count as started long ago, as in Kafka.
		t.Fatalf("duration: %v", got)
	}
}

func TestStatusWhileLoading(t *testing.T) {
	h := newHarness(t, nil)
	wantCode(t, "served", h.c.Status("x"), 0)
	c := New(h.cfg, h.log, h.markers, h.pids)
	defer c.Close()
	wantCode(t, "not owned", c.Status("x"), kerr.NotCoordinator.Code)
	c.mu.Lock()
	c.mu.parts[PartitionFor("x", 4)] = &partition{id: PartitionFor("x", 4), epoch: 1, loading: true, txns: map[string]*txnMeta{}}
	c.mu.Unlock()
	wantCode(t, "loading", c.Status("x"), kerr.CoordinatorLoadInProgress.Code)
}

// An AddPartitionsToTxn of the next transaction, sent while the last one's markers
// are still being written, waits for its end and is then served (instead of
// CONCURRENT_TRANSACTIONS and a client backoff); if the end does not come within
// addWaitMax it is answered CONCURRENT_TRANSACTIONS.
func TestAddWaitsForTheLastTransactionsEnd(t *testing.T) {
	h := newHarness(t, nil)
	pid := h.init("tx", 10_000, -1, -1).ProducerID
	wantCode(t, "add", h.add("tx", pid, 0, tpA), 0)
	h.markers.manual = true
	wantCode(t, "commit", h.end("tx", pid, 0, true, 3).ErrorCode, 0)

	// addAsync sends the next transaction's AddPartitionsToTxn; the code is set
	// once it is answered.
	addAsync := func() *int16 {
		req := kmsg.NewPtrAddPartitionsToTxnRequest()
		req.Version, req.TransactionalID, req.ProducerID, req.ProducerEpoch = 3, "tx", pid, 0
		rt := kmsg.NewAddPartitionsToTxnRequestTopic()
		rt.Topic, rt.Partitions = tpB.Topic, []int32{tpB.Partition}
		req.Topics = append(req.Topics, rt)
		code := int16(-100) // unanswered
		h.c.AddPartitionsToTxn(req, nil, func(resp *kmsg.AddPartitionsToTxnResponse) {
			code = resp.Topics[0].Partitions[0].ErrorCode
		})
		return &code
	}
	const unanswered = -100
	got := addAsync()
	if *got != unanswered {
		t.Fatalf("answered %v while the markers are being written", kerr.ErrorForCode(*got))
	}
	h.markers.answer(h.markers.take(), nil) // the marker, then the completion is logged
	if *got != 0 {
		t.Fatalf("after the end: %v", kerr.ErrorForCode(*got))
	}
	if d := h.describe("tx"); d.State != "Ongoing" || len(d.Topics) != 1 {
		t.Fatalf("the next transaction: %+v", d)
	}

	// Markers that never get written: CONCURRENT_TRANSACTIONS after addWaitMax.
	wantCode(t, "commit", h.end("tx", pid, 0, true, 3).ErrorCode, 0)
	got = addAsync()
	if *got != unanswered {
		t.Fatalf("answered %v at once", kerr.ErrorForCode(*got))
	}
	h.clock.advance(addWaitMax)
	if *got != kerr.ConcurrentTransactions.Code {
		t.Fatalf("after the wait: %v", kerr.ErrorForCode(*got))
	}
}

// Transaction version 2: an EndTxn at the bumped epoch, sent while the last
// transaction's markers are still being written (franz-go's
// GroupTransactSession aborts its next, empty transaction right after a commit
// when a rebalance revokes it), is the next transaction's end: it waits for the
// last end and is then served as an empty abort, instead of PRODUCER_FENCED,
// which fenced an exactly-once pipeline by its own epoch bump (Kafka's
// KAFKA-18464). Without the end within addWaitMax it is
// CONCURRENT_TRANSACTIONS, which the client retries; an epoch below the bump
// that is not a retry of it is still fenced.
func TestEndTxnWaitsForTheLastTransactionsEnd(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.TransactionVersion = 2 })
	pid := h.init("tx", 10_000, -1, -1).ProducerID
	wantCode(t, "add", h.add("tx", pid, 0, tpA), 0)
	h.markers.manual = true
	if e := h.end("tx", pid, 0, true, 5); e.ErrorCode != 0 || e.ProducerEpoch != 1 {
		t.Fatalf("commit: %+v", e)
	}
	endAsync := func(epoch int16, commit bool) **kmsg.EndTxnResponse {
		req := kmsg.NewPtrEndTxnRequest()
		req.Version, req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = 5, "tx", pid, epoch, commit
		var got *kmsg.EndTxnResponse
		h.c.EndTxn(req, func(r *kmsg.EndTxnResponse) { got = r })
		return &got
	}
	got := endAsync(1, false)
	if *got != nil {
		t.Fatalf("answered %v while the markers are being written", kerr.ErrorForCode((*got).ErrorCode))
	}
	h.markers.answer(h.markers.take(), nil) // the commit's marker, then its completion
	if *got == nil || (*got).ErrorCode != 0 || (*got).ProducerEpoch != 2 {
		t.Fatalf("the abort after the commit's end: %+v", *got)
	}
	if d := h.describe("tx"); d.State != "PrepareAbort" && d.State != "CompleteAbort" || d.ProducerEpoch != 2 {
		t.Fatalf("after the empty abort: %+v", d)
	}
	h.markers.manual = false

	// An end that does not come: CONCURRENT_TRANSACTIONS after addWaitMax.
	wantCode(t, "add", h.add("tx", pid, 2, tpA), 0)
	h.markers.manual = true
	if e := h.end("tx", pid, 2, true, 5); e.ErrorCode != 0 || e.ProducerEpoch != 3 {
		t.Fatalf("commit: %+v", e)
	}
	got = endAsync(3, false)
	if *got != nil {
		t.Fatalf("answered at once: %+v", *got)
	}
	h.clock.advance(addWaitMax)
	if *got == nil || (*got).ErrorCode != kerr.ConcurrentTransactions.Code {
		t.Fatalf("after the wait: %+v", *got)
	}
	// A stale epoch (neither the current one nor a retry of the bump) is fenced
	// once the end is over.
	h.markers.answer(h.markers.take(), nil)
	wantCode(t, "stale epoch", h.end("tx", pid, 1, false, 5).ErrorCode, kerr.ProducerFenced.Code)
}

// Under transaction version 2 each partition leader adds its own partitions to
// the producer's transaction (Produce v12), so the additions of one transaction
// arrive together from several brokers. One that comes while another's
// transition is being logged waits for it and is then served, instead of
// CONCURRENT_TRANSACTIONS (which a franz-go producer met on every transaction
// spread over three nodes, each retry waiting for a metadata refresh); if the
// transition is still not logged after addWaitMax it is CONCURRENT_TRANSACTIONS.
func TestAddWaitsForAnotherAddition(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.TransactionVersion = 2 })
	pid := h.init("tx", 10_000, -1, -1).ProducerID
	h.log.manual = true
	addAsync := func(tp TopicPartition) *int16 {
		req := kmsg.NewPtrAddPartitionsToTxnRequest()
		req.Version = 5
		tr := kmsg.NewAddPartitionsToTxnRequestTransaction()
		tr.TransactionalID, tr.ProducerID, tr.ProducerEpoch = "tx", pid, 0
		rt := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
		rt.Topic, rt.Partitions = tp.Topic, []int32{tp.Partition}
		tr.Topics = append(tr.Topics, rt)
		req.Transactions = append(req.Transactions, tr)
		code := int16(-100) // unanswered
		h.c.AddPartitionsToTxn(req, nil, func(resp *kmsg.AddPartitionsToTxnResponse) {
			code = resp.Transactions[0].Topics[0].Partitions[0].ErrorCode
		})
		return &code
	}
	const unanswered = -100
	a, b := addAsync(tpA), addAsync(tpB)
	if *a != unanswered || *b != unanswered {
		t.Fatalf("answered %d and %d before the first addition is logged", *a, *b)
	}
	p := PartitionFor("tx", 4)
	h.log.complete(p, true, nil) // the first addition; the second is then logged
	if *a != 0 || *b != unanswered {
		t.Fatalf("after the first addition: %d and %d", *a, *b)
	}
	h.log.complete(p, true, nil)
	if *b != 0 {
		t.Fatalf("the second addition: %v", kerr.ErrorForCode(*b))
	}
	if d := h.describe("tx"); d.State != "Ongoing" || len(d.Topics) != 2 {
		t.Fatalf("both partitions in the transaction: %+v", d)
	}

	// A transition that is not logged in time: CONCURRENT_TRANSACTIONS.
	c := addAsync(TopicPartition{"c", 0})
	d := addAsync(TopicPartition{"d", 0})
	h.clock.advance(addWaitMax)
	if *c != unanswered || *d != kerr.ConcurrentTransactions.Code {
		t.Fatalf("after the wait: %d and %d", *c, *d)
	}
	h.log.complete(p, true, nil)
	if *c != 0 {
		t.Fatalf("the logged addition: %v", kerr.ErrorForCode(*c))
	}
}

// TestSetTransactionVersion: the level changes at run time (the cluster finalized
// another transaction.version): at 1 an EndTxn v5 keeps the epoch, after
// SetTransactionVersion(2) the next one bumps it, and back at 1 it keeps it again.
func TestSetTransactionVersion(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.TransactionVersion = 1 })
	pid := h.init("tx", 1000, -1, -1).ProducerID
	wantCode(t, "add", h.add("tx", pid, 0, tpA), 0)
	if e := h.end("tx", pid, 0, true, 5); e.ErrorCode != 0 || e.ProducerEpoch != 0 {
		t.Fatalf("end v5 at transaction.version 1: %+v", e)
	}
	h.c.SetTransactionVersion(2)
	if h.c.TransactionVersion() != 2 {
		t.Fatal("level not set")
	}
	wantCode(t, "add", h.add("tx", pid, 0, tpA), 0)
	if e := h.end("tx", pid, 0, true, 5); e.ErrorCode != 0 || e.ProducerEpoch != 1 {
		t.Fatalf("end v5 at transaction.version 2: %+v", e)
	}
	if v := h.log.states(t, PartitionFor("tx", 4))["tx"]; v.Version != 1 {
		t.Fatalf("records at 2 are TransactionLogValue v1: %+v", v)
	}
	h.c.SetTransactionVersion(1)
	wantCode(t, "add", h.add("tx", pid, 1, tpA), 0)
	if e := h.end("tx", pid, 1, true, 5); e.ErrorCode != 0 || e.ProducerEpoch != 1 {
		t.Fatalf("end v5 back at transaction.version 1: %+v", e)
	}
}
