package chaos

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestHistoryRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.jsonl")
	start := time.Now()
	w, err := CreateHistory(path, Header{Topic: "chaos", Partitions: 3, Seed: 42, Command: "samsa-chaos run --seed 42", Nodes: 1}, start)
	if err != nil {
		t.Fatal(err)
	}
	ops := []Op{
		{Proc: "p0", F: FSend, Status: OK, Start: 10, End: 20, Seq: 1, P: 0, O: 0, V: "p0-1"},
		{Proc: "a0", F: FPoll, Status: OK, Start: 5, End: 30, Recs: []Rec{{0, 0, "p0-1"}, {2, 7, `we"ird\n`}}},
		{Proc: "g0", F: FCommit, Status: OK, Group: "g", Offs: map[int32]int64{0: 1, 2: 8}, PartErr: map[int32]string{2: "REBALANCE_IN_PROGRESS"}},
		{Proc: "nemesis", F: FFault, Status: OK, Start: 1, End: 2, Fault: &FaultInfo{Kind: "kill", Nodes: []int{1}, Detail: "random node", Heal: 1}},
	}
	var wg sync.WaitGroup
	for i := range ops {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := w.Append(ops[i]); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Append(Op{}); err == nil {
		t.Error("append after close succeeded")
	}
	h, err := ReadHistory(path)
	if err != nil {
		t.Fatal(err)
	}
	if h.Header.Seed != 42 || h.Header.Partitions != 3 || h.Header.Version != HistoryVersion || h.Header.Started != start.UnixNano() {
		t.Errorf("header %+v", h.Header)
	}
	if len(h.Ops) != len(ops) {
		t.Fatalf("%d ops read, want %d", len(h.Ops), len(ops))
	}
	for i, op := range h.Ops {
		if op.ID != int64(i+1) {
			t.Errorf("op %d has id %d", i, op.ID)
		}
		var want *Op
		for j := range ops {
			if ops[j].Proc == op.Proc {
				want = &ops[j]
			}
		}
		got := op
		got.ID = 0
		if !reflect.DeepEqual(&got, want) {
			t.Errorf("op read back as %+v, want %+v", got, *want)
		}
	}
}

func TestDecodeHistoryTornTail(t *testing.T) {
	in := `{"header":{"version":1,"topic":"t","partitions":1}}
{"id":1,"proc":"p0","f":"send","st":"ok","s":1,"e":2,"v":"p0-1"}
{"id":2,"proc":"p0","f":"se`
	h, err := DecodeHistory(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Ops) != 1 || h.Ops[0].V != "p0-1" {
		t.Errorf("ops %+v", h.Ops)
	}
}

func TestDecodeHistoryErrors(t *testing.T) {
	for name, in := range map[string]string{
		"empty":        "",
		"no header":    `{"id":1,"proc":"p0"}`,
		"version":      `{"header":{"version":99}}`,
		"bad middle":   "{\"header\":{\"version\":1}}\n{\"id\":1,\"recs\":[[1,2]]}\n{\"id\":2}\n",
		"bad record":   "{\"header\":{\"version\":1}}\n{\"id\":1,\"recs\":[[\"x\",2,\"v\"]]}\n{\"id\":2}\n",
		"not json":     "{\"header\":{\"version\":1}}\nhello\n{\"id\":2}\n",
		"header array": `[1,2,3]`,
	} {
		_, err := DecodeHistory(strings.NewReader(in))
		if !errors.Is(err, ErrHistory) {
			t.Errorf("%s: got %v, want ErrHistory", name, err)
		}
	}
}

func TestReadHistoryMissing(t *testing.T) {
	_, err := ReadHistory(filepath.Join(t.TempDir(), "none"))
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("got %v", err)
	}
}
