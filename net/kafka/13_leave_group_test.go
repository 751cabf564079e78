package kafka

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/samsa-broker/samsa/engine"
)

// ledger records what the members processed and what they committed.
type ledger struct {
	mu         sync.Mutex
	seen       map[string]int  // value -> times processed
	committed  map[int32]int64 // partition -> highest offset known committed
	attempted  map[int32]int64 // partition -> highest offset a commit was sent for
	violations []string
}

func (l *ledger) process(member string, r *kgo.Record) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seen[string(r.Value)]++
	if c, ok := l.committed[r.Partition]; ok && r.Offset < c {
		l.violations = append(l.violations, fmt.Sprintf("%s processed %d/%d after offset %d was committed", member, r.Partition, r.Offset, c))
	}
}

func (l *ledger) commit(recs []*kgo.Record, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range recs {
		if r.Offset+1 > l.attempted[r.Partition] {
			l.attempted[r.Partition] = r.Offset + 1
		}
		if ok && r.Offset+1 > l.committed[r.Partition] {
			l.committed[r.Partition] = r.Offset + 1
		}
	}
}

func (l *ledger) missing(total int) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for i := 0; i < total; i++ {
		if l.seen[fmt.Sprint("v", i)] == 0 {
			n++
		}
	}
	return n
}

// consume runs a member's loop: poll, process, commit synchronously, and only then
// let a rebalance through (BlockRebalanceOnPoll), so what it processed is committed
// before its partitions move.
func consume(ctx context.Context, m *groupMember, l *ledger, wg *sync.WaitGroup) {
	defer wg.Done()
	for ctx.Err() == nil {
		fs := m.cl.PollRecords(ctx, 20)
		if fs.IsClientClosed() {
			return
		}
		recs := fs.Records()
		m.mu.Lock()
		dead := m.dead
		m.mu.Unlock()
		if dead {
			return // a killed process does not go on with what it had buffered
		}
		for _, r := range recs {
			l.process(m.name, r)
		}
		if len(recs) > 0 {
			// not ctx: a commit cut short by the test's end has an unknown outcome
			cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			err := m.cl.CommitRecords(cctx, recs...)
			cancel()
			l.commit(recs, err == nil)
		}
		m.cl.AllowRebalance()
	}
}

// TestGroupConsumption: three members consume a 6-partition topic; one joins late,
// one leaves, one is killed. Every record is processed at least once, none is
// processed again after its offset was committed, and the committed offsets
// survive a broker restart.
func TestGroupConsumption(t *testing.T) {
	for _, bal := range []struct {
		name string
		b    func() kgo.GroupBalancer
	}{{"range", kgo.RangeBalancer}, {"cooperative-sticky", kgo.CooperativeStickyBalancer}} {
		t.Run(bal.name, func(t *testing.T) {
			tb := groupTestBroker(t, engine.SyncFsync)
			mustCreate(t, tb.admin(t), "work", 6, nil)
			producer := tb.client(t, kgo.DefaultProduceTopic("work"), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
			next := 0
			produce := func(n int) {
				t.Helper()
				var recs []*kgo.Record
				for i := 0; i < n; i++ {
					recs = append(recs, &kgo.Record{Value: []byte(fmt.Sprint("v", next))})
					next++
				}
				if err := producer.ProduceSync(testCtx(t), recs...).FirstErr(); err != nil {
					t.Fatal(err)
				}
			}
			l := &ledger{seen: map[string]int{}, committed: map[int32]int64{}, attempted: map[int32]int64{}}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var wg sync.WaitGroup
			g := "work-" + bal.name
			start := func(name string) *groupMember {
				m := newGroupMember(t, tb, name, g, "work", bal.b(),
					kgo.BlockRebalanceOnPoll(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
				wg.Add(1)
				go consume(ctx, m, l, &wg)
				return m
			}
			waitProcessed := func() {
				t.Helper()
				deadline := time.Now().Add(30 * time.Second)
				for l.missing(next) > 0 {
					if time.Now().After(deadline) {
						t.Fatalf("%d of %d records never processed", l.missing(next), next)
					}
					time.Sleep(20 * time.Millisecond) // polling a condition with a deadline
				}
			}
			produce(300)
			a, b, c := start("a"), start("b"), start("c")
			waitProcessed()
			produce(300)
			d := start("late")
			waitProcessed()
			b.cl.CloseAllowingRebalance() // leaves (BlockRebalanceOnPoll: let the revoke through)
			produce(300)
			waitProcessed()
			c.kill() // dies: its session expires
			produce(300)
			waitProcessed()
			cancel()
			wg.Wait()
			for _, m := range []*groupMember{a, c, d} {
				m.cl.CloseAllowingRebalance()
			}
			l.mu.Lock()
			violations, committed, attempted := l.violations, l.committed, l.attempted
			l.mu.Unlock()
			if len(violations) > 0 {
				t.Fatalf("records processed again after commit:\n%v", violations)
			}
			tb.a.Close()
			tb.restart()
			got, err := tb.admin(t).FetchOffsets(testCtx(t), g)
			if err != nil {
				t.Fatal(err)
			}
			// A killed member's last commit may have landed though its answer was
			// lost: the offset lies between what is known committed and what was sent.
			for p, want := range committed {
				if o, ok := got.Lookup("work", p); !ok || o.At < want || o.At > attempted[p] {
					t.Fatalf("partition %d after restart: %+v, committed %d, sent up to %d", p, o, want, attempted[p])
				}
			}
		})
	}
}
