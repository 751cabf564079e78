package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestSystemdUnit: deploy/systemd/samsa.service passes `systemd-analyze verify` (where
// systemd-analyze is installed; the unit's binary replaced by this build's), and its
// ExecStart and ExecStop do what the unit says when run as systemd runs them: the
// node starts from the properties file and the unit's environment (CLUSTER_ID from
// the EnvironmentFile formats it), and ExecStop, given $MAINPID, returns only once the
// controlled shutdown ended with exit status 0.
func TestSystemdUnit(t *testing.T) {
	bin := samsaBin(t)
	unit, err := os.ReadFile("../../deploy/systemd/samsa.service")
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]string{}
	for _, line := range strings.Split(string(unit), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			keys[k] = v
		}
	}
	for _, k := range []string{"ExecStart", "ExecStop", "StateDirectory", "EnvironmentFile", "Restart", "LimitNOFILE", "NoNewPrivileges", "ProtectSystem"} {
		if keys[k] == "" {
			t.Fatalf("the unit has no %s", k)
		}
	}
	dir := t.TempDir()
	if sa, err := exec.LookPath("systemd-analyze"); err == nil {
		local := filepath.Join(dir, "samsa.service")
		if err := os.WriteFile(local, []byte(strings.ReplaceAll(string(unit), "/usr/local/bin/samsa", bin)), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(sa, "verify", local).CombinedOutput(); err != nil || len(strings.TrimSpace(string(out))) > 0 {
			t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
		}
	} else {
		t.Log("systemd-analyze is not installed: the unit's syntax is not verified")
	}

	// ExecStart, as the unit runs it, with its files in a temporary /etc/samsa.
	ports, err := freePorts(3)
	if err != nil {
		t.Fatal(err)
	}
	etc := filepath.Join(dir, "etc")
	os.MkdirAll(etc, 0o755)
	client, ctl := fmt.Sprintf("127.0.0.1:%d", ports[0]), fmt.Sprintf("127.0.0.1:%d", ports[1])
	props := strings.Join([]string{"process.roles=broker,controller", "node.id=1", "controller.quorum.voters=1@" + ctl,
		"listeners=PLAINTEXT://" + client + ",CONTROLLER://" + ctl, "controller.listener.names=CONTROLLER",
		fmt.Sprintf("admin.listen=127.0.0.1:%d", ports[2])}, "\n") + "\n"
	if err := os.WriteFile(filepath.Join(etc, "server.properties"), []byte(props), 0o644); err != nil {
		t.Fatal(err)
	}
	start := strings.Fields(keys["ExecStart"])
	if start[0] != "/usr/local/bin/samsa" || start[len(start)-1] != "/etc/samsa/server.properties" {
		t.Fatalf("ExecStart %q", keys["ExecStart"])
	}
	start[0], start[len(start)-1] = bin, filepath.Join(etc, "server.properties")
	cmd := exec.Command(start[0], start[1:]...)
	env := childEnv()
	for _, e := range strings.Fields(keys["Environment"]) {
		env = append(env, strings.ReplaceAll(e, "/var/lib/samsa", filepath.Join(dir, "state")))
	}
	env = append(env, "CLUSTER_ID=c3lzdGVtZC11bml0LXRlcw")
	cmd.Env = env
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer cmd.Process.Kill()
	eventually(t, 30*time.Second, "the unit's node ready", func() error {
		o, err := exec.Command("curl", "-sf", fmt.Sprintf("http://127.0.0.1:%d/ready", ports[2])).Output()
		if err != nil {
			return fmt.Errorf("%v %s; the node:\n%s", err, o, out.String())
		}
		return nil
	})
	if _, err := os.Stat(filepath.Join(dir, "state", "meta", "meta.properties")); err != nil {
		t.Fatalf("not formatted under the StateDirectory: %v\n%s", err, out.String())
	}

	// ExecStop, with $MAINPID as systemd sets it: it returns once the process ended.
	stop := exec.Command("/bin/sh", "-c", strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(keys["ExecStop"], "/bin/sh -c '"), ""), "'"))
	stop.Env = append(os.Environ(), "MAINPID="+strconv.Itoa(cmd.Process.Pid))
	began := time.Now()
	if o, err := stop.CombinedOutput(); err != nil {
		t.Fatalf("ExecStop: %v %s", err, o)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("the node's exit after ExecStop: %v\n%s", err, out.String())
		}
	case <-time.After(time.Second):
		t.Fatal("ExecStop returned while the node still ran")
	}
	if !strings.Contains(out.String(), "msg=stopped") {
		t.Fatalf("no clean stop:\n%s", out.String())
	}
	t.Logf("ExecStop returned after %v, the node exited 0", time.Since(began).Round(time.Millisecond))
}
