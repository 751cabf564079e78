package remote

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"go/build"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// versitygwModule is what .ci/run installs when versitygw is not on PATH.
const versitygwModule = "github.com/versity/versitygw/cmd/versitygw@v1.8.0"

// gateway is a versitygw S3 gateway run as a child process over a
// temporary directory (its posix backend: a bucket is a directory, an
// object a file), on a free port with random root credentials.
type gateway struct {
	endpoint       string
	access, secret string
	root           string
	cmd            *exec.Cmd
	exited         chan struct{}
}

// versitygw finds the binary on PATH or in $GOPATH/bin. Without it the
// tests are skipped, except under CI (CI=true), where .ci/run installs it.
func versitygw(tb testing.TB) string {
	tb.Helper()
	if p, err := exec.LookPath("versitygw"); err == nil {
		return p
	}
	p := filepath.Join(build.Default.GOPATH, "bin", "versitygw")
	if _, err := os.Stat(p); err == nil {
		return p
	}
	if os.Getenv("CI") == "true" {
		tb.Fatalf("no versitygw on PATH or in %s (go install %s; .ci/run does)", filepath.Dir(p), versitygwModule)
	}
	tb.Skipf("no versitygw on PATH or in %s: go install %s", filepath.Dir(p), versitygwModule)
	return ""
}

// startGateway starts versitygw and waits until it answers S3 requests;
// it is killed when the test ends.
func startGateway(tb testing.TB) *gateway {
	tb.Helper()
	bin := versitygw(tb)
	g := &gateway{access: randomHex(8), secret: randomHex(16), root: tb.TempDir(), exited: make(chan struct{})}
	for attempt := 0; ; attempt++ {
		port := freePort(tb)
		g.endpoint = fmt.Sprintf("http://127.0.0.1:%d", port)
		g.cmd = exec.Command(bin, "--port", fmt.Sprintf("127.0.0.1:%d", port), "--access", g.access, "--secret", g.secret,
			"--keep-alive", "--quiet", "posix", g.root)
		out, err := os.Create(filepath.Join(tb.TempDir(), "versitygw.log"))
		if err != nil {
			tb.Fatal(err)
		}
		g.cmd.Stdout, g.cmd.Stderr = out, out
		if err := g.cmd.Start(); err != nil {
			tb.Fatalf("start versitygw: %v", err)
		}
		exited := make(chan struct{})
		go func() { _ = g.cmd.Wait(); close(exited) }()
		g.exited = exited
		if g.waitReady(10 * time.Second) {
			tb.Cleanup(func() { g.kill() })
			return g
		}
		g.kill()
		log, _ := os.ReadFile(out.Name())
		if attempt == 2 {
			tb.Fatalf("versitygw did not answer on %s: %s", g.endpoint, log)
		}
	}
}

// waitReady polls the endpoint until any HTTP answer comes back (an
// unsigned request gets an S3 error document), or the process exits.
func (g *gateway) waitReady(limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	c := &http.Client{Timeout: time.Second}
	for time.Now().Before(deadline) {
		select {
		case <-g.exited:
			return false
		default:
		}
		if resp, err := c.Get(g.endpoint + "/"); err == nil {
			resp.Body.Close()
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

// kill ends the gateway (SIGKILL; a stopped one is continued first so it
// can die) and waits for it.
func (g *gateway) kill() {
	_ = g.cmd.Process.Signal(syscall.SIGCONT)
	_ = g.cmd.Process.Kill()
	<-g.exited
}

// pause stops the gateway (SIGSTOP): its sockets stay open and silent, as a
// store that hangs.
func (g *gateway) pause(tb testing.TB) {
	if err := g.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = g.cmd.Process.Signal(syscall.SIGCONT) })
}

// makeBucket creates a bucket as a directory of the posix backend's root,
// which is what CreateBucket does there.
func (g *gateway) makeBucket(tb testing.TB, name string) {
	if err := os.Mkdir(filepath.Join(g.root, name), 0o755); err != nil {
		tb.Fatal(err)
	}
}

// config is a Config for the gateway and bucket, with short timeouts.
func (g *gateway) config(bucket string) Config {
	return Config{
		Bucket: bucket, Region: "us-east-1", Endpoint: g.endpoint, PathStyle: true,
		AccessKeyID: g.access, SecretAccessKey: g.secret,
		PartSize: defaultPartSize, CallTimeout: 20 * time.Second, AttemptTimeout: 5 * time.Second, ChunkSize: 4 << 20,
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
