package engine

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// powerLossChild is set, in the environment of the re-executed test binary,
// to "<log dir>|<journal>".
const powerLossChild = "SAMSA_ENGINE_POWERLOSS_CHILD"

// TestPowerLossChild is the killed process of TestPowerLossJournalSIGKILL:
// it writes, syncs some, writes more, says so on stdout and waits to be
// killed. It does nothing in a normal run.
func TestPowerLossChild(t *testing.T) {
	env := os.Getenv(powerLossChild)
	if env == "" {
		t.Skip("the child of TestPowerLossJournalSIGKILL")
	}
	dir, journal, _ := strings.Cut(env, "|")
	m, err := Open(Options{Dirs: []string{dir}, Sync: SyncNone, PowerLossJournal: journal})
	if err != nil {
		fmt.Println("ERROR", err)
		return
	}
	l, err := m.CreateLog(TopicPartition{"pl", 0}, DefaultLogConfig())
	if err != nil {
		fmt.Println("ERROR", err)
		return
	}
	for i := 0; i < 50; i++ {
		mustAppend(t, l, makeBatch(testBatch{records: 3, valueSize: 200}))
	}
	if err := l.Flush(); err != nil {
		fmt.Println("ERROR", err)
		return
	}
	synced, syncedSize := l.LogEndOffset(), l.Size()
	for i := 0; i < 30; i++ {
		mustAppend(t, l, makeBatch(testBatch{records: 2, valueSize: 300}))
	}
	fmt.Printf("READY %d %d %d %d\n", synced, syncedSize, l.LogEndOffset(), l.Size())
	select {} // until SIGKILL
}

// A process killed with SIGKILL in power-loss-journal mode loses, at the next
// Open in that mode, exactly what it had not fdatasynced: the synced prefix
// survives, recovery is clean, the unsynced tail is gone (though SIGKILL
// alone left it in the page cache).
func TestPowerLossJournalSIGKILL(t *testing.T) {
	if os.Getenv(powerLossChild) != "" {
		t.Skip("in the child")
	}
	dir := t.TempDir()
	journal := filepath.Join(t.TempDir(), "power-loss.journal")
	cmd := exec.Command(os.Args[0], "-test.run=^TestPowerLossChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), powerLossChild+"="+dir+"|"+journal)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var synced, syncedSize, total, totalSize int64
	deadline := time.After(60 * time.Second)
wait:
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatal("the child exited before it was ready")
			}
			if strings.HasPrefix(line, "ERROR") {
				cmd.Process.Kill()
				t.Fatal(line)
			}
			if _, err := fmt.Sscanf(line, "READY %d %d %d %d", &synced, &syncedSize, &total, &totalSize); err == nil {
				break wait
			}
		case <-deadline:
			cmd.Process.Kill()
			t.Fatal("the child never got ready")
		}
	}
	if err := cmd.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	cmd.Wait()
	go func() {
		for range lines {
		}
	}()
	if synced >= total || syncedSize >= totalSize {
		t.Fatalf("child: synced %d (%d bytes), total %d (%d bytes)", synced, syncedSize, total, totalSize)
	}
	seg := filepath.Join(dir, "pl-0", segmentFileName(0, logSuffix))
	if fi, err := os.Stat(seg); err != nil || fi.Size() != totalSize {
		t.Fatalf("after SIGKILL, before the journal is applied: %v %v, want all %d bytes still there", fi, err, totalSize)
	}

	m, err := Open(Options{Dirs: []string{dir}, Sync: SyncNone, PowerLossJournal: journal})
	if err != nil {
		t.Fatal(err)
	}
	l := m.Log(TopicPartition{"pl", 0})
	if l == nil {
		t.Fatal("log gone")
	}
	if l.LogEndOffset() != synced || l.Size() != syncedSize {
		t.Fatalf("after the power loss: LEO %d (%d bytes), want exactly the synced %d (%d bytes)",
			l.LogEndOffset(), l.Size(), synced, syncedSize)
	}
	if rs := m.Recovery(); rs.BytesTruncated != 0 || rs.RecoveredLogs != 1 || rs.SegmentsDeleted != 0 {
		t.Fatalf("recovery %+v: not clean", rs)
	}
	if hs := readAll(t, l); len(hs) != 50 {
		t.Fatalf("%d batches, want the 50 synced", len(hs))
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	// A clean shutdown in the mode, then an Open without it: nothing more is cut.
	m = openTest(t, []string{dir}, SyncNone, nil)
	defer m.Close()
	if l := m.Log(TopicPartition{"pl", 0}); l.LogEndOffset() != synced {
		t.Fatalf("LEO %d after a clean restart", l.LogEndOffset())
	}
}
