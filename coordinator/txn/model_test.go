package txn

import (
	"fmt"
	"math/rand"
	"os"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// txnModel is the reference state machine of one transactional id, as a
// client sees it when every append and marker succeeds at once: what each
// request must answer, and the state, epoch, partitions and markers after
// it.
type txnModel struct {
	v2      bool
	known   bool
	pid     int64
	epoch   int16
	state   State
	parts   map[TopicPartition]bool
	markers []writtenMarker // expected so far
}

func (m *txnModel) endMarkers(commit bool, epoch int16) {
	for _, tp := range sortedTPs(m.parts) {
		m.markers = append(m.markers, writtenMarker{tp, m.pid, epoch, commit, 1})
	}
	m.parts = map[TopicPartition]bool{}
}

func sortedTPs(s map[TopicPartition]bool) []TopicPartition {
	var out []TopicPartition
	for tp := range s {
		out = append(out, tp)
	}
	sortPartitions(out)
	return out
}

// init is InitProducerId: the code and the epoch expected.
func (m *txnModel) init(pid int64) (int16, int16) {
	if !m.known {
		m.known, m.pid, m.epoch, m.state, m.parts = true, pid, 0, Empty, map[TopicPartition]bool{}
		return 0, 0
	}
	if m.state == Ongoing {
		// Fenced: the epoch bumped, the transaction aborted (with a second
		// bump under version 2, whose abort is logged at epoch+2).
		m.epoch++
		if m.v2 {
			m.epoch++
		}
		m.endMarkers(false, m.epoch)
		m.state = CompleteAbort
		return kerr.ConcurrentTransactions.Code, -1
	}
	m.epoch++
	m.state, m.parts = Empty, map[TopicPartition]bool{}
	return 0, m.epoch
}

func (m *txnModel) add(epoch int16, tp TopicPartition) int16 {
	switch {
	case !m.known:
		return kerr.InvalidProducerIDMapping.Code
	case epoch != m.epoch:
		return kerr.ProducerFenced.Code
	}
	m.state = Ongoing
	m.parts[tp] = true
	return 0
}

func (m *txnModel) end(epoch int16, commit bool) int16 {
	if !m.known {
		return kerr.InvalidProducerIDMapping.Code
	}
	complete := func() int16 {
		e := m.epoch
		if m.v2 {
			e++
			m.epoch = e
		}
		m.endMarkers(commit, e)
		m.state = CompleteAbort
		if commit {
			m.state = CompleteCommit
		}
		return 0
	}
	if !m.v2 {
		if epoch != m.epoch {
			return kerr.ProducerFenced.Code
		}
		switch {
		case m.state == Ongoing:
			return complete()
		case m.state == CompleteCommit && commit, m.state == CompleteAbort && !commit:
			return 0
		}
		return kerr.InvalidTxnState.Code
	}
	retry := epoch == m.epoch-1
	switch m.state {
	case Ongoing, Empty:
		switch {
		case epoch != m.epoch:
			return kerr.ProducerFenced.Code
		case m.state == Empty && commit:
			return kerr.InvalidTxnState.Code
		}
		return complete()
	default: // complete states
		switch {
		case !retry && epoch != m.epoch:
			return kerr.ProducerFenced.Code
		case retry && commit == (m.state == CompleteCommit):
			return 0
		case retry, commit:
			return kerr.InvalidTxnState.Code
		}
		return complete() // an empty abort
	}
}

func (m *txnModel) timeout() {
	if m.state == Ongoing {
		m.epoch++
		if m.v2 {
			m.epoch++
		}
		m.endMarkers(false, m.epoch)
		m.state = CompleteAbort
	}
}

// TestStateMachineModel drives one transactional id with seeded requests
// (current, stale and future epochs; commits, aborts, restarts, timeouts)
// and checks every answer, and the state, epoch, partitions and markers
// after it, against txnModel, under transaction versions 1 and 2.
func TestStateMachineModel(t *testing.T) {
	steps := 400
	if os.Getenv("SAMSA_LONG") != "" {
		steps = 20000
	}
	tps := []TopicPartition{{"a", 0}, {"a", 1}, {"b", 0}}
	for _, v2 := range []bool{false, true} {
		for seed := int64(1); seed <= 5; seed++ {
			t.Run(fmt.Sprintf("v2=%v/seed=%d", v2, seed), func(t *testing.T) {
				rng := rand.New(rand.NewSource(seed))
				h := newHarness(t, func(c *Config) {
					if v2 {
						c.TransactionVersion = 2
					}
				})
				version := int16(3)
				if v2 {
					version = 5
				}
				m := &txnModel{v2: v2}
				checked := 0 // markers compared so far
				for i := 0; i < steps; i++ {
					epoch := m.epoch + int16(rng.Intn(3)) - 1 // mostly current, sometimes stale or ahead
					if rng.Intn(2) == 0 {
						epoch = m.epoch
					}
					var what string
					var got, want int16
					switch r := rng.Intn(10); {
					case r < 2:
						what = "init"
						res := h.init("id", 5000, -1, -1)
						var wantEpoch int16
						want, wantEpoch = m.init(1000)
						got = res.ErrorCode
						if got == 0 && (res.ProducerID != m.pid || res.ProducerEpoch != wantEpoch) {
							t.Fatalf("step %d: init gave %d/%d, want %d/%d", i, res.ProducerID, res.ProducerEpoch, m.pid, wantEpoch)
						}
					case r < 6:
						tp := tps[rng.Intn(len(tps))]
						what = fmt.Sprintf("add %v epoch %d", tp, epoch)
						got, want = h.add("id", m.pid, epoch, tp), m.add(epoch, tp)
						if !m.known {
							got, want = h.add("id", 1000, epoch, tp), kerr.InvalidProducerIDMapping.Code
						}
					case r < 9:
						commit := rng.Intn(3) > 0
						what = fmt.Sprintf("end commit=%v epoch %d", commit, epoch)
						pid := m.pid
						if !m.known {
							pid = 1000
						}
						got, want = h.end("id", pid, epoch, commit, version).ErrorCode, m.end(epoch, commit)
					default:
						what = "timeout"
						h.clock.advance(6 * time.Second)
						m.timeout()
					}
					if got != want {
						t.Fatalf("step %d: %s: %v, want %v (model %+v)", i, what, kerr.ErrorForCode(got), kerr.ErrorForCode(want), *m)
					}
					if !m.known {
						continue
					}
					d := h.describe("id")
					if d.State != m.state.String() || d.ProducerEpoch != m.epoch || d.ProducerID != m.pid {
						t.Fatalf("step %d: after %s: %s %d/%d, model %s %d/%d", i, what, d.State, d.ProducerID, d.ProducerEpoch,
							m.state, m.pid, m.epoch)
					}
					var parts []TopicPartition
					for _, g := range d.Topics {
						for _, p := range g.Partitions {
							parts = append(parts, TopicPartition{g.Topic, p})
						}
					}
					if fmt.Sprint(parts) != fmt.Sprint(sortedTPs(m.parts)) && !(len(parts) == 0 && len(m.parts) == 0) {
						t.Fatalf("step %d: after %s: partitions %v, model %v", i, what, parts, sortedTPs(m.parts))
					}
					written := h.markers.markers()
					if len(written) != len(m.markers) || fmt.Sprint(written[checked:]) != fmt.Sprint(m.markers[checked:]) {
						t.Fatalf("step %d: after %s: markers\n%v\nmodel\n%v", i, what, written[checked:], m.markers[min(checked, len(m.markers)):])
					}
					checked = len(written)
				}
			})
		}
	}
}
