// Package s3test runs a real S3-compatible server for tests: versity's
// versitygw over a temporary directory (its posix backend: a bucket is a
// directory, an object a file), as a child process on a free port with
// random root credentials. Tests of the remote storage manager, the remote
// log manager and the broker with tiered storage use it; never a mock.
package s3test

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"go/build"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// Module is what .ci/run installs when versitygw is not on PATH.
const Module = "github.com/versity/versitygw/cmd/versitygw@v1.8.0"

// Gateway is a running versitygw.
type Gateway struct {
	Endpoint       string // http://127.0.0.1:port
	Access, Secret string // its root credentials
	Root           string // the directory it serves
	cmd            *exec.Cmd
	exited         chan struct{}
}

// Binary finds versitygw on PATH or in $GOPATH/bin. Without it the test is
// skipped, except under CI (CI=true), where .ci/run installs it.
func Binary(tb testing.TB) string {
	tb.Helper()
	if p, err := exec.LookPath("versitygw"); err == nil {
		return p
	}
	p := filepath.Join(build.Default.GOPATH, "bin", "versitygw")
	if _, err := os.Stat(p); err == nil {
		return p
	}
	if os.Getenv("CI") == "true" {
		tb.Fatalf("no versitygw on PATH or in %s (go install %s; .ci/run does)", filepath.Dir(p), Module)
	}
	tb.Skipf("no versitygw on PATH or in %s: go install %s", filepath.Dir(p), Module)
	return ""
}

// Start starts versitygw and waits until it answers S3 requests; it is
// killed when the test ends.
func Start(tb testing.TB) *Gateway {
	tb.Helper()
	g := &Gateway{Access: randomHex(8), Secret: randomHex(16), Root: tb.TempDir(), exited: make(chan struct{})}
	for attempt := 0; ; attempt++ {
		log, ok := g.launch(tb, freePort(tb))
		if ok {
			tb.Cleanup(func() { g.Kill() })
			return g
		}
		if attempt == 2 {
			tb.Fatalf("versitygw did not answer on %s: %s", g.Endpoint, log)
		}
	}
}

// launch starts versitygw on port over g.Root with g's credentials and waits
// until it answers; when it does not, it is killed and its log returned.
func (g *Gateway) launch(tb testing.TB, port int) ([]byte, bool) {
	tb.Helper()
	bin := Binary(tb)
	g.Endpoint = fmt.Sprintf("http://127.0.0.1:%d", port)
	g.cmd = exec.Command(bin, "--port", fmt.Sprintf("127.0.0.1:%d", port), "--access", g.Access, "--secret", g.Secret,
		"--keep-alive", "--quiet", "posix", g.Root)
	out, err := os.Create(filepath.Join(tb.TempDir(), "versitygw.log"))
	if err != nil {
		tb.Fatal(err)
	}
	defer out.Close()
	g.cmd.Stdout, g.cmd.Stderr = out, out
	if err := g.cmd.Start(); err != nil {
		tb.Fatalf("start versitygw: %v", err)
	}
	exited := make(chan struct{})
	cmd := g.cmd
	go func() { _ = cmd.Wait(); close(exited) }()
	g.exited = exited
	if g.waitReady(10 * time.Second) {
		return nil, true
	}
	g.Kill()
	log, _ := os.ReadFile(out.Name())
	return log, false
}

// Restart kills the gateway if it runs and starts it again on the same port,
// over the same directory, with the same credentials (a store that crashed
// and came back: what it had stored is still there). The port is taken
// again; should another process have bound it meanwhile, the test fails.
func (g *Gateway) Restart(tb testing.TB) {
	tb.Helper()
	g.Kill()
	u, err := url.Parse(g.Endpoint)
	if err != nil {
		tb.Fatal(err)
	}
	port, err := strconv.Atoi(u.Port())
	if err != nil {
		tb.Fatal(err)
	}
	// The old process's listening socket is closed with it; a few tries cover
	// a port still held by the kernel for a moment.
	for attempt := 0; ; attempt++ {
		log, ok := g.launch(tb, port)
		if ok {
			return
		}
		if attempt == 4 {
			tb.Fatalf("versitygw did not come back on %s: %s", g.Endpoint, log)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitReady polls the endpoint until any HTTP answer comes back (an
// unsigned request gets an S3 error document), or the process exits.
func (g *Gateway) waitReady(limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	c := &http.Client{Timeout: time.Second}
	for time.Now().Before(deadline) {
		select {
		case <-g.exited:
			return false
		default:
		}
		if resp, err := c.Get(g.Endpoint + "/"); err == nil {
			resp.Body.Close()
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

// Kill ends the gateway (SIGKILL; a stopped one is continued first so it
// can die) and waits for it.
func (g *Gateway) Kill() {
	_ = g.cmd.Process.Signal(syscall.SIGCONT)
	_ = g.cmd.Process.Kill()
	<-g.exited
}

// Pause stops the gateway (SIGSTOP): its sockets stay open and silent, as a
// store that hangs. It returns once every thread of the process is stopped
// (the signal is delivered to each thread in its own time: a request sent
// right after the kill could otherwise still be answered), as /proc shows it
// where there is one. It is continued when the test ends.
func (g *Gateway) Pause(tb testing.TB) {
	tb.Helper()
	if err := g.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = g.cmd.Process.Signal(syscall.SIGCONT) })
	if _, err := os.Stat("/proc/self/task"); err != nil {
		return // no /proc: the signal is all there is
	}
	deadline := time.Now().Add(5 * time.Second)
	for !g.stopped() {
		if time.Now().After(deadline) {
			tb.Fatalf("versitygw (pid %d) not stopped 5 s after SIGSTOP", g.Pid())
		}
		time.Sleep(time.Millisecond)
	}
}

// stopped reports whether every thread of the gateway is stopped (state T in
// /proc/<pid>/task/<tid>/stat).
func (g *Gateway) stopped() bool {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", g.Pid()))
	if err != nil || len(tasks) == 0 {
		return false
	}
	for _, f := range tasks {
		b, err := os.ReadFile(f)
		if err != nil {
			return false
		}
		// pid (comm) state ...: the state follows the last ')'.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 || i+2 >= len(b) || (b[i+2] != 'T' && b[i+2] != 't') {
			return false
		}
	}
	return true
}

// MakeBucket creates a bucket as a directory of the posix backend's root,
// which is what CreateBucket does there.
func (g *Gateway) MakeBucket(tb testing.TB, name string) {
	if err := os.Mkdir(filepath.Join(g.Root, name), 0o755); err != nil {
		tb.Fatal(err)
	}
}

func freePort(tb testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Pid is the gateway's process id.
func (g *Gateway) Pid() int { return g.cmd.Process.Pid }

// Resume continues a paused gateway (SIGCONT).
func (g *Gateway) Resume(tb testing.TB) {
	if err := g.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		tb.Fatal(err)
	}
}
