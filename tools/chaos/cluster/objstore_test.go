package cluster

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestObjectStoreStopKillRestart: the object store of a tiered run answers; stopped
// (SIGSTOP) it does not, continued it does; killed it does not, started again it
// answers on the same address, over the same directory, whose objects are still there.
func TestObjectStoreStopKillRestart(t *testing.T) {
	bin, err := FindVersitygw()
	if err != nil {
		t.Skip(err)
	}
	s, err := newObjectStore(bin, t.TempDir(), "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer s.Kill()
	get := func(timeout time.Duration) error {
		c := &http.Client{Timeout: timeout}
		defer c.CloseIdleConnections()
		resp, err := c.Get(s.Endpoint() + "/")
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	if err := get(2 * time.Second); err != nil {
		t.Fatalf("a started store: %v", err)
	}
	if err := s.Pause(); err != nil || !s.Paused() || !s.Running() {
		t.Fatalf("pause: %v, paused %v, running %v", err, s.Paused(), s.Running())
	}
	if err := get(500 * time.Millisecond); err == nil {
		t.Fatal("a stopped store answered")
	}
	if err := s.Resume(); err != nil || s.Paused() {
		t.Fatalf("resume: %v, paused %v", err, s.Paused())
	}
	if err := get(5 * time.Second); err != nil {
		t.Fatalf("a continued store: %v", err)
	}
	// An object of the bucket (a file of the posix backend) survives the kill.
	if err := os.WriteFile(filepath.Join(s.Root, ObjectStoreBucket, "00000000000000000000-seg.log"), []byte("segment"), 0o644); err != nil {
		t.Fatal(err)
	}
	addr, pid := s.Addr, s.Pid()
	if err := s.Kill(); err != nil || s.Running() || s.Pid() != 0 {
		t.Fatalf("kill: %v, running %v", err, s.Running())
	}
	if err := get(500 * time.Millisecond); err == nil {
		t.Fatal("a killed store answered")
	}
	if err := s.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if err := get(2 * time.Second); err != nil || s.Addr != addr || s.Pid() == pid || s.Starts() != 2 {
		t.Fatalf("restarted: %v, on %s (was %s), pid %d (was %d), %d starts", err, s.Addr, addr, s.Pid(), pid, s.Starts())
	}
	if n, b := s.Copies(); n != 1 || b != int64(len("segment")) {
		t.Fatalf("copies after the restart: %d, %d bytes", n, b)
	}
}
