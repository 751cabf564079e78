package bench

import (
	"fmt"
	"strings"
)

// The loader's own cost. samsa-bench reads its own process's CPU time
// (getrusage(RUSAGE_SELF): user + system of every thread) at the same two instants
// as the broker's, the ends of the measured window, and reports it beside the
// broker's: CPU per message and average cores busy. With the kfake target (kfake in
// this process) the figure includes the broker; Result.Loader.IncludesBroker says so,
// and the side-by-side figures leave such runs out.
//
// The saturation rule (saturationNotes) adds a note, never a verdict, when the
// figures say the loader rather than the broker may be the ceiling:
//
//  1. the loader alone used at least loaderBusyShare (0.8) of the cores it may run
//     on (GOMAXPROCS): it can hardly go faster;
//  2. else, the machine was at least machineBusyShare (0.9) busy over the window:
//     its busy cores from /proc/stat (every process: on a shared machine others count
//     too), or loader + broker when the broker was measured through /proc (so on this
//     machine), whichever is more, against runtime.NumCPU(): the loader competes with
//     the broker for the CPUs and may be holding it back;
//  3. on a fixed-rate workload, the achieved publish rate is below rateShortShare
//     (0.95) of the target: if the broker used less than loaderBusyShare of the
//     machine it was not CPU-bound, and the note says the loader, or a limit of the
//     broker other than CPU (fsync, a lock, the network), may be the ceiling; if the
//     broker's CPU is not measured the note says that it cannot tell; if the broker
//     was busy it says so; a broker measured through /metrics runs on a machine whose
//     CPUs are not known, and the note says that.
//
// The shares are rules of thumb for a machine shared by loader and broker; the
// notes give the figures they were judged on.
const (
	loaderBusyShare  = 0.8
	machineBusyShare = 0.9
	rateShortShare   = 0.95
)

// LoaderCost is samsa-bench's own CPU over a measured window.
type LoaderCost struct {
	CPUSeconds  float64 `json:"cpu_s"`
	CPUUsPerMsg float64 `json:"cpu_us_per_msg"`
	CPUCores    float64 `json:"cpu_cores"`        // average cores busy
	PerWhat     string  `json:"per,omitempty"`    // produced (default) or consumed
	Source      string  `json:"source,omitempty"` // getrusage(RUSAGE_SELF)
	// IncludesBroker: the broker ran in the loader's process (the kfake target), so
	// its CPU is in these figures.
	IncludesBroker bool `json:"includes_broker,omitempty"`
	// MachineCores is the whole machine's busy cores over the window, every process
	// (/proc/stat: all but idle and iowait), or 0 where it is not known.
	MachineCores float64 `json:"machine_cores,omitempty"`
}

// cpuSnap is the loader's CPU seconds and the whole machine's busy CPU seconds at
// one instant; -1 where one could not be read.
type cpuSnap struct{ self, machine float64 }

func takeCPUSnap() cpuSnap {
	s := cpuSnap{self: -1, machine: -1}
	if v, err := selfCPU(); err == nil {
		s.self = v
	}
	if v, err := machineCPU(); err == nil {
		s.machine = v
	}
	return s
}

// loaderCost is the cost between two snapshots secs seconds apart, or nil when the
// loader's CPU could not be read.
func loaderCost(a, b cpuSnap, msgs int64, secs float64, per string, inProcess bool) *LoaderCost {
	if a.self < 0 || b.self < 0 {
		return nil
	}
	c := &LoaderCost{CPUSeconds: b.self - a.self, PerWhat: per, Source: selfCPUSource, IncludesBroker: inProcess}
	if msgs > 0 {
		c.CPUUsPerMsg = c.CPUSeconds * 1e6 / float64(msgs)
	}
	if secs > 0 {
		c.CPUCores = c.CPUSeconds / secs
		if a.machine >= 0 && b.machine >= 0 {
			c.MachineCores = (b.machine - a.machine) / secs
		}
	}
	return c
}

// machineBusy is the busiest estimate of the machine's busy cores over r's window:
// /proc/stat's, or loader + broker when the broker is a process of this machine.
func machineBusy(r *Result) float64 {
	l := r.Loader
	busy := l.MachineCores
	if r.Broker != nil && strings.HasPrefix(r.Broker.Source, "/proc/") && !l.IncludesBroker {
		busy = max(busy, l.CPUCores+r.Broker.CPUCores)
	}
	return busy
}

// saturationNotes applies the saturation rule (above) to a finished run, on a
// machine of cpus CPUs where the loader may use procs of them (GOMAXPROCS).
func saturationNotes(r *Result, cpus, procs int) []string {
	var out []string
	l := r.Loader
	brokerLocal := r.Broker != nil && strings.HasPrefix(r.Broker.Source, "/proc/")
	if l != nil && procs > 0 {
		switch {
		case l.CPUCores >= loaderBusyShare*float64(procs):
			who := "the loader"
			if l.IncludesBroker {
				who = "the loader and the in-process broker"
			}
			out = append(out, fmt.Sprintf("loader saturated: samsa-bench used %.2f cores of the %d it may run on (GOMAXPROCS, ≥ %.0f%%): %s, not the broker alone, may be the ceiling",
				l.CPUCores, procs, 100*loaderBusyShare, who))
		case cpus > 0 && machineBusy(r) >= machineBusyShare*float64(cpus):
			broker, others := "n/a", ""
			if brokerLocal && !l.IncludesBroker {
				broker = fmt.Sprintf("%.2f", r.Broker.CPUCores)
				if o := l.MachineCores - l.CPUCores - r.Broker.CPUCores; o > 0.05 {
					others = fmt.Sprintf(", other processes %.2f", o)
				}
			}
			out = append(out, fmt.Sprintf("machine saturated: %.2f of %d CPUs busy (≥ %.0f%%; loader %.2f, broker %s%s): the loader competes with the broker for the CPUs and may be holding it back",
				machineBusy(r), cpus, 100*machineBusyShare, l.CPUCores, broker, others))
		}
	}
	if r.Config == nil || r.Config.ProducerRate <= 0 || r.Config.BacklogBytes() > 0 || r.DurationSec <= 0 {
		return out
	}
	target := float64(r.Config.ProducerRate)
	if r.PubRate >= rateShortShare*target {
		return out
	}
	short := fmt.Sprintf("publish rate %s msg/s is %.0f%% of the fixed %s msg/s", fmtFig(r.PubRate), 100*r.PubRate/target, fmtFig(target))
	loader := ""
	if l != nil {
		loader = fmt.Sprintf("; the loader used %.2f cores", l.CPUCores)
	}
	switch {
	case r.Broker == nil:
		out = append(out, short+": broker CPU not measured, so whether the loader or the broker is the ceiling cannot be told"+loader)
	case !brokerLocal:
		out = append(out, fmt.Sprintf("%s while the broker used %.2f cores of a machine whose CPUs are not known: the loader or the broker may be the ceiling%s",
			short, r.Broker.CPUCores, loader))
	case r.Broker.CPUCores < loaderBusyShare*float64(cpus):
		out = append(out, fmt.Sprintf("%s while the broker used %.2f cores of this machine's %d CPUs, not CPU-bound: the loader, or a broker limit other than CPU (fsync, a lock, the network), may be the ceiling%s",
			short, r.Broker.CPUCores, cpus, loader))
	default:
		out = append(out, fmt.Sprintf("%s while the broker used %.2f cores of %d CPUs: the broker looks CPU-bound%s", short, r.Broker.CPUCores, cpus, loader))
	}
	return out
}
