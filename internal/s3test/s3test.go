// Package s3test runs a real S3-compatible server for tests: versity's
// versitygw over a temporary directory (internal/versitygw), as a child
// process on a free port with random root credentials. Tests of the remote
// storage manager, the remote log manager and the broker with tiered
// storage use it; never a mock.
package s3test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/samsa-broker/samsa/internal/versitygw"
)

// Module is what .ci/run installs when versitygw is not on PATH.
const Module = versitygw.Module

// Gateway is a running versitygw.
type Gateway struct {
	*versitygw.Gateway
}

// Binary finds versitygw on PATH or in $GOPATH/bin. Without it the test is
// skipped, except under CI (CI=true), where .ci/run installs it.
func Binary(tb testing.TB) string {
	tb.Helper()
	p, err := versitygw.Binary()
	if err == nil {
		return p
	}
	if os.Getenv("CI") == "true" {
		tb.Fatal(err)
	}
	tb.Skip(err)
	return ""
}

// Start starts versitygw and waits until it answers S3 requests; it is
// killed when the test ends.
func Start(tb testing.TB) *Gateway {
	tb.Helper()
	bin := Binary(tb)
	g, err := versitygw.Start(bin, tb.TempDir(), filepath.Join(tb.TempDir(), "versitygw.log"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(g.Kill)
	return &Gateway{g}
}

// Pause stops the gateway (SIGSTOP): its sockets stay open and silent, as a
// store that hangs. It returns once every thread of the process is stopped
// (versitygw.Gateway.Stopped), as /proc shows it where there is one. It is
// continued when the test ends.
func (g *Gateway) Pause(tb testing.TB) {
	tb.Helper()
	if err := g.Signal(syscall.SIGSTOP); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = g.Signal(syscall.SIGCONT) })
	if _, err := os.Stat("/proc/self/task"); err != nil {
		return // no /proc: the signal is all there is
	}
	deadline := time.Now().Add(5 * time.Second)
	for !g.Stopped() {
		if time.Now().After(deadline) {
			tb.Fatalf("versitygw (pid %d) not stopped 5 s after SIGSTOP", g.Pid())
		}
		time.Sleep(time.Millisecond)
	}
}

// Restart kills the gateway if it runs and starts it again on the same port,
// over the same directory, with the same credentials (a store that crashed and
// came back: what it had stored is still there).
func (g *Gateway) Restart(tb testing.TB) {
	tb.Helper()
	if err := g.Gateway.Restart(); err != nil {
		tb.Fatal(err)
	}
}

// Resume continues a paused gateway (SIGCONT).
func (g *Gateway) Resume(tb testing.TB) {
	if err := g.Signal(syscall.SIGCONT); err != nil {
		tb.Fatal(err)
	}
}

// MakeBucket creates a bucket as a directory of the posix backend's root,
// which is what CreateBucket does there.
func (g *Gateway) MakeBucket(tb testing.TB, name string) {
	if err := g.Gateway.MakeBucket(name); err != nil {
		tb.Fatal(err)
	}
}
