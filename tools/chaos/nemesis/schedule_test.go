package nemesis

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func params(seed int64) Params {
	return Params{Seed: seed, Kinds: AllKinds, Duration: 10 * time.Minute, Nodes: 5, Partitions: 6,
		GapMin: 5 * time.Second, GapMax: 15 * time.Second, DurMin: 2 * time.Second, DurMax: 12 * time.Second, SessionTimeout: 9 * time.Second}
}

func TestGenerateReplays(t *testing.T) {
	a, b := Generate(params(7)), Generate(params(7))
	if !reflect.DeepEqual(a, b) || a.String() != b.String() {
		t.Fatal("one seed, two schedules")
	}
	if c := Generate(params(8)); reflect.DeepEqual(a.Faults, c.Faults) {
		t.Fatal("two seeds, one schedule")
	}
	if len(a.Faults) < 20 {
		t.Errorf("%d faults in 10 minutes at 5-15 s gaps", len(a.Faults))
	}
}

func TestGenerateRespectsBounds(t *testing.T) {
	for seed := int64(1); seed <= 50; seed++ {
		p := params(seed)
		s := Generate(p)
		end := time.Duration(0)
		seen := map[Kind]bool{}
		for i, f := range s.Faults {
			seen[f.Kind] = true
			if f.At < end+p.GapMin {
				t.Fatalf("seed %d fault %d starts %s, %s after the previous healed (gap min %s)", seed, i, f.At, f.At-end, p.GapMin)
			}
			if f.At+f.Dur > p.Duration {
				t.Fatalf("seed %d fault %d ends after the phase", seed, i)
			}
			if (f.Kind == Pause || f.Kind == PauseLeader) && f.Dur < p.SessionTimeout+2*time.Second {
				t.Fatalf("seed %d: pause of %s, not past the session timeout", seed, f.Dur)
			}
			if f.Node < 1 || f.Node > p.Nodes || f.Partition < 0 || f.Partition >= p.Partitions {
				t.Fatalf("seed %d: target out of range: %+v", seed, f)
			}
			switch f.Kind {
			case PartitionHalves:
				// 5 nodes: a minority of 2 cut from 3, six pairs, and no node cut from itself.
				if len(f.Cuts) != 6 {
					t.Fatalf("halves of 5 cut %v", f.Cuts)
				}
			case PartitionBridge:
				// 5 nodes: 2 | 1 | 2, the bridge node cut from nobody.
				if len(f.Cuts) != 4 {
					t.Fatalf("bridge of 5 cut %v", f.Cuts)
				}
				in := map[int]bool{}
				for _, c := range f.Cuts {
					in[c[0]], in[c[1]] = true, true
				}
				if len(in) != 4 {
					t.Fatalf("bridge of 5: %d nodes cut, want 4: %v", len(in), f.Cuts)
				}
			}
			for _, c := range f.Cuts {
				if c[0] >= c[1] || c[0] < 1 || c[1] > p.Nodes {
					t.Fatalf("bad cut %v", c)
				}
			}
			end = f.At + f.Dur
		}
		if seed == 1 && len(seen) < 8 {
			t.Errorf("seed 1 drew only %d kinds", len(seen))
		}
	}
}

func TestGenerateThreeNodes(t *testing.T) {
	p := params(3)
	p.Nodes, p.Kinds = 3, []Kind{PartitionHalves, PartitionBridge}
	for _, f := range Generate(p).Faults {
		want := 2 // halves: 1 | 2; bridge: 1 | 1 | 1, the outer two cut from each other only
		if f.Kind == PartitionBridge {
			want = 1
		}
		if len(f.Cuts) != want {
			t.Fatalf("%s of 3 cut %v", f.Kind, f.Cuts)
		}
	}
}

func TestGenerateEmpty(t *testing.T) {
	p := params(1)
	p.Kinds = nil
	if s := Generate(p); len(s.Faults) != 0 {
		t.Error("faults without kinds")
	}
	p = params(1)
	p.Duration = 3 * time.Second // shorter than the first gap
	if s := Generate(p); len(s.Faults) != 0 {
		t.Errorf("faults in a phase shorter than a gap: %v", s.Faults)
	}
}

func TestScheduleString(t *testing.T) {
	p := params(42)
	p.Kinds = []Kind{Kill, KillLeader}
	s := Generate(p).String()
	if !strings.HasPrefix(s, "schedule: seed 42,") || !strings.Contains(s, "kill") || strings.Count(s, "\n") != len(Generate(p).Faults)+1 {
		t.Errorf("schedule text:\n%s", s)
	}
}

func TestParseKinds(t *testing.T) {
	ks, err := ParseKinds("kill, pause,kill")
	if err != nil || !reflect.DeepEqual(ks, []Kind{Kill, Pause}) {
		t.Errorf("%v %v", ks, err)
	}
	if ks, err := ParseKinds("all"); err != nil || len(ks) != len(AllKinds) {
		t.Errorf("all: %v %v", ks, err)
	}
	if _, err := ParseKinds("kill,explode"); err == nil || !strings.Contains(err.Error(), "explode") {
		t.Errorf("unknown fault: %v", err)
	}
	if JoinKinds([]Kind{Kill, DiskFull}) != "kill,disk-full" {
		t.Error("join")
	}
}

func TestAvailable(t *testing.T) {
	one := Capabilities{Nodes: 1, NetnsWhy: "off", PowerWhy: "unknown key", DiskWhy: "not root"}
	for k, want := range map[Kind]string{
		Kill: "", Pause: "", KillAll: "",
		PowerLoss:       "unknown key",
		DiskFull:        "not root",
		PartitionHalves: "at least 2 nodes",
		PartitionBridge: "at least 3 nodes",
		Slow:            "network namespaces: off",
		KillReplicas:    "at least 5 nodes",
	} {
		ok, why := Available(k, one)
		if ok != (want == "") || !strings.Contains(why, want) {
			t.Errorf("%s: %v %q, want %q", k, ok, why, want)
		}
	}
	if ok, why := Available(ObjstoreDown, Capabilities{Nodes: 3, ObjectStoreWhy: "--tiered off"}); ok || !strings.Contains(why, "--tiered off") {
		t.Errorf("%s without an object store: %v %q", ObjstoreDown, ok, why)
	}
	three := Capabilities{Nodes: 3, Netns: true, PowerLoss: true, DiskFull: true, ObjectStore: true}
	for _, k := range AllKinds {
		if ok, why := Available(k, three); !ok && k != KillReplicas {
			t.Errorf("%s unavailable on a full setup: %s", k, why)
		}
	}
	five := three
	five.Nodes = 5
	if ok, why := Available(KillReplicas, five); !ok {
		t.Errorf("%s unavailable on five nodes: %s", KillReplicas, why)
	}
	if ok, _ := Available("nope", three); ok {
		t.Error("unknown kind available")
	}
}

// TestGenerateCover: with Cover, every round of len(Kinds) faults has each kind once;
// without it each fault draws its kind on its own, as before.
func TestGenerateCover(t *testing.T) {
	for seed := int64(1); seed <= 30; seed++ {
		p := params(seed)
		p.Cover = true
		s := Generate(p)
		n := len(p.Kinds)
		for i := 0; i+n <= len(s.Faults); i += n {
			seen := map[Kind]bool{}
			for _, f := range s.Faults[i : i+n] {
				seen[f.Kind] = true
			}
			if len(seen) != n {
				t.Fatalf("seed %d: round %d has %d kinds of %d", seed, i/n, len(seen), n)
			}
		}
		if !strings.Contains(s.String(), "every kind in each round") {
			t.Errorf("schedule text does not say so: %s", s.String()[:120])
		}
	}
}

// TestGenerateObjstoreDown: objstore-down draws whether the store is killed or
// stopped, both for some seeds, and the draw leaves the schedules of the other kinds
// as they were (it is made for this kind only).
func TestGenerateObjstoreDown(t *testing.T) {
	kills := map[bool]int{}
	for seed := int64(1); seed <= 20; seed++ {
		p := params(seed)
		p.Kinds = []Kind{ObjstoreDown}
		for _, f := range Generate(p).Faults {
			kills[f.StoreKill]++
			if !strings.Contains(f.Describe(), "object store") {
				t.Fatalf("description %q", f.Describe())
			}
		}
		p.Kinds = []Kind{Kill, Pause}
		for _, f := range Generate(p).Faults {
			if f.StoreKill {
				t.Fatalf("seed %d: %s with StoreKill", seed, f.Kind)
			}
		}
	}
	if kills[true] == 0 || kills[false] == 0 {
		t.Errorf("kills and stops of the store: %v", kills)
	}
}
