package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestProcClusterRoll: `samsa cluster roll` against three combined nodes. Its
// restart command asks the test, which owns the processes as a service manager
// would, to restart node {id}: SIGTERM (a controlled shutdown), wait for the exit,
// start it again (what `systemctl restart` does). With node 3 stopped the roll
// refuses to start (partitions under-replicated). Under acks=all idempotent load
// (franz-go, MetadataMinAge 100 ms as in leaderKill; 6 partitions, RF 3,
// min.insync.replicas=2) the roll restarts every node once, the active controller's
// last, each back in every ISR before the next; every acknowledged record reads back
// exactly once, and no partition goes more than 2 s without an acknowledgement (the
// goal, printed; the test fails at 8 s).
func TestProcClusterRoll(t *testing.T) {
	c := startProcCluster(t, combined(3))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bs := c.Bootstrap()
	adm := kadm.NewClient(client(t, bs))
	minISR := "2"
	if _, err := adm.CreateTopic(ctx, 6, 3, map[string]*string{"min.insync.replicas": &minISR}, "rolled"); err != nil {
		t.Fatal(err)
	}
	isrs := func(want int, stopped ...int32) {
		t.Helper()
		eventually(t, 60*time.Second, fmt.Sprintf("every ISR of rolled with %d replicas", want), func() error {
			v, err := sameEverywhere(ctx, c.brokerAddrs(stopped...), "rolled", 6)
			if err != nil {
				return err
			}
			for p, pv := range v {
				if len(pv.ISR) != want {
					return fmt.Errorf("rolled-%d: ISR %v", p, pv.ISR)
				}
			}
			return nil
		})
	}
	isrs(3)

	// The service manager: POST /restart/{id} restarts the node and answers once it
	// runs again.
	var mu sync.Mutex
	var restarted []int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, err := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/restart/"))
		if err != nil || r.Method != http.MethodPost || n < 1 || n > 3 {
			http.Error(w, "POST /restart/{id}", http.StatusBadRequest)
			return
		}
		id := int32(n)
		if err := c.Stop(id, time.Minute); err != nil {
			http.Error(w, fmt.Sprintf("stopping node %d: %v", id, err), http.StatusInternalServerError)
			return
		}
		if err := c.Start(id); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		mu.Lock()
		restarted = append(restarted, id)
		mu.Unlock()
		fmt.Fprintf(w, "node %d restarted\n", id)
	}))
	defer srv.Close()
	restart := "curl -sf -X POST " + srv.URL + "/restart/{id}"
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed (the restart command uses it)")
	}

	// --dry-run: the nodes with their admin listeners (each broker's admin.listen),
	// none restarted.
	code, out, errOut := runSamsa(t, "cluster", "roll", "--bootstrap-server", bs, "--dry-run")
	want := fmt.Sprintf("rolling 3 nodes: 1 (admin %s), 2 (admin %s), 3 (admin %s); the active controller is node ", c.Node(1).Admin, c.Node(2).Admin, c.Node(3).Admin)
	if code != 0 || !strings.HasPrefix(out, want) {
		t.Fatalf("roll --dry-run: exit %d, want %q\n%s%s", code, want, out, errOut)
	}

	// Refused while a partition is under-replicated.
	if err := c.Stop(3, time.Minute); err != nil {
		t.Fatal(err)
	}
	isrs(2, 3)
	code, out, errOut = runSamsa(t, "cluster", "roll", "--bootstrap-server", bs, "--restart-command", restart)
	if code != 1 || !strings.Contains(errOut, "not starting: 6 partition(s) under-replicated or offline (rolled-0, ") {
		t.Fatalf("roll with node 3 stopped: exit %d\n%s%s", code, out, errOut)
	}
	t.Logf("roll with node 3 stopped: exit 1: %s", strings.TrimSpace(errOut))
	if err := c.Start(3); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitReady(ctx, 1, nil); err != nil {
		t.Fatal(err)
	}
	isrs(3)
	if len(restarted) != 0 {
		t.Fatalf("the dry run or the refused roll restarted nodes %v", restarted)
	}

	lp := startLoad(t, bs, "rolled", kgo.MetadataMinAge(100*time.Millisecond))
	lp.waitAcked(t, 2000, 30*time.Second)
	rollStart := time.Now()
	code, out, errOut = runSamsa(t, "cluster", "roll", "--bootstrap-server", bs, "--restart-command", restart)
	t.Logf("samsa cluster roll --bootstrap-server %s --restart-command '%s': exit %d\n%s%s", bs, restart, code, out, errOut)
	if code != 0 {
		t.Fatalf("the roll failed")
	}
	lp.waitAcked(t, 2000, 30*time.Second)
	acks, _, errs := lp.finish()

	mu.Lock()
	got := slices.Clone(restarted)
	mu.Unlock()
	if s := slices.Sorted(slices.Values(got)); !slices.Equal(s, []int32{1, 2, 3}) {
		t.Errorf("restarted nodes %v, want each of 1, 2, 3 once", got)
	}
	// The active controller's node last: the last restart line names it.
	lines := regexp.MustCompile(`(?m)^node (\d+)(, the active controller)?: curl `).FindAllStringSubmatch(out, -1)
	if len(lines) != 3 || lines[2][2] == "" {
		t.Errorf("the active controller's node is not the last restarted:\n%s", out)
	}
	for _, want := range []string{"rolling 3 nodes: 1 (admin ", "rolled 3 nodes in "} {
		if !strings.Contains(out, want) {
			t.Errorf("the roll's output has no %q", want)
		}
	}
	if n := len(regexp.MustCompile(`(?m)^node \d+: restarted in \S+, ready and in every ISR in \S+$`).FindAllString(out, -1)); n != 3 {
		t.Errorf("%d lines of a node's time, want 3", n)
	}

	worst, worstP, worstAcks := worstPartitionGap(acks, 6, rollStart)
	log := readAll(t, bs, "rolled")
	lost, dups, _ := compareAcked(acks, log)
	t.Logf("samsa cluster roll of 3 nodes under acks=all load: %d acknowledged, %d lost, %d duplicated, %d producer errors; longest time a partition went without an acknowledgement %v (partition %d)",
		len(acks), lost, dups, len(errs), worst.Round(time.Millisecond), worstP)
	checkAcked(t, acks, log)
	if worst > 2*time.Second {
		logGapWindow(t, c, worstAcks, rollStart)
	}
	// The goal is 2 s (the figure above); the test fails at 8 s, a regression rather
	// than a loaded machine's stall.
	if worst > 8*time.Second {
		t.Errorf("partition %d went %v without an acknowledgement during the roll (the goal is 2 s)", worstP, worst)
	}
}

// TestProcClusterRollControllerOnly: a controller-only voter is not in Metadata, so
// the roll asks for its admin listener (--admin-addresses) and, given it, restarts the
// two brokers and then the controller, the active one, last.
func TestProcClusterRollControllerOnly(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed (the restart command uses it)")
	}
	c := startProcCluster(t, procSpec{Roles: []string{"controller", "broker", "broker"}})
	bs := c.Bootstrap()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, err := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/restart/"))
		if err != nil || n < 1 || n > 3 {
			http.Error(w, "POST /restart/{id}", http.StatusBadRequest)
			return
		}
		if err := c.Stop(int32(n), time.Minute); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		if err := c.Start(int32(n)); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
	}))
	defer srv.Close()
	restart := "curl -sf -X POST " + srv.URL + "/restart/{id}"
	code, out, errOut := runSamsa(t, "cluster", "roll", "--bootstrap-server", bs, "--restart-command", restart)
	if code != 1 || !strings.Contains(errOut, "node 1 is a voter without a broker in Metadata") || !strings.Contains(errOut, "--admin-addresses 1=HOST:PORT") {
		t.Fatalf("roll without the controller's admin listener: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = runSamsa(t, "cluster", "roll", "--bootstrap-server", bs, "--restart-command", restart,
		"--admin-addresses", "1="+c.Node(1).Admin)
	t.Logf("samsa cluster roll --admin-addresses 1=%s: exit %d\n%s%s", c.Node(1).Admin, code, out, errOut)
	if code != 0 {
		t.Fatal("the roll failed")
	}
	lines := regexp.MustCompile(`(?m)^node (\d+)(, the active controller)?: curl `).FindAllStringSubmatch(out, -1)
	if len(lines) != 3 || lines[0][1] != "2" || lines[1][1] != "3" || lines[2][1] != "1" || lines[2][2] == "" {
		t.Errorf("restarted in the order %v, want 2, 3, then the active controller 1", lines)
	}
}
