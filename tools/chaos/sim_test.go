package chaos

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// simLog generates the history of a correct log under concurrency: producers with
// many sends in flight, appends at a random instant inside each send's interval, acks
// some time later, readers that poll from their position up to the high watermark,
// a group whose members commit and hand partitions over. mutate, if set, may change
// the log before the readers see it (to plant a bug).
func simLog(seed uint64, mutate func(logs map[int32][]string)) *History {
	rng := rand.New(rand.NewPCG(seed, 1))
	const parts = 3
	b := newHB()
	b.h.Header.Partitions = parts
	b.h.Header.Seed = int64(seed)
	type entry struct {
		v        string
		appended int64
	}
	logs := map[int32][]entry{}
	t := int64(0)
	type pending struct {
		op       Op
		p        int32
		appendAt int64
		ackAt    int64
	}
	var inflight []pending
	seq := map[string]int64{}
	// Sends: 3 producers, 600 sends, up to 20 ms apart, 5..80 ms to append, ack
	// 1..50 ms later. Appends are applied in time order below.
	for i := 0; i < 600; i++ {
		t += int64(rng.IntN(20)) * int64(time.Millisecond)
		proc := fmt.Sprintf("p%d", rng.IntN(3))
		seq[proc]++
		p := int32(rng.IntN(parts))
		app := t + int64(5+rng.IntN(75))*int64(time.Millisecond)
		inflight = append(inflight, pending{op: Op{Proc: proc, F: FSend, Seq: seq[proc], P: p, V: fmt.Sprintf("%s-%d", proc, seq[proc]), Start: t}, p: p, appendAt: app, ackAt: app + int64(1+rng.IntN(50))*int64(time.Millisecond)})
	}
	// One producer's sends to one partition are appended in order (idempotence).
	type pk struct {
		proc string
		p    int32
	}
	last := map[pk]int64{}
	for i := range inflight {
		k := pk{inflight[i].op.Proc, inflight[i].p}
		if inflight[i].appendAt <= last[k] {
			inflight[i].appendAt = last[k] + 1
			if inflight[i].ackAt <= inflight[i].appendAt {
				inflight[i].ackAt = inflight[i].appendAt + 1
			}
		}
		last[k] = inflight[i].appendAt
	}
	order := make([]int, len(inflight))
	for i := range order {
		order[i] = i
	}
	sortBy(order, func(i int) int64 { return inflight[i].appendAt })
	offsets := map[int]int64{}
	for _, i := range order {
		p := inflight[i].p
		offsets[i] = int64(len(logs[p]))
		logs[p] = append(logs[p], entry{inflight[i].op.V, inflight[i].appendAt})
	}
	// Acks, in ack order; one in 20 sends ends unknown (timed out) though appended.
	acks := append([]int(nil), order...)
	sortBy(acks, func(i int) int64 { return inflight[i].ackAt })
	for _, i := range acks {
		op := inflight[i].op
		op.End = inflight[i].ackAt
		if rng.IntN(20) == 0 {
			op.Status, op.Err = Info, "timeout"
		} else {
			op.Status, op.O = OK, offsets[i]
		}
		b.op(op)
	}
	end := t + int64(time.Second)
	if mutate != nil {
		vals := map[int32][]string{}
		for p, l := range logs {
			for _, e := range l {
				vals[p] = append(vals[p], e.v)
			}
		}
		mutate(vals)
		for p := range logs {
			var l []entry
			for i, v := range vals[p] {
				at := int64(0)
				if i < len(logs[p]) {
					at = logs[p][i].appended
				}
				l = append(l, entry{v, at})
			}
			logs[p] = l
		}
	}
	// Readers: two assigned consumers poll every 30 ms what was appended by the poll's
	// start (an ack follows its append, so a poll never sees ahead of the log).
	for _, proc := range []string{"a0", "a1"} {
		b.life(proc, "", 0, float64(end)/1e9)
		cur := map[int32]int{}
		for pt := int64(0); pt < end; pt += 30 * int64(time.Millisecond) {
			var recs []Rec
			for p := int32(0); p < parts; p++ {
				for cur[p] < len(logs[p]) && logs[p][cur[p]].appended <= pt {
					recs = append(recs, Rec{p, int64(cur[p]), logs[p][cur[p]].v})
					cur[p]++
				}
			}
			if len(recs) > 0 {
				b.poll(proc, "", float64(pt)/1e9, float64(pt+int64(time.Millisecond))/1e9, recs...)
			}
		}
	}
	var final []Rec
	for p := int32(0); p < parts; p++ {
		for o, e := range logs[p] {
			final = append(final, Rec{p, int64(o), e.v})
		}
	}
	b.poll(ProcFinal, "", float64(end)/1e9, float64(end)/1e9+0.1, final...)
	return &b.h
}

func sortBy(xs []int, key func(int) int64) {
	for i := 1; i < len(xs); i++ {
		for j := i; j > 0 && key(xs[j]) < key(xs[j-1]); j-- {
			xs[j], xs[j-1] = xs[j-1], xs[j]
		}
	}
}

// TestCheckSimulatedCorrectLogs: no anomaly on correct concurrent histories, and every
// sampled window linearizable.
func TestCheckSimulatedCorrectLogs(t *testing.T) {
	for seed := uint64(1); seed <= 5; seed++ {
		h := simLog(seed, nil)
		res := Check(h, Options{Liveness: time.Minute, Linear: LinearOptions{Windows: 6, Width: 24, Timeout: 10 * time.Second}})
		if !res.Valid {
			t.Errorf("seed %d: %s: %+v", seed, res.Summary(), res.Anomalies[:min(3, len(res.Anomalies))])
		}
		if res.Linear.Ok != len(res.Linear.Windows) || res.Linear.Ok == 0 {
			t.Errorf("seed %d: linear %+v", seed, res.Linear)
		}
	}
}

// TestCheckSimulatedPlantedBugs: a log that drops or reorders records is caught.
func TestCheckSimulatedPlantedBugs(t *testing.T) {
	drop := func(logs map[int32][]string) { // lose offsets 10..14 of p1; later ones move down
		logs[1] = append(logs[1][:10:10], logs[1][15:]...)
	}
	res := Check(simLog(7, drop), Options{Liveness: time.Minute, Linear: LinearOptions{Windows: -1}})
	if res.Counts[KLost] == 0 || res.Counts[KInconsistent] == 0 {
		t.Errorf("dropped records: %s", res.Summary())
	}
	swap := func(logs map[int32][]string) { // two records trade places
		logs[2][20], logs[2][21] = logs[2][21], logs[2][20]
	}
	res = Check(simLog(8, swap), Options{Liveness: time.Minute, Linear: LinearOptions{Windows: -1}})
	if res.Counts[KInconsistent] == 0 || res.Counts[KDuplicate] == 0 {
		t.Errorf("swapped records: %s", res.Summary())
	}
	truncate := func(logs map[int32][]string) { // the tail of p0 vanishes
		logs[0] = logs[0][:len(logs[0])-5]
	}
	res = Check(simLog(9, truncate), Options{Liveness: time.Minute, Linear: LinearOptions{Windows: -1}})
	if res.Counts[KUnseen] == 0 {
		t.Errorf("truncated tail: %s", res.Summary())
	}
}
