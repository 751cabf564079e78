package engine

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// fileLimitChild is set in the environment of the re-executed test binary
// that lowers its own open file limit (TestFileLimitChild).
const fileLimitChild = "SAMSA_ENGINE_FILELIMIT_CHILD"

// lockedBuffer is a log sink safe for concurrent writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestFileLimitChild runs in a child process with RLIMIT_NOFILE lowered to
// 300: creating logs until the limit fails with ErrTooManyOpenFiles and a
// message naming ulimit -n (not a bare "too many open files"); opening the
// same logs again warns that the limit leaves too little room; and with the
// limit lowered below the logs, Open fails with ErrTooManyOpenFiles.
func TestFileLimitChild(t *testing.T) {
	dir := os.Getenv(fileLimitChild)
	if dir == "" {
		t.Skip("the child of TestFileLimitIsReported")
	}
	setLimit := func(n uint64) {
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: n, Max: n}); err != nil {
			t.Fatal(err)
		}
	}
	setLimit(300)
	if FileLimit() != 300 {
		t.Fatalf("FileLimit %d, want 300", FileLimit())
	}
	m, err := Open(Options{Dirs: []string{dir}, Sync: SyncNone})
	if err != nil {
		t.Fatal(err)
	}
	created := 0
	for i := 0; i < 1000; i++ {
		_, err = m.CreateLog(TopicPartition{Topic: "fd", Partition: int32(i)}, DefaultLogConfig())
		if err != nil {
			break
		}
		created++
	}
	if !errors.Is(err, ErrTooManyOpenFiles) || !strings.Contains(err.Error(), "ulimit -n") || !strings.Contains(err.Error(), "300") {
		t.Fatalf("after %d logs: %v, want ErrTooManyOpenFiles naming the limit", created, err)
	}
	if created < 100 || m.LogFiles() != created {
		t.Fatalf("%d logs created under a limit of 300, holding %d files", created, m.LogFiles())
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}

	var logs lockedBuffer
	m, err = Open(Options{Dirs: []string{dir}, Sync: SyncNone, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "open file limit is too low") {
		t.Fatalf("no warning at Open with %d logs under a limit of 300; log:\n%s", created, logs.String())
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}

	setLimit(uint64(created / 2))
	_, err = Open(Options{Dirs: []string{dir}, Sync: SyncNone})
	if !errors.Is(err, ErrTooManyOpenFiles) || !strings.Contains(err.Error(), "ulimit -n") {
		t.Fatalf("Open of %d logs under a limit of %d: %v, want ErrTooManyOpenFiles", created, created/2, err)
	}
}

func TestFileLimitIsReported(t *testing.T) {
	if os.Getenv(fileLimitChild) != "" {
		t.Skip("in the child")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestFileLimitChild$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), fileLimitChild+"="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("--- PASS: TestFileLimitChild")) {
		t.Fatalf("child: %v\n%s", err, out)
	}
}
