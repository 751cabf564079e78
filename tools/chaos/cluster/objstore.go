package cluster

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"go/build"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// VersitygwModule is what provides versitygw when it is not installed (.ci/run
// installs it so).
const VersitygwModule = "github.com/versity/versitygw/cmd/versitygw@v1.8.0"

// ObjectStoreBucket is the bucket a tiered cluster's nodes copy their segments to.
const ObjectStoreBucket = "chaos"

// FindVersitygw returns the path of versitygw: on PATH, else in $GOPATH/bin.
func FindVersitygw() (string, error) {
	if p, err := exec.LookPath("versitygw"); err == nil {
		return p, nil
	}
	p := filepath.Join(build.Default.GOPATH, "bin", "versitygw")
	if _, err := os.Stat(p); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("cluster: no versitygw on PATH or in %s (go install %s)", filepath.Dir(p), VersitygwModule)
}

// ObjectStore is the S3-compatible server of a tiered cluster (Config.ObjectStore):
// versity's versitygw over a directory of the run (its posix backend: a bucket is a
// directory, an object a file), a child process of the harness on the address the
// nodes reach (127.0.0.1, or the bridge's address when they run in namespaces). The
// objstore-down fault stops it (SIGSTOP: connections stay open and silent, as a store
// that hangs) or kills it and starts it again on the same address over the same
// directory (a store that crashed and came back with what it had stored). Its output
// goes to objstore.log in the run directory. Safe for concurrent use.
type ObjectStore struct {
	Bin            string
	Addr           string // host:port
	Root           string // the directory it serves; the bucket is a directory in it
	Access, Secret string // its root credentials, drawn per run
	logPath        string

	mu struct {
		sync.Mutex
		cmd    *exec.Cmd
		done   chan struct{}
		paused bool
		starts int
	}
}

// newObjectStore prepares the store of a run directory on host (a free port of it)
// with its bucket; it does not start it.
func newObjectStore(bin, runDir, host string) (*ObjectStore, error) {
	port, err := freePortOn(host)
	if err != nil {
		return nil, err
	}
	s := &ObjectStore{Bin: bin, Addr: net.JoinHostPort(host, strconv.Itoa(port)), Root: filepath.Join(runDir, "objstore"),
		Access: randomHex(8), Secret: randomHex(16), logPath: filepath.Join(runDir, "objstore.log")}
	if err := os.MkdirAll(filepath.Join(s.Root, ObjectStoreBucket), 0o755); err != nil {
		return nil, fmt.Errorf("cluster: object store: %w", err)
	}
	return s, nil
}

func freePortOn(host string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, fmt.Errorf("cluster: object store: free port on %s: %w", host, err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Endpoint is the store's URL.
func (s *ObjectStore) Endpoint() string { return "http://" + s.Addr }

// BrokerKeys are the keys of tiered storage over the store, for every node: copies
// every second, the metadata topic with 5 partitions, and the store's call and attempt
// timeouts at 5 s and 2 s, so that a stopped store fails a copy or a read within
// seconds (retriable: KAFKA_STORAGE_ERROR to a consumer) rather than holding it until
// it is continued (the defaults, 5 minutes and 30 s, outlast a fault).
func (s *ObjectStore) BrokerKeys() []string {
	return []string{
		"remote.log.storage.system.enable=true",
		"remote.log.manager.task.interval.ms=1000",
		"rsm.config.storage.s3.bucket.name=" + ObjectStoreBucket,
		"rsm.config.storage.s3.region=us-east-1",
		"rsm.config.storage.s3.endpoint.url=" + s.Endpoint(),
		"rsm.config.storage.s3.path.style.access.enabled=true",
		"rsm.config.storage.aws.access.key.id=" + s.Access,
		"rsm.config.storage.aws.secret.access.key=" + s.Secret,
		"rsm.config.chunk.size=4194304",
		"rsm.config.storage.s3.api.call.timeout=5000",
		"rsm.config.storage.s3.api.call.attempt.timeout=2000",
		"rlmm.config.remote.log.metadata.topic.num.partitions=5",
	}
}

// Start starts the store (it must not be running) and waits until it answers HTTP.
// A start right after a kill may find the port still held for a moment: it is tried
// again for up to 10 s.
func (s *ObjectStore) Start(ctx context.Context) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := s.startOnce(ctx)
		if err == nil || time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		time.Sleep(200 * time.Millisecond) // the port of the killed process
	}
}

func (s *ObjectStore) startOnce(ctx context.Context) error {
	s.mu.Lock()
	if s.mu.cmd != nil {
		s.mu.Unlock()
		return fmt.Errorf("cluster: object store already running")
	}
	logf, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		s.mu.Unlock()
		return fmt.Errorf("cluster: object store: %w", err)
	}
	defer logf.Close()
	s.mu.starts++
	args := []string{"--port", s.Addr, "--access", s.Access, "--secret", s.Secret, "--keep-alive", "--quiet", "posix", s.Root}
	fmt.Fprintf(logf, "=== samsa-chaos: start %d of the object store at %s: %s %s\n", s.mu.starts, time.Now().Format(time.RFC3339Nano), s.Bin, strings.Join(args, " "))
	cmd := exec.Command(s.Bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = childAttr() // it dies with the harness
	if err := cmd.Start(); err != nil {
		s.mu.Unlock()
		return fmt.Errorf("cluster: start the object store: %w", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	s.mu.cmd, s.mu.done, s.mu.paused = cmd, done, false
	s.mu.Unlock()

	c := &http.Client{Timeout: time.Second}
	defer c.CloseIdleConnections()
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end) && ctx.Err() == nil; {
		select {
		case <-done:
			s.forget(cmd)
			return fmt.Errorf("cluster: the object store exited at start: %s", strings.Join(lastLines(s.logPath, 5), " | "))
		default:
		}
		if resp, err := c.Get(s.Endpoint() + "/"); err == nil {
			resp.Body.Close() // an unsigned request gets an S3 error document: it serves
			return nil
		}
		time.Sleep(50 * time.Millisecond) // polling its start
	}
	s.Kill()
	return fmt.Errorf("cluster: the object store did not answer on %s within 10 s", s.Addr)
}

// forget clears the process cmd if it is still the current one.
func (s *ObjectStore) forget(cmd *exec.Cmd) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.cmd == cmd {
		s.mu.cmd, s.mu.done, s.mu.paused = nil, nil, false
	}
}

// Pause stops the store (SIGSTOP) and returns once it is stopped: the signal only
// asks the kernel, and a store still answering right after it would not be down.
func (s *ObjectStore) Pause() error {
	if err := s.signal(syscall.SIGSTOP); err != nil {
		return err
	}
	return waitStopped(s.Pid(), 5*time.Second)
}

// waitStopped waits until /proc says process pid is stopped; without /proc it
// returns at once.
func waitStopped(pid int, limit time.Duration) error {
	stat := fmt.Sprintf("/proc/%d/stat", pid)
	for deadline := time.Now().Add(limit); ; {
		b, err := os.ReadFile(stat)
		if err != nil {
			return nil // no /proc: the signal is all there is
		}
		// pid (comm) state ...: the state follows the last ')'.
		if i := strings.LastIndexByte(string(b), ')'); i >= 0 && i+2 < len(b) && (b[i+2] == 'T' || b[i+2] == 't') {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cluster: the object store (pid %d) not stopped %v after SIGSTOP: %s", pid, limit, b)
		}
		time.Sleep(time.Millisecond) // the kernel stops it within moments
	}
}

// Resume continues it (SIGCONT).
func (s *ObjectStore) Resume() error { return s.signal(syscall.SIGCONT) }

func (s *ObjectStore) signal(sig syscall.Signal) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.cmd == nil {
		return fmt.Errorf("cluster: the object store is not running")
	}
	if err := s.mu.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("cluster: object store: %v: %w", sig, err)
	}
	s.mu.paused = sig == syscall.SIGSTOP
	return nil
}

// Kill ends the store (SIGKILL; continued first if stopped) and waits for it. A store
// that is not running is no error.
func (s *ObjectStore) Kill() error {
	s.mu.Lock()
	cmd, done := s.mu.cmd, s.mu.done
	s.mu.Unlock()
	if cmd == nil {
		return nil
	}
	_ = cmd.Process.Signal(syscall.SIGCONT)
	_ = cmd.Process.Kill()
	<-done
	s.forget(cmd)
	return nil
}

// Restart kills the store if it runs and starts it again on its address, over its
// directory, with its credentials.
func (s *ObjectStore) Restart(ctx context.Context) error {
	s.Kill()
	return s.Start(ctx)
}

// Running reports whether its process runs (stopped or not).
func (s *ObjectStore) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.cmd == nil {
		return false
	}
	select {
	case <-s.mu.done:
		return false
	default:
		return true
	}
}

// Paused reports whether it is stopped by SIGSTOP.
func (s *ObjectStore) Paused() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.cmd != nil && s.mu.paused
}

// Pid is its process id, 0 when it does not run.
func (s *ObjectStore) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.cmd == nil {
		return 0
	}
	return s.mu.cmd.Process.Pid
}

// Starts counts its starts.
func (s *ObjectStore) Starts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.starts
}

// Copies counts the segment copies in the bucket (their .log objects) and their bytes.
func (s *ObjectStore) Copies() (n int, bytes int64) {
	filepath.WalkDir(filepath.Join(s.Root, ObjectStoreBucket), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".log") {
			return nil
		}
		if info, err := d.Info(); err == nil {
			n++
			bytes += info.Size()
		}
		return nil
	})
	return n, bytes
}

// lastLines returns the last k lines of the file at path.
func lastLines(path string, k int) []string {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	return lastN(lines, k)
}

// RemoteStats sums, over the running nodes, the tiered storage counters of their
// /metrics (samsa_remote_copy_bytes_total, _copy_errors_total, _fetch_bytes_total,
// _fetch_errors_total, by their names without the samsa_remote_ prefix).
func (c *Cluster) RemoteStats(ctx context.Context) (map[string]float64, error) {
	out := map[string]float64{}
	hc := &http.Client{Timeout: 5 * time.Second}
	defer hc.CloseIdleConnections()
	for _, n := range c.nodes {
		if !n.Running() {
			continue
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+n.AdminAddr()+"/metrics", nil)
		if err != nil {
			return nil, err
		}
		resp, err := hc.Do(req)
		if err != nil {
			return nil, fmt.Errorf("cluster: node %d /metrics: %w", n.ID, err)
		}
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
		for sc.Scan() {
			line := sc.Text()
			if !strings.HasPrefix(line, "samsa_remote_") {
				continue
			}
			if name, _, v, ok := parseSample(line); ok {
				out[strings.TrimPrefix(name, "samsa_remote_")] += v
			}
		}
		resp.Body.Close()
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("cluster: node %d /metrics: %w", n.ID, err)
		}
	}
	return out, nil
}
