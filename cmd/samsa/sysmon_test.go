package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestSysmonMode(t *testing.T) {
	const built = "schedtrace=2147483647"
	for _, c := range []struct {
		linked, godebug string
		want            string
	}{
		{built, "", "awake (built with schedtrace=2147483647)"},
		{built, "schedtrace=0", "runtime default (GODEBUG schedtrace=0)"},
		{built, "madvdontneed=1,schedtrace=5,schedtrace=0", "runtime default (GODEBUG schedtrace=0)"},
		{"", "", "runtime default (not built by make build: see SAMSA_LDFLAGS in the Makefile)"},
		{"", "schedtrace=2147483647", "awake (GODEBUG schedtrace=2147483647)"},
		{"", "gctrace=1", "runtime default (not built by make build: see SAMSA_LDFLAGS in the Makefile)"},
	} {
		if got := sysmonMode(c.linked, c.godebug); got != c.want {
			t.Errorf("sysmonMode(%q, %q) = %q, want %q", c.linked, c.godebug, got, c.want)
		}
	}
}

// TestMakeBuildKeepsSysmonAwake builds the broker with the Makefile's SAMSA_LDFLAGS
// and checks that the runtime takes the setting: a binary linked with
// schedtrace=1000 in place of the Makefile's value writes the runtime's SCHED lines,
// which only a positive schedtrace does, and GODEBUG=schedtrace=0 silences them.
func TestMakeBuildKeepsSysmonAwake(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the broker")
	}
	mk, err := os.ReadFile(filepath.Join("..", "..", "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	var flags string
	for _, line := range strings.Split(string(mk), "\n") {
		if v, ok := strings.CutPrefix(line, "SAMSA_LDFLAGS ?="); ok {
			flags = strings.TrimSpace(v)
		}
	}
	for _, want := range []string{"-X runtime.godebugDefault=schedtrace=2147483647", "-X main.linkedGODEBUG=schedtrace=2147483647"} {
		if !strings.Contains(flags, want) {
			t.Fatalf("Makefile SAMSA_LDFLAGS = %q, want %s in it", flags, want)
		}
	}
	bin := filepath.Join(t.TempDir(), "samsa")
	short := strings.ReplaceAll(flags, "schedtrace=2147483647", "schedtrace=1000")
	if out, err := exec.Command("go", "build", "-ldflags", short, "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	// run starts the build with env and stops it once its output holds the start-up
	// log and until is true of it, or after 15 s.
	run := func(until func(string) bool, env ...string) string {
		cmd := exec.Command(bin, "serve", "--listen", "127.0.0.1:0", "--admin-listen", "", "--data-dir", t.TempDir())
		cmd.Env = append(os.Environ(), env...)
		out := &syncBuffer{}
		cmd.Stderr = out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(15 * time.Second)
		for s := out.String(); !(strings.Contains(s, "sysmon=") && until(s)) && time.Now().Before(deadline); s = out.String() {
			time.Sleep(50 * time.Millisecond)
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return out.String()
	}
	sched := func(s string) bool { return strings.Contains(s, "SCHED ") }
	// Built with schedtrace=1000, a SCHED line comes within a second of the start.
	if out := run(sched, "GODEBUG="); !strings.Contains(out, "SCHED ") || !strings.Contains(out, "sysmon=\"awake (built with schedtrace=1000)\"") {
		t.Fatalf("built with schedtrace=1000: no SCHED line or start-up log of it:\n%s", out)
	}
	// With GODEBUG=schedtrace=0 none may come: the output is read 1.5 s after the
	// start-up log, past when the line above came.
	var logged time.Time
	quiet := func(s string) bool {
		if logged.IsZero() {
			logged = time.Now()
		}
		return time.Since(logged) > 1500*time.Millisecond
	}
	if out := run(quiet, "GODEBUG=schedtrace=0"); strings.Contains(out, "SCHED ") || !strings.Contains(out, "sysmon=\"runtime default (GODEBUG schedtrace=0)\"") {
		t.Fatalf("GODEBUG=schedtrace=0 did not restore the default:\n%s", out)
	}
}
