// Package nemesis is the fault harness's source of trouble: a seeded schedule of
// faults (the same seed and parameters give the same schedule, so a run replays) and
// the code that injects each fault into a cluster and heals it.
//
// Faults run one at a time: each starts at its time, lasts its duration, and is then
// healed, after which every node is running, resumed, reachable and has disk space
// again (a node that exited on its own is restarted there too). Targets that depend
// on the cluster's state (the leader of a partition, the active controller) are
// resolved when the fault starts and printed; everything else is drawn from the seed.
package nemesis

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"time"
)

// Kind is a fault.
type Kind string

// The faults.
const (
	Kill            Kind = "kill"             // SIGKILL of a random node; restart at heal
	KillLeader      Kind = "kill-leader"      // SIGKILL of the leader of a partition
	KillController  Kind = "kill-controller"  // SIGKILL of the active controller
	KillAll         Kind = "kill-all"         // SIGKILL of every node at once
	Pause           Kind = "pause"            // SIGSTOP of a random node past the session timeout; SIGCONT at heal
	PauseLeader     Kind = "pause-leader"     // SIGSTOP of the leader of a partition
	PowerLoss       Kind = "power-loss"       // SIGKILL of a random node that loses what it had not fdatasynced
	PowerLossAll    Kind = "power-loss-all"   // power loss of every node at once
	PartitionLeader Kind = "partition-leader" // the leader of a partition cut from the other nodes
	PartitionHalves Kind = "partition-halves" // a random minority cut from the majority
	PartitionBridge Kind = "partition-bridge" // two halves that cannot talk, one node in touch with both
	Slow            Kind = "slow"             // a node's link slow and lossy
	DiskFull        Kind = "disk-full"        // a node's log dir file system full
	// RollingRestart stops every node in turn with SIGTERM and starts it again, each
	// once the one before is back in the ISRs of the workload's partitions; on a
	// secured cluster each with a new key and certificate from the other CA. The
	// schedule's length is the least time the fault lasts; the roll may take longer.
	RollingRestart Kind = "rolling-restart"
	// KillReplicas takes a partition's replicas down to one: one is killed, then, once
	// it is out of the ISR, another is killed or stopped cleanly (Fault.CleanStop),
	// which leaves an ISR below min.insync.replicas (with eligible leader replicas,
	// the second joins the ELR and the high watermark stops). With Fault.PauseLast,
	// half-way through, the last one is paused past its session and the first
	// restarted: it lacks the records committed without it, and, the only replica
	// running once the ISR is empty, it must not be elected; at the heal the second
	// comes back before the paused one is resumed: killed, it must leave the ELR,
	// stopped cleanly, it is elected from it. At the heal the others come back.
	KillReplicas Kind = "kill-replicas"
	// ObjstoreDown takes a tiered cluster's object store away: stopped (SIGSTOP, a
	// store that hangs), or with Fault.StoreKill killed (connections refused); at the
	// heal it is continued, or started again on its address over its directory.
	ObjstoreDown Kind = "objstore-down"
)

// AllKinds lists every fault.
var AllKinds = []Kind{Kill, KillLeader, KillController, KillAll, Pause, PauseLeader, PowerLoss, PowerLossAll,
	PartitionLeader, PartitionHalves, PartitionBridge, Slow, DiskFull, RollingRestart, KillReplicas, ObjstoreDown}

// Capabilities are what the run can do; a fault that needs more is unavailable.
type Capabilities struct {
	Nodes     int
	Netns     bool   // nodes in network namespaces
	NetnsWhy  string // why not
	PowerLoss bool   // the broker supports the power-loss journal
	PowerWhy  string
	DiskFull  bool // log dirs on tmpfs
	DiskWhy   string
	// ObjectStore: the cluster runs with tiered storage against an object store of
	// the run; ObjectStoreWhy says why not.
	ObjectStore    bool
	ObjectStoreWhy string
}

// Available reports whether kind can run with caps, and if not, why.
func Available(kind Kind, caps Capabilities) (bool, string) {
	switch kind {
	case Kill, KillLeader, KillController, KillAll, Pause, PauseLeader, RollingRestart:
		return true, ""
	case PowerLoss, PowerLossAll:
		if !caps.PowerLoss {
			return false, caps.PowerWhy
		}
		return true, ""
	case PartitionLeader, PartitionHalves:
		if caps.Nodes < 2 {
			return false, fmt.Sprintf("needs at least 2 nodes (the run has %d)", caps.Nodes)
		}
		if !caps.Netns {
			return false, "needs network namespaces: " + caps.NetnsWhy
		}
		return true, ""
	case PartitionBridge:
		if caps.Nodes < 3 {
			return false, fmt.Sprintf("needs at least 3 nodes (the run has %d)", caps.Nodes)
		}
		if !caps.Netns {
			return false, "needs network namespaces: " + caps.NetnsWhy
		}
		return true, ""
	case Slow:
		if !caps.Netns {
			return false, "needs network namespaces: " + caps.NetnsWhy
		}
		return true, ""
	case DiskFull:
		if !caps.DiskFull {
			return false, caps.DiskWhy
		}
		return true, ""
	case ObjstoreDown:
		if !caps.ObjectStore {
			return false, "needs tiered storage against an object store of the run: " + caps.ObjectStoreWhy
		}
		return true, ""
	case KillReplicas:
		// Every node is a controller voter: two of three replicas down must leave a
		// majority of the voters, or no controller moves the ISR.
		if caps.Nodes < 5 {
			return false, fmt.Sprintf("needs at least 5 nodes, so that a majority of the controller voters outlives two replicas (the run has %d)", caps.Nodes)
		}
		return true, ""
	}
	return false, "unknown fault"
}

// NeedsNetns reports whether kind only runs in network namespaces.
func NeedsNetns(kind Kind) bool {
	switch kind {
	case PartitionLeader, PartitionHalves, PartitionBridge, Slow:
		return true
	}
	return false
}

// ParseKinds reads a comma-separated list of faults. "all" is every fault.
func ParseKinds(s string) ([]Kind, error) {
	var out []Kind
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		switch {
		case f == "":
		case f == "all":
			out = append(out, AllKinds...)
		case slices.Contains(AllKinds, Kind(f)):
			out = append(out, Kind(f))
		default:
			return nil, fmt.Errorf("nemesis: unknown fault %q (known: %s)", f, JoinKinds(AllKinds))
		}
	}
	var uniq []Kind
	for _, k := range out {
		if !slices.Contains(uniq, k) {
			uniq = append(uniq, k)
		}
	}
	return uniq, nil
}

// JoinKinds is the comma-separated form ParseKinds reads.
func JoinKinds(ks []Kind) string {
	var s []string
	for _, k := range ks {
		s = append(s, string(k))
	}
	return strings.Join(s, ",")
}

// Params shape a schedule.
type Params struct {
	Seed       int64
	Kinds      []Kind
	Duration   time.Duration // the fault phase: every fault starts and heals inside it
	Nodes      int
	Partitions int32
	// Gap is the quiet between faults, drawn in [GapMin, GapMax]; Dur a fault's
	// length in [DurMin, DurMax].
	GapMin, GapMax time.Duration
	DurMin, DurMax time.Duration
	// SessionTimeout: a pause lasts at least this plus 2 s (so the node is fenced).
	SessionTimeout time.Duration
	// Cover draws the kinds in rounds, each kind once per round in a random order,
	// so that a phase with room for len(Kinds) faults has every one of them (the
	// default draws each fault's kind on its own).
	Cover bool
}

// Fault is one scheduled fault.
type Fault struct {
	At   time.Duration // from the start of the fault phase
	Dur  time.Duration
	Kind Kind
	// Node is the target of the random-node faults (1-based).
	Node int
	// Partition is the partition whose leader the leader faults aim at.
	Partition int32
	// Cuts are the node pairs a halves or bridge partition cuts.
	Cuts [][2]int
	// KeepLeader, CleanStop and PauseLast shape kill-replicas: whether the replica
	// left standing is the partition's leader (else the leader is the second to go,
	// and the survivor is elected), whether the second goes by SIGTERM (a clean
	// shutdown, after which it stays eligible) rather than SIGKILL, and whether,
	// half-way through, the survivor is paused (the ISR empties) and the first
	// restarted. (Three of five nodes down would take the controller quorum with
	// them: the survivor is paused, not killed, after the first is back.)
	KeepLeader, CleanStop, PauseLast bool
	// StoreKill: objstore-down kills the store (SIGKILL) and starts it again at the
	// heal, rather than stopping it (SIGSTOP) and continuing it.
	StoreKill bool
}

// Schedule is a seeded list of faults.
type Schedule struct {
	Params Params
	Faults []Fault
}

// Generate draws a schedule from p.Seed. Equal Params give equal schedules.
func Generate(p Params) Schedule {
	s := Schedule{Params: p}
	if len(p.Kinds) == 0 || p.Duration <= 0 || p.Nodes < 1 {
		return s
	}
	if p.Partitions < 1 {
		p.Partitions = 1
	}
	rng := rand.New(rand.NewPCG(uint64(p.Seed), 0x6e656d))
	draw := func(lo, hi time.Duration) time.Duration {
		if hi <= lo {
			return lo
		}
		return lo + time.Duration(rng.Int64N(int64(hi-lo)+1))
	}
	minPause := p.SessionTimeout + 2*time.Second
	t := draw(p.GapMin, p.GapMax)
	var bag []int
	kind := func() Kind {
		if !p.Cover {
			return p.Kinds[rng.IntN(len(p.Kinds))]
		}
		if len(bag) == 0 {
			bag = rng.Perm(len(p.Kinds))
		}
		k := p.Kinds[bag[0]]
		bag = bag[1:]
		return k
	}
	for t < p.Duration {
		f := Fault{At: t, Kind: kind(), Node: 1 + rng.IntN(p.Nodes), Partition: int32(rng.IntN(int(p.Partitions)))}
		f.Dur = draw(p.DurMin, p.DurMax)
		if f.Kind == Pause || f.Kind == PauseLeader {
			f.Dur = max(f.Dur, minPause)
		}
		perm := rng.Perm(p.Nodes)
		switch f.Kind {
		case PartitionHalves:
			minority := max(1, (p.Nodes-1)/2)
			f.Cuts = crossCuts(perm[:minority], perm[minority:])
		case PartitionBridge:
			side := (p.Nodes - 1) / 2
			f.Cuts = crossCuts(perm[:side], perm[p.Nodes-side:])
		case KillReplicas:
			// Drawn only for this kind: the schedules of the others stay as they were.
			f.KeepLeader, f.CleanStop, f.PauseLast = rng.IntN(2) == 0, rng.IntN(2) == 0, rng.IntN(2) == 0
		case ObjstoreDown:
			f.StoreKill = rng.IntN(2) == 0 // drawn only for this kind, as above
		}
		if t+f.Dur > p.Duration {
			if f.Kind == Pause || f.Kind == PauseLeader || p.Duration-t < p.DurMin {
				break
			}
			f.Dur = p.Duration - t
		}
		s.Faults = append(s.Faults, f)
		t += f.Dur + draw(p.GapMin, p.GapMax)
	}
	return s
}

// crossCuts pairs every node of a with every node of b (1-based, a < b in each pair).
func crossCuts(a, b []int) [][2]int {
	var out [][2]int
	for _, x := range a {
		for _, y := range b {
			p := [2]int{min(x, y) + 1, max(x, y) + 1}
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i][0] != out[j][0] {
			return out[i][0] < out[j][0]
		}
		return out[i][1] < out[j][1]
	})
	return out
}

// Describe says what a fault will do, before its targets are resolved.
func (f Fault) Describe() string {
	switch f.Kind {
	case Kill, Pause, PowerLoss, Slow, DiskFull:
		return fmt.Sprintf("%s node %d", f.Kind, f.Node)
	case RollingRestart:
		return "rolling restart of every node"
	case ObjstoreDown:
		if f.StoreKill {
			return "objstore-down: the object store killed, started again at the heal"
		}
		return "objstore-down: the object store stopped (SIGSTOP), continued at the heal"
	case KillLeader, PauseLeader, PartitionLeader:
		return fmt.Sprintf("%s of p%d", f.Kind, f.Partition)
	case PartitionHalves, PartitionBridge:
		var cs []string
		for _, c := range f.Cuts {
			cs = append(cs, fmt.Sprintf("%d-%d", c[0], c[1]))
		}
		return fmt.Sprintf("%s cutting %s", f.Kind, strings.Join(cs, " "))
	case KillReplicas:
		last, how := "a follower", "killed"
		if f.KeepLeader {
			last = "the leader"
		}
		if f.CleanStop {
			how = "stopped cleanly"
		}
		if f.PauseLast {
			last += ", then that one paused and the first back"
		}
		return fmt.Sprintf("%s of p%d down to %s (the second %s)", f.Kind, f.Partition, last, how)
	}
	return string(f.Kind)
}

// String prints the schedule as a table, one fault per line.
func (s Schedule) String() string {
	var b strings.Builder
	p := s.Params
	cover := ""
	if p.Cover {
		cover = ", every kind in each round"
	}
	fmt.Fprintf(&b, "schedule: seed %d, %d faults in %s (%s; gaps %s-%s, faults %s-%s, %d nodes, %d partitions%s)\n",
		p.Seed, len(s.Faults), p.Duration, JoinKinds(p.Kinds), p.GapMin, p.GapMax, p.DurMin, p.DurMax, p.Nodes, p.Partitions, cover)
	for i, f := range s.Faults {
		fmt.Fprintf(&b, "  %3d  +%7.2fs  for %6.2fs  %s\n", i+1, f.At.Seconds(), f.Dur.Seconds(), f.Describe())
	}
	return b.String()
}
