package wordcount

// A real Samsa broker for the tests: `samsa serve` as a child process, built from
// this repository (or $SAMSA_BIN, which `make test` sets to the binary it built).

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// startBroker starts a single-node broker with its data in a temporary directory and
// returns its Kafka address once it listens; the broker is killed at the end of the
// test, and its log printed if the test failed. extra are more serve flags.
func startBroker(t *testing.T, extra ...string) string {
	t.Helper()
	bin := samsaBin(t)
	args := append([]string{"serve", "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--admin-listen", "",
		"--sync", "none", "--set", "group.initial.rebalance.delay.ms=0", "--set", "offsets.topic.num.partitions=3"}, extra...)
	cmd := exec.Command(bin, args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var (
		mu   sync.Mutex
		logs []string
	)
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			mu.Lock()
			logs = append(logs, line)
			mu.Unlock()
			if strings.Contains(line, "msg=listening ") {
				for _, f := range strings.Fields(line) {
					if a, ok := strings.CutPrefix(f, "addr="); ok {
						select {
						case addr <- a:
						default:
						}
					}
				}
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			mu.Lock()
			defer mu.Unlock()
			if len(logs) > 60 {
				logs = logs[len(logs)-60:]
			}
			t.Logf("broker log (end):\n%s", strings.Join(logs, "\n"))
		}
	})
	select {
	case a := <-addr:
		return a
	case <-time.After(60 * time.Second):
		t.Fatal("the broker did not listen within 60 s")
		return ""
	}
}

var built struct {
	once sync.Once
	path string
	err  error
}

// samsaBin returns $SAMSA_BIN, or builds cmd/samsa of this repository once per test
// binary (without the race detector: the broker is not what these tests check).
func samsaBin(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("SAMSA_BIN"); p != "" {
		abs, err := filepath.Abs(p)
		if err != nil {
			t.Fatal(err)
		}
		return abs
	}
	built.once.Do(func() {
		goTool, err := exec.LookPath("go")
		if err != nil {
			goTool = filepath.Join(runtime.GOROOT(), "bin", "go")
		}
		dir, err := os.MkdirTemp("", "samsa-bin-")
		if err != nil {
			built.err = err
			return
		}
		built.path = filepath.Join(dir, "samsa")
		cmd := exec.Command(goTool, "build", "-o", built.path, "./cmd/samsa")
		cmd.Dir = repoRoot
		if out, err := cmd.CombinedOutput(); err != nil {
			built.err = fmt.Errorf("go build ./cmd/samsa: %v\n%s", err, out)
		}
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.path
}

// eventually polls cond every 20 ms until it returns nil or d passes, then fails t
// with cond's last error.
func eventually(t *testing.T, d time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v: %v", what, d, err)
		}
		time.Sleep(20 * time.Millisecond) // the poll interval of a deadline-bounded wait
	}
}

func newClient(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
