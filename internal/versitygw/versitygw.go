// Package versitygw runs versity's versitygw, an S3-compatible server, over a
// local directory (its posix backend: a bucket is a directory, an object a
// file) as a child process on a free loopback port with random root
// credentials. internal/s3test starts it for the tests of tiered storage;
// samsa-bench starts it as the object store of a samsa it spawns for a
// tiered workload. Either way the server is real, never a mock.
package versitygw

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
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
	"time"
)

// Module is what .ci/run installs when versitygw is not on PATH.
const Module = "github.com/versity/versitygw/cmd/versitygw@v1.8.0"

// ErrNotInstalled is returned by Binary when versitygw is not found.
var ErrNotInstalled = errors.New("versitygw: not installed")

// Binary finds versitygw on PATH or in $GOPATH/bin.
func Binary() (string, error) {
	if p, err := exec.LookPath("versitygw"); err == nil {
		return p, nil
	}
	p := filepath.Join(build.Default.GOPATH, "bin", "versitygw")
	if _, err := os.Stat(p); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("%w: no versitygw on PATH or in %s (go install %s)", ErrNotInstalled, filepath.Dir(p), Module)
}

// Gateway is a running versitygw.
type Gateway struct {
	Endpoint       string // http://127.0.0.1:port
	Access, Secret string // its root credentials
	Root           string // the directory it serves
	bin, logPath   string
	cmd            *exec.Cmd
	exited         chan struct{}
}

// Start starts the versitygw at bin over root (which must exist), its output
// going to logPath, and waits until it answers S3 requests. A port taken
// between choosing and binding it is retried twice on another.
func Start(bin, root, logPath string) (*Gateway, error) {
	g := &Gateway{Access: randomHex(8), Secret: randomHex(16), Root: root, bin: bin, logPath: logPath}
	for attempt := 0; ; attempt++ {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		err = g.launch(port)
		if err == nil || attempt == 2 {
			return g, err
		}
	}
}

// launch starts versitygw on port over g.Root with g's credentials and waits
// until it answers; when it does not, it is killed and its log returned in the
// error.
func (g *Gateway) launch(port int) error {
	g.Endpoint = fmt.Sprintf("http://127.0.0.1:%d", port)
	cmd := exec.Command(g.bin, "--port", fmt.Sprintf("127.0.0.1:%d", port), "--access", g.Access, "--secret", g.Secret,
		"--keep-alive", "--quiet", "posix", g.Root)
	out, err := os.Create(g.logPath)
	if err != nil {
		return fmt.Errorf("versitygw: %w", err)
	}
	cmd.Stdout, cmd.Stderr = out, out
	err = cmd.Start()
	out.Close() // the child holds its own descriptor
	if err != nil {
		return fmt.Errorf("versitygw: start: %w", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	g.cmd, g.exited = cmd, exited
	if g.waitReady(10 * time.Second) {
		return nil
	}
	g.Kill()
	log, _ := os.ReadFile(g.logPath)
	return fmt.Errorf("versitygw: did not answer on %s: %s", g.Endpoint, log)
}

// Restart kills the gateway if it runs and starts it again on the same port,
// over the same directory, with the same credentials (a store that crashed
// and came back: what it had stored is still there). A few tries cover a port
// still held by the kernel for a moment; another process holding it fails it.
func (g *Gateway) Restart() error {
	g.Kill()
	u, err := url.Parse(g.Endpoint)
	if err != nil {
		return fmt.Errorf("versitygw: %w", err)
	}
	port, err := strconv.Atoi(u.Port())
	if err != nil {
		return fmt.Errorf("versitygw: %w", err)
	}
	for attempt := 0; ; attempt++ {
		err := g.launch(port)
		if err == nil || attempt == 4 {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Stopped reports whether every thread of the gateway is stopped (state T in
// /proc/<pid>/task/<tid>/stat): SIGSTOP reaches each thread in its own time,
// and a request sent before the last one stopped could still be answered.
// Without /proc it reports false.
func (g *Gateway) Stopped() bool {
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

// Signal sends sig to the gateway (SIGSTOP: a store that hangs, its sockets
// open and silent; SIGCONT: it answers again).
func (g *Gateway) Signal(sig syscall.Signal) error { return g.cmd.Process.Signal(sig) }

// Pid is the gateway's process id.
func (g *Gateway) Pid() int { return g.cmd.Process.Pid }

// MakeBucket creates a bucket as a directory of the posix backend's root,
// which is what CreateBucket does there.
func (g *Gateway) MakeBucket(name string) error {
	return os.Mkdir(filepath.Join(g.Root, name), 0o755)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("versitygw: free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
