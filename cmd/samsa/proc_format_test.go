package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestProcServeFormatsWithClusterID: `samsa serve` of a cluster node whose directories
// are not formatted formats them first when CLUSTER_ID is set (as the apache/kafka
// image does; --cluster-id the same), serves, starts again on them with the same id,
// and refuses to start with another.
func TestProcServeFormatsWithClusterID(t *testing.T) {
	bin := samsaBin(t)
	dir := t.TempDir()
	ports, err := freePorts(3)
	if err != nil {
		t.Fatal(err)
	}
	client, ctl, admin := fmt.Sprintf("127.0.0.1:%d", ports[0]), fmt.Sprintf("127.0.0.1:%d", ports[1]), fmt.Sprintf("127.0.0.1:%d", ports[2])
	props := filepath.Join(dir, "server.properties")
	if err := os.WriteFile(props, []byte(strings.Join([]string{
		"process.roles=broker,controller", "node.id=1", "controller.quorum.voters=1@" + ctl,
		"listeners=PLAINTEXT://" + client + ",CONTROLLER://" + ctl, "controller.listener.names=CONTROLLER",
		"log.dirs=" + filepath.Join(dir, "logs"), "metadata.log.dir=" + filepath.Join(dir, "meta"), "admin.listen=" + admin,
	}, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	serve := func(env string, args ...string) (*exec.Cmd, *strings.Builder) {
		cmd := exec.Command(bin, append([]string{"serve", "--config", props}, args...)...)
		cmd.Env = append(childEnv(), env)
		out := &strings.Builder{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd, out
	}
	ready := func(cmd *exec.Cmd, out *strings.Builder) {
		t.Helper()
		defer func() {
			cmd.Process.Signal(os.Interrupt)
			cmd.Wait()
		}()
		eventually(t, 30*time.Second, "the node serves", func() error {
			c, err := net.DialTimeout("tcp", client, time.Second)
			if err != nil {
				return err
			}
			c.Close()
			return nil
		})
	}
	const id = "uKfQ2kFvT9aZ3Q5a1n2b3w"
	cmd, out := serve("CLUSTER_ID=" + id)
	ready(cmd, out)
	if !strings.Contains(out.String(), "msg=formatted dir="+filepath.Join(dir, "meta")+" cluster_id="+id) {
		t.Fatalf("no directory formatted:\n%s", out)
	}
	cmd, out = serve("", "--cluster-id", id) // the flag, on formatted directories
	ready(cmd, out)
	if strings.Contains(out.String(), "msg=formatted") {
		t.Fatalf("formatted again:\n%s", out)
	}
	cmd, out = serve("CLUSTER_ID=AAAAAAAAAAAAAAAAAAAAAA")
	err = cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(out.String(), "formatting the node's directories") {
		t.Fatalf("another cluster id: %v\n%s", err, out)
	}
}
