package report

import (
	"encoding/xml"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/samsa-broker/samsa/tools/chaos"
)

func history() *chaos.History {
	s := int64(time.Second)
	h := &chaos.History{Header: chaos.Header{Version: 1, Topic: "t", Partitions: 1, Seed: 9, Nodes: 1, Command: "samsa-chaos run --seed 9", Notes: []string{"fault slow skipped: <needs netns>"}}}
	add := func(op chaos.Op) { op.ID = int64(len(h.Ops) + 1); h.Ops = append(h.Ops, op) }
	add(chaos.Op{Proc: "p0", F: chaos.FOpen, Status: chaos.OK})
	add(chaos.Op{Proc: "a0", F: chaos.FOpen, Status: chaos.OK})
	for i := int64(0); i < 20; i++ {
		add(chaos.Op{Proc: "p0", F: chaos.FSend, Status: chaos.OK, Seq: i + 1, P: 0, O: i, V: "p0-" + string(rune('a'+i)), Start: i * s / 2, End: i*s/2 + 3e6})
	}
	add(chaos.Op{Proc: "nemesis", F: chaos.FFault, Status: chaos.OK, Seq: 1, Start: 2 * s, End: 4 * s, Fault: &chaos.FaultInfo{Kind: "kill", Nodes: []int{1}, Detail: "random node & <co>", Heal: 3 * s}})
	add(chaos.Op{Proc: "cluster", F: chaos.FEvent, Status: chaos.Info, Start: 5 * s, End: 5 * s, Err: "node 1 exited on its own"})
	var recs []chaos.Rec
	for i := int64(0); i < 19; i++ { // the last one is never read
		recs = append(recs, chaos.Rec{P: 0, O: i, V: "p0-" + string(rune('a'+i))})
	}
	add(chaos.Op{Proc: "a0", F: chaos.FPoll, Status: chaos.OK, Start: 10 * s, End: 11 * s, Recs: recs})
	add(chaos.Op{Proc: "a0", F: chaos.FClose, Status: chaos.OK, Start: 12 * s, End: 12 * s})
	return h
}

func TestBuildAndWrite(t *testing.T) {
	h := history()
	res := chaos.Check(h, chaos.Options{Liveness: 30 * time.Second})
	r := Build(h, res, Extra{Schedule: "schedule: seed 9\n", Took: 12 * time.Second, Features: "power-loss journal true"})
	if r.Valid || !strings.HasPrefix(r.Verdict, "chaos: INVALID (1 unseen): seed 9, 1 node, 1 faults") {
		t.Errorf("verdict %q", r.Verdict)
	}
	if len(r.Faults) != 1 || r.Faults[0].Heal != 3 || r.Faults[0].End != 4 || len(r.Events) != 1 {
		t.Errorf("faults %+v events %+v", r.Faults, r.Events)
	}
	acks := 0
	for _, p := range r.Series {
		acks += p.Acks
		if p.Acks > 0 && (p.P50 < 2.9 || p.P50 > 3.1) {
			t.Errorf("second %v: p50 %v ms, want 3", p.T, p.P50)
		}
	}
	if acks != 20 || r.Series[11].Reads != 19 {
		t.Errorf("series: %d acks, reads at 11 s %d", acks, r.Series[11].Reads)
	}
	dir := t.TempDir()
	if err := r.WriteFiles(dir); err != nil {
		t.Fatal(err)
	}
	txt, _ := os.ReadFile(filepath.Join(dir, "report.txt"))
	for _, want := range []string{r.Verdict, "replay: samsa-chaos run --seed 9", "unseen", "p0-t", "kill", "node 1 exited on its own", "[kill]"} {
		if !strings.Contains(string(txt), want) {
			t.Errorf("report.txt lacks %q", want)
		}
	}
	page, _ := os.ReadFile(filepath.Join(dir, "report.html"))
	// Well-formed, self-contained: parse it as XML; no scripts, no external references.
	d := xml.NewDecoder(strings.NewReader(strings.TrimPrefix(string(page), "<!DOCTYPE html>\n")))
	d.Strict = true
	charts, faults := 0, 0
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("report.html is not well-formed: %v", err)
		}
		if se, ok := tok.(xml.StartElement); ok {
			switch se.Name.Local {
			case "script", "link", "img", "iframe":
				t.Errorf("external or active element <%s>", se.Name.Local)
			case "svg":
				charts++
			case "rect":
				for _, a := range se.Attr {
					if a.Name.Local == "class" && a.Value == "fault" {
						faults++
					}
				}
			}
		}
	}
	if charts != 2 || faults != 2 {
		t.Errorf("%d charts, %d fault windows drawn; want 2 and 2", charts, faults)
	}
	if strings.Contains(string(page), "http://") && !strings.Contains(string(page), `xmlns="http://www.w3.org/2000/svg"`) {
		t.Error("external reference")
	}
}

func TestBuildValid(t *testing.T) {
	h := history()
	h.Ops[len(h.Ops)-2].Recs = append(h.Ops[len(h.Ops)-2].Recs, chaos.Rec{P: 0, O: 19, V: "p0-t"})
	r := Build(h, chaos.Check(h, chaos.Options{}), Extra{})
	if !r.Valid || !strings.HasPrefix(r.Verdict, "chaos: VALID (no anomalies)") {
		t.Errorf("verdict %q", r.Verdict)
	}
}

func TestAvailability(t *testing.T) {
	s := int64(time.Second)
	h := &chaos.History{Header: chaos.Header{Version: 1, Topic: "t", Partitions: 1, Nodes: 3}}
	for i, at := range []int64{0, 1, 2, 7, 8} {
		h.Ops = append(h.Ops, chaos.Op{ID: int64(i + 1), Proc: "p0", F: chaos.FSend, Status: chaos.OK, Seq: int64(i + 1), O: int64(i), V: "v", Start: at*s - s/10, End: at * s})
	}
	h.Ops = append(h.Ops, chaos.Op{ID: 9, Proc: "nemesis", F: chaos.FFault, Status: chaos.OK, Seq: 1, Start: 3 * s / 2, End: 5 * s,
		Fault: &chaos.FaultInfo{Kind: "kill", Nodes: []int{1}, Heal: 4 * s}})
	h.Ops = append(h.Ops, chaos.Op{ID: 10, Proc: "nemesis", F: chaos.FFault, Status: chaos.OK, Seq: 2, Start: 7*s + s/2, End: 7*s + 3*s/4,
		Fault: &chaos.FaultInfo{Kind: "kill", Nodes: []int{2}, Heal: 7*s + s/2}})
	r := Build(h, chaos.Check(h, chaos.Options{}), Extra{})
	f := r.Faults[0]
	if f.NoAck < 2.99 || f.NoAck > 3.01 || f.Recover < 1.99 || f.Recover > 2.01 {
		t.Errorf("fault 1: no-ack %v recover %v, want 3 and 2", f.NoAck, f.Recover)
	}
	if g := r.Faults[1]; g.NoAck < 0.24 || g.NoAck > 0.26 {
		t.Errorf("fault 2: no-ack %v, want 0.25 (the whole window)", g.NoAck)
	}
	if len(r.Availability) != 1 || r.Availability[0].Count != 2 || r.Availability[0].Unhealthy != 1 || r.Availability[0].NoAckMax < 2.99 {
		t.Errorf("availability %+v", r.Availability)
	}
	// Every send of this history has the value "v": four duplicates.
	want := "figures: 5 sends, 5 acknowledged, 0 lost, 4 duplicated, 0 unsafe elections, 0 eligible after a crash; longest gap without an acknowledgement 3.0s (fault 1, kill)"
	if got := r.Figures(); got != want {
		t.Errorf("figures %q,\nwant %q", got, want)
	}
}
