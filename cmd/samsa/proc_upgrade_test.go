package main

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// upgradeFrom is the build a rolling upgrade starts from: main on the day feature
// levels were planned, which writes no feature-level record (its clusters must
// upgrade in place).
const upgradeFrom = "06ce5b8"

// samsaBinAt builds samsa at commit rev of this checkout (git archive into a
// temporary directory; the Go build cache keeps what it compiled between runs). It
// skips t where the commit is not in the checkout's history (a shallow clone).
func samsaBinAt(t *testing.T, rev string) string {
	t.Helper()
	samsaBin(t) // skipped with -short, as the other multi-process tests
	top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Skipf("not in a git checkout: %v", err)
	}
	root := strings.TrimSpace(string(top))
	if err := exec.Command("git", "-C", root, "cat-file", "-e", rev+"^{commit}").Run(); err != nil {
		t.Skipf("commit %s is not in this checkout's history (a shallow clone?)", rev)
	}
	dir := t.TempDir()
	if out, err := exec.Command("sh", "-c", fmt.Sprintf("git -C '%s' archive %s | tar -x -C '%s'", root, rev, dir)).CombinedOutput(); err != nil {
		t.Fatalf("git archive %s: %v\n%s", rev, err, out)
	}
	bin := filepath.Join(dir, "samsa-"+rev)
	build := exec.Command("go", "build", "-o", bin, "./cmd/samsa")
	build.Dir = dir
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build at %s: %v\n%s", rev, err, out)
	}
	return bin
}

// finalize runs `samsa features upgrade --release-version 4.4` until it exits with
// want (other than while a controller that has just become active has not heard from
// every broker yet), and returns its output.
func finalize(t *testing.T, bootstrap string, want int) string {
	t.Helper()
	var code int
	var out, errOut string
	eventually(t, 15*time.Second, "samsa features upgrade", func() error {
		code, out, errOut = runSamsa(t, "features", "--bootstrap-server", bootstrap, "upgrade", "--release-version", "4.4")
		// A controller that has just become active refuses until every broker's
		// heartbeat brought it the levels the broker supports: asked again, whatever
		// the exit code wanted.
		if strings.Contains(out+errOut, "has not sent them to this controller yet") {
			return fmt.Errorf("exit %d: %s", code, out+errOut)
		}
		if code != want {
			t.Fatalf("samsa features upgrade: exit %d, want %d\n%s%s", code, want, out, errOut)
		}
		return nil
	})
	return out + errOut
}

// TestProcRollingUpgrade: three combined nodes formatted and started by the build of
// upgradeFrom carry acks=all idempotent load (franz-go, MetadataMinAge 100 ms as in
// leaderKill) on a topic of 6 partitions, RF 3, min.insync.replicas=2. Each node in
// turn is stopped with SIGTERM (a controlled shutdown) and started on this build,
// waiting until it is back in every ISR; node 3 is then taken back to the old build
// and up again (a downgrade before the levels are finalized); then `samsa features
// upgrade --release-version` raises the levels. Every acknowledged record reads back
// exactly once, and no partition goes more than 2 s without an acknowledgement (the
// goal; the test fails at 8 s).
func TestProcRollingUpgrade(t *testing.T) {
	newBin := samsaBin(t)
	oldBin := samsaBinAt(t, upgradeFrom)
	spec := combined(3)
	spec.FormatBin = oldBin
	c := startProcClusterOf(t, oldBin, spec)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	bs := c.Bootstrap()
	adm := kadm.NewClient(client(t, bs))
	minISR := "2"
	if _, err := adm.CreateTopic(ctx, 6, 3, map[string]*string{"min.insync.replicas": &minISR}, "up"); err != nil {
		t.Fatal(err)
	}
	lp := startLoad(t, bs, "up", kgo.MetadataMinAge(100*time.Millisecond))
	lp.waitAcked(t, 2000, 30*time.Second)
	start := time.Now()

	inEveryISR := func(id int32) {
		t.Helper()
		eventually(t, 60*time.Second, fmt.Sprintf("node %d in every ISR of up", id), func() error {
			v, err := sameEverywhere(ctx, c.brokerAddrs(), "up", 6)
			if err != nil {
				return err
			}
			for p, pv := range v {
				if !slices.Contains(pv.ISR, id) {
					return fmt.Errorf("up-%d: ISR %v", p, pv.ISR)
				}
			}
			return nil
		})
	}
	type step struct {
		id   int32
		bin  string
		name string
	}
	for _, s := range []step{{1, newBin, "new"}, {2, newBin, "new"}, {3, newBin, "new"}, {3, oldBin, upgradeFrom}, {3, newBin, "new"}} {
		stopped := time.Now()
		if err := c.Stop(s.id, time.Minute); err != nil {
			t.Fatalf("stopping node %d: %v", s.id, err)
		}
		c.SetBin(s.id, s.bin)
		if err := c.Start(s.id); err != nil {
			t.Fatal(err)
		}
		if err := c.WaitReady(ctx, s.id, nil); err != nil {
			t.Fatalf("node %d on %s: %v", s.id, s.name, err)
		}
		inEveryISR(s.id)
		lp.waitAcked(t, 500, 30*time.Second)
		lp.mu.Lock()
		window := slices.Clone(lp.acks)
		lp.mu.Unlock()
		var stepGap time.Duration
		stepP := int32(-1)
		for p := range int32(6) {
			var ps []ack
			for _, a := range window {
				if a.Partition == p {
					ps = append(ps, a)
				}
			}
			if g := gapAfter(ps, stopped); g > stepGap {
				stepGap, stepP = g, p
			}
		}
		t.Logf("node %d stopped and back on build %s, in every ISR, after %v; longest gap of this step %v (partition %d)",
			s.id, s.name, time.Since(stopped).Round(time.Millisecond), stepGap.Round(time.Millisecond), stepP)
		if s.bin == oldBin {
			// A registered broker of the old build supports only the levels of a log
			// without feature records: the finalize is refused, naming it.
			out := finalize(t, bs, 1)
			if !strings.Contains(out, "Broker 3 does not support this feature") {
				t.Fatalf("features upgrade with broker 3 on %s:\n%s", upgradeFrom, out)
			}
			t.Logf("features upgrade with node 3 on %s refused:\n%s", upgradeFrom, out)
		}
	}

	t.Logf("samsa features upgrade --release-version 4.4:\n%s", finalize(t, bs, 0))
	for _, id := range c.Brokers() {
		eventually(t, 10*time.Second, fmt.Sprintf("node %d at transaction.version 2", id), func() error {
			l, err := finalizedLevel(ctx, c.Node(id).Client, "transaction.version")
			if err == nil && l != 2 {
				err = fmt.Errorf("transaction.version %d", l)
			}
			return err
		})
	}
	lp.waitAcked(t, 2000, 30*time.Second)
	acks, _, errs := lp.finish()

	// The longest time any partition went without an acknowledgement since the first
	// node was stopped.
	worst, worstP, worstAcks := worstPartitionGap(acks, 6, start)
	log := readAll(t, bs, "up")
	lost, dups, _ := compareAcked(acks, log)
	t.Logf("rolling upgrade %s -> this build, a downgrade and the finalize: %d acknowledged, %d lost, %d duplicated, %d producer errors; longest time without an acknowledgement: %v on partition %d (any partition: %v)",
		upgradeFrom, len(acks), lost, dups, len(errs), worst.Round(time.Millisecond), worstP, gapAfter(acks, start).Round(time.Millisecond))
	checkAcked(t, acks, log)
	if worst > 2*time.Second {
		logGapWindow(t, c, worstAcks, start)
	}
	// No node of either build logged an error: none failed to read what another wrote.
	for _, id := range c.Brokers() {
		for _, line := range strings.Split(c.LogTail(id, 1_000_000), "\n") {
			if strings.Contains(line, "level=ERROR") || strings.Contains(line, "corrupt data") {
				t.Errorf("node %d: %s", id, line)
			}
		}
	}
	// The goal is 2 s (the figure above, quoted where it is measured); the test fails
	// at 8 s, a regression rather than a loaded machine's stall.
	if worst > 8*time.Second {
		t.Errorf("partition %d went %v without an acknowledgement (the goal is 2 s)", worstP, worst)
	}
}
