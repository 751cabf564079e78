package workload

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/samsa-broker/samsa/tools/chaos"
	"github.com/twmb/franz-go/pkg/kgo"
)

// FinalDrain reads every partition from its start up to end[p] (the end offsets after
// the quiet period) with a fresh client, as chaos.ProcFinal, recording every poll. It
// returns when every partition is read to its end or ctx ends; the error names the
// partitions left short.
func (w *Workload) FinalDrain(ctx context.Context, end map[int32]int64) error {
	now, wall := w.cfg.History.Now()
	w.append(chaos.Op{Proc: chaos.ProcFinal, F: chaos.FEvent, Status: chaos.OK, Start: now, End: now, Wall: wall, V: "end-offsets", Offs: end})
	parts := map[int32]kgo.Offset{}
	for p := int32(0); p < w.cfg.Partitions; p++ {
		parts[p] = kgo.NewOffset().AtStart()
	}
	c := &consumer{w: w, proc: chaos.ProcFinal}
	cl, err := kgo.NewClient(append(w.common(chaos.ProcFinal), kgo.FetchMaxWait(200*time.Millisecond),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{w.cfg.Topic: parts}))...)
	if err != nil {
		return fmt.Errorf("workload: final reader: %w", err)
	}
	c.cl = cl
	defer cl.Close()
	w.lifeOp(chaos.ProcFinal, "", chaos.FOpen, nil)
	defer w.lifeOp(chaos.ProcFinal, "", chaos.FClose, nil)
	for {
		short := w.short(end)
		if len(short) == 0 {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("workload: final read incomplete: %s", strings.Join(short, ", "))
		}
		c.pollOnce(ctx, chaos.ProcFinal, "")
	}
}

// short lists the partitions the final reader has not read up to end.
func (w *Workload) short(end map[int32]int64) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	ps := make([]int32, 0, len(end))
	for p := range end {
		ps = append(ps, p)
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
	for _, p := range ps {
		if end[p] <= 0 {
			continue
		}
		got, ok := w.mu.maxRead[chaos.ProcFinal][p]
		if !ok || got < end[p]-1 {
			have := "nothing"
			if ok {
				have = fmt.Sprintf("up to %d", got)
			}
			out = append(out, fmt.Sprintf("p%d read %s of end %d", p, have, end[p]))
		}
	}
	return out
}
