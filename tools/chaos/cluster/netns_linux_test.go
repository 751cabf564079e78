package cluster

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// netHelper is the test binary run inside a namespace: "listen:ADDR" answers "ok"
// to every connection; "dial:ADDR" exits 0 when ADDR answers within a second.
func netHelper(h string) int {
	mode, addr, _ := strings.Cut(h, ":")
	switch mode {
	case "listen":
		l, err := net.Listen("tcp", addr)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Println("listening")
		for {
			c, err := l.Accept()
			if err != nil {
				return 1
			}
			c.Write([]byte("ok\n"))
			c.Close()
		}
	case "dial":
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return 1
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(time.Second))
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil || line != "ok\n" {
			return 1
		}
		return 0
	}
	return 2
}

func needRoot(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("makes namespaces and mounts: not in -short")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
}

// helperIn runs the test binary as helper h in node i's namespace (i = 0: the
// harness's own).
func helperIn(x *Network, i int, h string) *exec.Cmd {
	self, _ := os.Executable()
	var cmd *exec.Cmd
	if i == 0 {
		cmd = exec.Command(self)
	} else {
		p := x.ExecPrefix(i)
		cmd = exec.Command(p[0], append(p[1:], self)...)
	}
	cmd.Env = append(os.Environ(), "CHAOS_NET_HELPER="+h)
	return cmd
}

func reach(x *Network, from int, addr string) bool {
	return helperIn(x, from, "dial:"+addr).Run() == nil
}

// TestNetworkCutHealSlow: nodes in their own namespaces reach each other and the
// harness; a cut stops exactly the pair it names; healing restores it; a slow link
// still carries traffic.
func TestNetworkCutHealSlow(t *testing.T) {
	needRoot(t)
	x, err := NewNetwork(3)
	if errors.Is(err, ErrNoNetns) {
		t.Skipf("network namespaces unavailable here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	addr := net.JoinHostPort(x.IP(2), "7000")
	srv := helperIn(x, 2, "listen:"+addr)
	out, err := srv.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { srv.Process.Kill(); srv.Wait() }()
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "listening\n" {
		t.Fatalf("listener: %q %v", line, err)
	}
	for _, from := range []int{0, 1, 3} {
		if !reach(x, from, addr) {
			t.Fatalf("node 2 not reachable from %d", from)
		}
	}
	if err := x.Partition([][]int{{1}, {2, 3}}, 3); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(x.Cuts()); got != "[[1 2] [1 3]]" {
		t.Errorf("cuts %s", got)
	}
	if reach(x, 1, addr) {
		t.Error("node 1 reaches node 2 across the partition")
	}
	if !reach(x, 3, addr) || !reach(x, 0, addr) {
		t.Error("the majority side or the harness lost node 2")
	}
	if err := x.HealCuts(); err != nil {
		t.Fatal(err)
	}
	if !reach(x, 1, addr) {
		t.Error("not healed")
	}
	what, err := x.Slow(2, LinkSpec{Delay: 50 * time.Millisecond, Jitter: 10 * time.Millisecond, Loss: 1, Rate: "8mbit"})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("slow link: %s (netem %v)", what, x.Netem())
	if !reach(x, 0, addr) {
		t.Error("a slow link carries nothing")
	}
	if err := x.Unslow(); err != nil {
		t.Fatal(err)
	}
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	if out, _ := exec.Command("ip", "netns", "list").Output(); strings.Contains(string(out), x.ns[0]) {
		t.Error("namespace left behind")
	}
}

func TestDiskFillFree(t *testing.T) {
	needRoot(t)
	dir := t.TempDir()
	if err := MountTmpfs(dir, 4<<20); err != nil {
		t.Fatal(err)
	}
	defer Unmount(dir)
	n, err := Fill(dir)
	if err != nil {
		t.Fatal(err)
	}
	if n < 3<<20 || n > 4<<20 {
		t.Errorf("filled %d bytes of a 4 MiB tmpfs", n)
	}
	err = os.WriteFile(filepath.Join(dir, "more"), make([]byte, 8192), 0o644)
	if !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("write on a full disk: %v", err)
	}
	if err := Free(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "more"), make([]byte, 8192), 0o644); err != nil {
		t.Errorf("write after freeing: %v", err)
	}
	if err := Unmount(dir); err != nil {
		t.Fatal(err)
	}
}

// TestCleanupNetworks removes what a dead run left (its pid is in the names) and
// leaves what a live run owns.
func TestCleanupNetworks(t *testing.T) {
	needRoot(t)
	if _, err := CleanupNetworks(); err != nil { // nothing of ours: nothing to do, no error
		t.Fatal(err)
	}
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	pid := dead.Process.Pid
	deadNS := fmt.Sprintf("samsa-chaos-%d-1-n1", pid)
	deadBr := fmt.Sprintf("sc%x1br", pid)
	if err := ipCmd("netns", "add", deadNS); err != nil {
		t.Skipf("network namespaces unavailable here: %v", err)
	}
	defer ipCmd("netns", "del", deadNS)
	if err := ipCmd("link", "add", deadBr, "type", "bridge"); err != nil {
		t.Fatal(err)
	}
	defer ipCmd("link", "del", deadBr)
	live, err := NewNetwork(1)
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	removed, err := CleanupNetworks()
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(removed, ";")
	if !strings.Contains(got, "netns "+deadNS) || !strings.Contains(got, "bridge "+deadBr) {
		t.Errorf("removed %v; want %s and %s", removed, deadNS, deadBr)
	}
	if strings.Contains(got, live.Namespace(1)) || strings.Contains(got, live.bridge) {
		t.Errorf("removed a live run's network: %v", removed)
	}
}
