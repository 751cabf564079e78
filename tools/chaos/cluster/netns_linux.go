package cluster

import (
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Network puts every node in its own network namespace, joined to one bridge in the
// harness's namespace by a veth pair:
//
//	harness (root namespace)          10.A.B.1 on bridge scXXXXbr
//	  │
//	  ├── veth scXXXXh1 ══ scXXXXp1 ── namespace samsa-chaos-<pid>-<n>-n1  10.A.B.11
//	  ├── veth scXXXXh2 ══ scXXXXp2 ── namespace samsa-chaos-<pid>-<n>-n2  10.A.B.12
//	  └── ...
//
// Cuts between nodes are blackhole routes to the other node's /32 inside each
// namespace: packets are dropped silently, as a real partition drops them, and
// established connections stall rather than reset. The harness keeps reaching every
// node (its clients are outside the partition, as Jepsen's are). Slow and lossy
// links are qdiscs on both ends of a node's veth: netem (delay, jitter, loss) where
// the kernel has it, else tbf (a rate limit whose bounded queue drops what exceeds
// it), and Network says which.
type Network struct {
	id      string
	bridge  string
	prefix  string // "10.A.B."
	ns      []string
	hostIf  []string
	peerIf  []string
	hasNet  bool // netem available
	closeMu sync.Mutex
	closed  bool
	mu      struct {
		sync.Mutex
		cuts map[[2]int]bool // directed: [from, to] blackholed in from's namespace
		slow map[int]bool
	}
}

// ErrNoNetns: network namespaces cannot be made here.
var ErrNoNetns = errors.New("cluster: network namespaces unavailable")

var netSeq atomic.Int32

// NewNetwork makes n namespaces and the bridge between them.
func NewNetwork(n int) (_ *Network, err error) {
	if _, err := exec.LookPath("ip"); err != nil {
		return nil, fmt.Errorf("%w: no ip command: %v", ErrNoNetns, err)
	}
	seq := netSeq.Add(1) % 16
	pid := os.Getpid()
	x := &Network{id: fmt.Sprintf("%x%x", pid, seq)}
	x.mu.cuts = map[[2]int]bool{}
	x.mu.slow = map[int]bool{}
	x.bridge = "sc" + x.id + "br"
	prefix, err := freeSubnet(x.id)
	if err != nil {
		return nil, err
	}
	x.prefix = prefix
	defer func() {
		if err != nil {
			x.Close()
		}
	}()
	if err := ipCmd("link", "add", x.bridge, "type", "bridge"); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoNetns, err)
	}
	if err := ipCmd("addr", "add", x.prefix+"1/24", "dev", x.bridge); err != nil {
		return nil, err
	}
	if err := ipCmd("link", "set", x.bridge, "up"); err != nil {
		return nil, err
	}
	for i := 1; i <= n; i++ {
		ns := fmt.Sprintf("samsa-chaos-%d-%d-n%d", pid, seq, i)
		h, p := fmt.Sprintf("sc%sh%d", x.id, i), fmt.Sprintf("sc%sp%d", x.id, i)
		if err := ipCmd("netns", "add", ns); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrNoNetns, err)
		}
		x.ns = append(x.ns, ns)
		x.hostIf = append(x.hostIf, h)
		x.peerIf = append(x.peerIf, p)
		steps := [][]string{
			{"link", "add", h, "type", "veth", "peer", "name", p, "netns", ns},
			{"link", "set", h, "master", x.bridge},
			{"link", "set", h, "up"},
			{"-n", ns, "addr", "add", x.IP(i) + "/24", "dev", p},
			{"-n", ns, "link", "set", p, "up"},
			{"-n", ns, "link", "set", "lo", "up"},
		}
		for _, s := range steps {
			if err := ipCmd(s...); err != nil {
				return nil, err
			}
		}
	}
	if len(x.hostIf) > 0 && tcCmd("qdisc", "add", "dev", x.hostIf[0], "root", "netem", "delay", "1ms") == nil {
		x.hasNet = true
		tcCmd("qdisc", "del", "dev", x.hostIf[0], "root")
	}
	return x, nil
}

// freeSubnet picks 10.A.B.0/24, derived from id, that no local address uses.
func freeSubnet(id string) (string, error) {
	out, err := exec.Command("ip", "-o", "-4", "addr", "show").Output()
	if err != nil {
		return "", fmt.Errorf("%w: ip addr: %v", ErrNoNetns, err)
	}
	h := fnv.New32a()
	h.Write([]byte(id))
	s := h.Sum32()
	for try := uint32(0); try < 200; try++ {
		a, b := 100+(s+try)%100, ((s>>8)+try*7)%250
		prefix := fmt.Sprintf("10.%d.%d.", a, b)
		if !strings.Contains(string(out), " "+prefix) {
			return prefix, nil
		}
	}
	return "", fmt.Errorf("%w: no free 10.x.y.0/24", ErrNoNetns)
}

// IP is node i's address.
func (x *Network) IP(i int) string { return x.prefix + strconv.Itoa(10+i) }

// HostIP is the harness's address on the bridge.
func (x *Network) HostIP() string { return x.prefix + "1" }

// Namespace is node i's namespace name.
func (x *Network) Namespace(i int) string { return x.ns[i-1] }

// ExecPrefix is the command prefix that runs a program in node i's namespace.
func (x *Network) ExecPrefix(i int) []string { return []string{"ip", "netns", "exec", x.ns[i-1]} }

// Netem reports whether slow links use netem (else tbf).
func (x *Network) Netem() bool { return x.hasNet }

// Cut drops all traffic between nodes a and b, both ways.
func (x *Network) Cut(a, b int) error {
	if a == b {
		return nil
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, d := range [][2]int{{a, b}, {b, a}} {
		if x.mu.cuts[d] {
			continue
		}
		if err := ipCmd("-n", x.ns[d[0]-1], "route", "add", "blackhole", x.IP(d[1])+"/32"); err != nil {
			return err
		}
		x.mu.cuts[d] = true
	}
	return nil
}

// Partition cuts every pair of nodes in different groups (nodes in no group are cut
// from everyone).
func (x *Network) Partition(groups [][]int, nodes int) error {
	group := map[int]int{}
	for g, ns := range groups {
		for _, n := range ns {
			group[n] = g + 1
		}
	}
	for a := 1; a <= nodes; a++ {
		for b := a + 1; b <= nodes; b++ {
			if group[a] == 0 || group[a] != group[b] {
				if err := x.Cut(a, b); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// Cuts lists the cut pairs (a < b).
func (x *Network) Cuts() [][2]int {
	x.mu.Lock()
	defer x.mu.Unlock()
	var out [][2]int
	for d := range x.mu.cuts {
		if d[0] < d[1] {
			out = append(out, d)
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

// HealCuts removes every cut.
func (x *Network) HealCuts() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	var first error
	for d := range x.mu.cuts {
		if err := ipCmd("-n", x.ns[d[0]-1], "route", "del", "blackhole", x.IP(d[1])+"/32"); err != nil && first == nil {
			first = err
		}
		delete(x.mu.cuts, d)
	}
	return first
}

// LinkSpec is a slow or lossy link. With netem: Delay ± Jitter and Loss percent. With
// tbf: Rate (tc syntax, e.g. "1mbit"), and Delay as the queue bound past which
// packets are dropped.
type LinkSpec struct {
	Delay  time.Duration
	Jitter time.Duration
	Loss   float64
	Rate   string
}

// Slow applies spec to both ends of node i's link and says what it did.
func (x *Network) Slow(i int, spec LinkSpec) (string, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	var q []string
	if x.hasNet {
		q = []string{"netem", "delay", ms(spec.Delay), ms(spec.Jitter), "loss", strconv.FormatFloat(spec.Loss, 'f', 2, 64) + "%"}
	} else {
		rate := spec.Rate
		if rate == "" {
			rate = "1mbit"
		}
		q = []string{"tbf", "rate", rate, "burst", "16kb", "latency", ms(max(spec.Delay, time.Millisecond))}
	}
	if err := tcCmd(append([]string{"qdisc", "replace", "dev", x.hostIf[i-1], "root"}, q...)...); err != nil {
		return "", err
	}
	if err := tcCmd(append([]string{"-n", x.ns[i-1], "qdisc", "replace", "dev", x.peerIf[i-1], "root"}, q...)...); err != nil {
		return "", err
	}
	x.mu.slow[i] = true
	return "tc " + strings.Join(q, " "), nil
}

// Unslow removes every slow link.
func (x *Network) Unslow() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	var first error
	for i := range x.mu.slow {
		if err := tcCmd("qdisc", "del", "dev", x.hostIf[i-1], "root"); err != nil && first == nil {
			first = err
		}
		if err := tcCmd("-n", x.ns[i-1], "qdisc", "del", "dev", x.peerIf[i-1], "root"); err != nil && first == nil {
			first = err
		}
		delete(x.mu.slow, i)
	}
	return first
}

// Close removes the namespaces (and with them the veth pairs) and the bridge.
func (x *Network) Close() error {
	x.closeMu.Lock()
	defer x.closeMu.Unlock()
	if x.closed {
		return nil
	}
	x.closed = true
	var first error
	for _, ns := range x.ns {
		if err := ipCmd("netns", "del", ns); err != nil && first == nil {
			first = err
		}
	}
	for _, h := range x.hostIf {
		ipCmd("link", "del", h) // gone with its peer's namespace; in case it is not
	}
	if err := ipCmd("link", "del", x.bridge); err != nil && first == nil && !strings.Contains(err.Error(), "Cannot find device") {
		first = err
	}
	return first
}

func ms(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) + "ms" }

func ipCmd(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("cluster: ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

func tcCmd(args ...string) error {
	out, err := exec.Command("tc", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("cluster: tc %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// CleanupNetworks removes the namespaces and bridges of harness processes that are
// no longer alive, and returns what it removed.
func CleanupNetworks() ([]string, error) {
	var removed []string
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		return nil, fmt.Errorf("cluster: ip netns list: %w", err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || !strings.HasPrefix(f[0], "samsa-chaos-") {
			continue
		}
		name := f[0]
		parts := strings.Split(strings.TrimPrefix(name, "samsa-chaos-"), "-")
		pid, _ := strconv.Atoi(parts[0])
		if pid == 0 || pidAlive(pid) {
			continue
		}
		if err := ipCmd("netns", "del", name); err == nil {
			removed = append(removed, "netns "+name)
		}
	}
	out, err = exec.Command("ip", "-o", "link", "show", "type", "bridge").Output()
	if err != nil {
		return removed, fmt.Errorf("cluster: ip link show: %w", err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		name := strings.TrimSuffix(f[1], ":")
		if !strings.HasPrefix(name, "sc") || !strings.HasSuffix(name, "br") || len(name) < 6 {
			continue
		}
		id := name[2 : len(name)-2]
		pid, err := strconv.ParseInt(id[:len(id)-1], 16, 64)
		if err != nil || pidAlive(int(pid)) {
			continue
		}
		if err := ipCmd("link", "del", name); err == nil {
			removed = append(removed, "bridge "+name)
		}
	}
	return removed, nil
}
