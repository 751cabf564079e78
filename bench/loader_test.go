package bench

import (
	"strings"
	"testing"
)

// cpuResults: three rounds a side, each with the given broker CPU per message (0: no
// broker figure).
func cpuResults(baseCPU, curCPU float64) []*Result {
	var rs []*Result
	for i := 1; i <= 3; i++ {
		b, c := fakeResult("baseline", "client", i, 1000, 10), fakeResult("current", "client", i, 1000, 10)
		if baseCPU > 0 {
			b.Broker = &BrokerCost{CPUUsPerMsg: baseCPU, Source: "/proc/1"}
		}
		if curCPU > 0 {
			c.Broker = &BrokerCost{CPUUsPerMsg: curCPU, Source: "/proc/2"}
		}
		rs = append(rs, b, c)
	}
	return rs
}

func TestJudgeCPUPerMsg(t *testing.T) {
	for _, tc := range []struct {
		name      string
		base, cur float64
		pass      bool
		ratio     float64
		note      string // a substring of a note, or ""
	}{
		{"same", 2, 2, true, 1, ""},
		{"within threshold", 2, 2.1, true, 1.05, ""},
		{"cheaper", 2, 1, true, 0.5, ""},
		{"costlier", 2, 2.5, false, 1.25, ""},
		{"current unmeasured", 2, 0, true, 0, "unmeasured on the current side"},
		{"both unmeasured", 0, 0, true, 0, "unmeasured on the baseline side"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := &Verdict{Mode: "client", Threshold: 0.1}
			judge(v, cpuResults(tc.base, tc.cur))
			if v.Pass != tc.pass || v.CPUPerMsgRatio != tc.ratio {
				t.Errorf("pass %v ratio %v, want %v %v: %+v", v.Pass, v.CPUPerMsgRatio, tc.pass, tc.ratio, v)
			}
			if !tc.pass && !strings.Contains(strings.Join(v.Reasons, "\n"), "CPU per message ratio 1.250") {
				t.Errorf("reasons %q", v.Reasons)
			}
			notes := strings.Join(v.Notes, "\n")
			if tc.note == "" && notes != "" || !strings.Contains(notes, tc.note) {
				t.Errorf("notes %q, want %q", notes, tc.note)
			}
			var b strings.Builder
			v.WriteVerdict(&b)
			want := "broker CPU/msg ratio (current/baseline, median): " + v.cpuRatioText()
			if !strings.Contains(b.String(), want) || (tc.ratio == 0) != strings.Contains(b.String(), "unmeasured") {
				t.Errorf("verdict text:\n%s", b.String())
			}
		})
	}
	// Some current runs without a figure: the median is of those that have one.
	rs := cpuResults(2, 2)
	rs[1].Broker, rs[3].Broker = nil, nil
	rs[5].Broker.CPUUsPerMsg = 3
	v := &Verdict{Mode: "client", Threshold: 0.1}
	judge(v, rs)
	if v.Pass || v.CPUPerMsgRatio != 1.5 || !strings.Contains(strings.Join(v.Notes, "\n"), "measured in 1 of 3 current runs") {
		t.Errorf("partial: %+v", v)
	}
}

func TestJudgeFixedRate(t *testing.T) {
	mk := func(baseRate, curRate float64) *Verdict {
		v := &Verdict{Mode: "client", Threshold: 0.1, TargetRate: 1000}
		var rs []*Result
		for i := 1; i <= 3; i++ {
			rs = append(rs, fakeResult("baseline", "client", i, baseRate, 10), fakeResult("current", "client", i, curRate, 10))
		}
		judge(v, rs)
		return v
	}
	if v := mk(1000, 999); !v.Pass || strings.Contains(strings.Join(v.Notes, "\n"), "did not keep up") {
		t.Errorf("both at the rate: %+v", v)
	}
	if v := mk(1000, 800); v.Pass || !strings.Contains(strings.Join(v.Notes, "\n"), "current median publish rate 800 msg/s is 80% of the fixed 1000") {
		t.Errorf("current short: %+v", v)
	}
	// The baseline fell short, the current kept up: no regression, but said.
	if v := mk(800, 1000); !v.Pass || !strings.Contains(strings.Join(v.Notes, "\n"), "baseline median publish rate") {
		t.Errorf("baseline short: %+v", v)
	}
}

func TestSaturationNotes(t *testing.T) {
	fixed := &Workload{ProducerRate: 20000}
	maxRate := &Workload{}
	for _, tc := range []struct {
		name        string
		cfg         *Workload
		rate        float64
		loader      *LoaderCost
		broker      *BrokerCost
		cpus, procs int
		want        []string // substrings, one per note, in order
	}{
		{"idle loader", maxRate, 1e5, &LoaderCost{CPUCores: 0.3}, &BrokerCost{CPUCores: 0.5, Source: "/proc/9"}, 4, 4, nil},
		{"loader alone busy", maxRate, 1e5, &LoaderCost{CPUCores: 1.7}, &BrokerCost{CPUCores: 0.2, Source: "/proc/9"}, 2, 2,
			[]string{"loader saturated: samsa-bench used 1.70 cores of the 2"}},
		{"loader busy within GOMAXPROCS", maxRate, 1e5, &LoaderCost{CPUCores: 0.9}, nil, 8, 1,
			[]string{"loader saturated"}},
		{"in-process broker", maxRate, 1e5, &LoaderCost{CPUCores: 1.8, IncludesBroker: true}, nil, 2, 2,
			[]string{"the loader and the in-process broker"}},
		{"machine busy", maxRate, 1e5, &LoaderCost{CPUCores: 0.9}, &BrokerCost{CPUCores: 1.0, Source: "/proc/9"}, 2, 2,
			[]string{"machine saturated: 1.90 of 2 CPUs busy (≥ 90%; loader 0.90, broker 1.00)"}},
		{"machine busy with other processes", maxRate, 1e5, &LoaderCost{CPUCores: 0.5, MachineCores: 1.9}, &BrokerCost{CPUCores: 0.3, Source: "/proc/9"}, 2, 2,
			[]string{"machine saturated: 1.90 of 2 CPUs busy (≥ 90%; loader 0.50, broker 0.30, other processes 1.10)"}},
		{"machine busy, remote broker, /proc/stat", maxRate, 1e5, &LoaderCost{CPUCores: 0.5, MachineCores: 1.85}, &BrokerCost{CPUCores: 1.0, Source: "http://b:9644/metrics"}, 2, 2,
			[]string{"loader 0.50, broker n/a)"}},
		{"machine busy, remote broker", maxRate, 1e5, &LoaderCost{CPUCores: 0.9}, &BrokerCost{CPUCores: 1.0, Source: "http://b:9644/metrics"}, 2, 2, nil},
		{"fixed rate reached", fixed, 19990, &LoaderCost{CPUCores: 0.3}, &BrokerCost{CPUCores: 0.3, Source: "/proc/9"}, 2, 2, nil},
		{"fixed rate short, broker idle", fixed, 15000, &LoaderCost{CPUCores: 0.4}, &BrokerCost{CPUCores: 0.3, Source: "/proc/9"}, 2, 2,
			[]string{"publish rate 15k msg/s is 75% of the fixed 20k msg/s while the broker used 0.30 cores of this machine's 2 CPUs, not CPU-bound: the loader"}},
		{"fixed rate short, broker busy", fixed, 15000, &LoaderCost{CPUCores: 0.1}, &BrokerCost{CPUCores: 1.65, Source: "/proc/9"}, 2, 2,
			[]string{"the broker looks CPU-bound"}},
		{"fixed rate short, remote broker", fixed, 15000, &LoaderCost{CPUCores: 0.2}, &BrokerCost{CPUCores: 0.3, Source: "http://b:9644/metrics"}, 2, 2,
			[]string{"a machine whose CPUs are not known"}},
		{"fixed rate short, broker unmeasured", fixed, 15000, &LoaderCost{CPUCores: 0.2}, nil, 2, 2,
			[]string{"broker CPU not measured"}},
		{"fixed rate short, loader busy too", fixed, 15000, &LoaderCost{CPUCores: 1.9}, &BrokerCost{CPUCores: 0.05, Source: "/proc/9"}, 2, 2,
			[]string{"loader saturated", "not CPU-bound"}},
		{"backlog: rate not judged", &Workload{ProducerRate: 20000, ConsumerBacklogSizeGB: 1}, 0, &LoaderCost{CPUCores: 0.2}, nil, 2, 2, nil},
		{"no loader figure", maxRate, 1e5, nil, &BrokerCost{CPUCores: 1.9, Source: "/proc/9"}, 2, 2, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &Result{Mode: "client", Config: tc.cfg, PubRate: tc.rate, DurationSec: 10, Loader: tc.loader, Broker: tc.broker}
			got := saturationNotes(r, tc.cpus, tc.procs)
			if len(got) != len(tc.want) {
				t.Fatalf("notes %q, want %d", got, len(tc.want))
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("note %d %q lacks %q", i, got[i], w)
				}
			}
		})
	}
}

func TestLoaderCost(t *testing.T) {
	c := loaderCost(cpuSnap{1, 100}, cpuSnap{3, 106}, 1e6, 4, "produced", false)
	if c.CPUSeconds != 2 || c.CPUUsPerMsg != 2 || c.CPUCores != 0.5 || c.MachineCores != 1.5 || c.PerWhat != "produced" || c.IncludesBroker {
		t.Errorf("%+v", c)
	}
	if c := loaderCost(cpuSnap{1, -1}, cpuSnap{3, 106}, 1e6, 4, "produced", true); c.MachineCores != 0 || !c.IncludesBroker {
		t.Errorf("no machine figure at the start: %+v", c)
	}
	if c := loaderCost(cpuSnap{-1, -1}, cpuSnap{3, 106}, 1e6, 4, "produced", false); c != nil {
		t.Errorf("no loader figure at the start: %+v", c)
	}
}
