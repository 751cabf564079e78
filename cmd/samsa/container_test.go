package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sys/unix"
)

// containerTool is podman, else docker, the first installed whose `info`
// answers (docker's needs its daemon); else "" and why not.
func containerTool() (string, string) {
	var why []string
	for _, c := range []string{"podman", "docker"} {
		p, err := exec.LookPath(c)
		if err != nil {
			why = append(why, c+" is not installed")
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		out, err := exec.CommandContext(ctx, p, "info").CombinedOutput()
		cancel()
		if err != nil {
			why = append(why, fmt.Sprintf("%s info: %v: %s", p, err, lastLine(string(out))))
			continue
		}
		return p, ""
	}
	return "", strings.Join(why, "; ")
}

// TestContainerImage: `make image` builds the Containerfile's image with podman (or
// docker) where one is installed; where a container can run here, a single node
// started from it with only environment variables serves a produce and a fetch over
// a published port, answers /ready, and stops cleanly on `stop` (SIGTERM, exit 0).
// Where the tool is missing, or runs no container on this machine (a sandbox without
// the cgroups or the privileges a runtime needs), it is skipped saying why.
func TestContainerImage(t *testing.T) {
	bin := samsaBin(t) // skipped with -short; the topics command below
	tool, why := containerTool()
	if tool == "" {
		t.Skip("no container tool that answers here: " + why)
	}
	b := make([]byte, 4)
	rand.Read(b)
	image := "samsa-test:" + hex.EncodeToString(b)
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("make", "-C", root, "image", "IMAGE="+image, "CONTAINER="+tool).CombinedOutput(); err != nil {
		t.Fatalf("make image: %v\n%s", err, out)
	}
	defer exec.Command(tool, "rmi", "-f", image).Run()

	// Can a container run here at all? Plainly, else with runc and the limits this
	// process has, at most 4,096 (a runtime raising them needs CAP_SYS_RESOURCE).
	var runArgs []string
	try := func(global, run []string) error {
		args := append(append(append([]string{}, global...), "run", "--rm"), run...)
		out, err := exec.Command(tool, append(args, image, "serve", "-h")...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("%v: %s", err, strings.TrimSpace(string(out)))
		}
		runArgs = append(append(append([]string{}, global...), "run"), run...)
		return nil
	}
	first := try(nil, nil)
	if first != nil {
		var lim [2]string
		for i, r := range []int{unix.RLIMIT_NOFILE, unix.RLIMIT_NPROC} {
			var rl unix.Rlimit
			if err := unix.Getrlimit(r, &rl); err != nil {
				t.Fatal(err)
			}
			lim[i] = strconv.FormatUint(min(rl.Max, 4096), 10)
		}
		global := []string(nil)
		if _, err := exec.LookPath("runc"); err == nil && strings.HasSuffix(tool, "podman") {
			global = []string{"--runtime", "runc"}
		}
		if err := try(global, []string{"--ulimit", "nofile=" + lim[0] + ":" + lim[0], "--ulimit", "nproc=" + lim[1] + ":" + lim[1]}); err != nil {
			t.Skipf("%s builds the image but runs no container here: %v (then %v)", tool, first, err)
		}
		t.Logf("containers run here with %v", runArgs)
	}

	ports, err := freePorts(2)
	if err != nil {
		t.Fatal(err)
	}
	name := "samsa-test-" + hex.EncodeToString(b)
	kafka, admin := fmt.Sprintf("127.0.0.1:%d", ports[0]), fmt.Sprintf("127.0.0.1:%d", ports[1])
	args := append(runArgs, "-d", "--name", name, "-p", kafka+":9092", "-p", admin+":9644",
		"-e", "SAMSA_ADVERTISED_LISTENERS="+kafka, image)
	if out, err := exec.Command(tool, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s run: %v\n%s", tool, err, out)
	}
	defer exec.Command(tool, "rm", "-f", name).Run()
	logs := func() string {
		out, _ := exec.Command(tool, "logs", name).CombinedOutput()
		return string(out)
	}
	var body string
	eventually(t, 60*time.Second, "the container's /ready", func() error {
		out, err := exec.Command("curl", "-sf", "http://"+admin+"/ready").Output()
		body = strings.TrimSpace(string(out))
		return err
	})
	t.Logf("/ready: %s", body)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := client(t, kafka, kgo.DefaultProduceTopic("boxed"), kgo.ConsumeTopics("boxed"), kgo.AllowAutoTopicCreation())
	if err := cl.ProduceSync(ctx, kgo.StringRecord("in a box")).FirstErr(); err != nil {
		t.Fatalf("produce: %v\n%s", err, logs())
	}
	fs := cl.PollRecords(ctx, 1)
	if recs := fs.Records(); len(recs) != 1 || string(recs[0].Value) != "in a box" {
		t.Fatalf("fetch: %v %v", recs, fs.Errors())
	}
	if out, err := exec.Command(tool, "stop", "-t", "30", name).CombinedOutput(); err != nil {
		t.Fatalf("stop: %v\n%s", err, out)
	}
	out, err := exec.Command(tool, "inspect", "-f", "{{.State.ExitCode}}", name).Output()
	if err != nil || strings.TrimSpace(string(out)) != "0" {
		t.Fatalf("exit code %q (%v)\n%s", out, err, logs())
	}
	if l := logs(); !strings.Contains(l, "msg=stopped") {
		t.Fatalf("no clean stop in the log:\n%s", l)
	}

	// Three containers on the host's network form a cluster from the environment
	// alone (CLUSTER_ID formats each one's volume), and pass kcat's smoke test.
	if _, err := exec.LookPath("kcat"); err != nil {
		t.Skip("kcat is not installed")
	}
	cp, err := freePorts(9)
	if err != nil {
		t.Fatal(err)
	}
	var voters, seeds []string
	for i := range 3 {
		voters = append(voters, fmt.Sprintf("%d@127.0.0.1:%d", i+1, cp[3*i+1]))
		seeds = append(seeds, fmt.Sprintf("127.0.0.1:%d", cp[3*i]))
	}
	for i := range 3 {
		cname := fmt.Sprintf("%s-%d", name, i+1)
		args := append(runArgs, "-d", "--name", cname, "--network", "host",
			"-e", "CLUSTER_ID=Y29udGFpbmVyLWNsdXN0ZQ",
			"-e", "SAMSA_PROCESS_ROLES=broker,controller",
			"-e", fmt.Sprintf("SAMSA_NODE_ID=%d", i+1),
			"-e", "SAMSA_CONTROLLER_QUORUM_VOTERS="+strings.Join(voters, ","),
			"-e", fmt.Sprintf("SAMSA_LISTENERS=PLAINTEXT://%s,CONTROLLER://127.0.0.1:%d", seeds[i], cp[3*i+1]),
			"-e", "SAMSA_CONTROLLER_LISTENER_NAMES=CONTROLLER",
			"-e", fmt.Sprintf("SAMSA_ADMIN_LISTEN=127.0.0.1:%d", cp[3*i+2]),
			image)
		if out, err := exec.Command(tool, args...).CombinedOutput(); err != nil {
			t.Fatalf("%s run %s: %v\n%s", tool, cname, err, out)
		}
		defer exec.Command(tool, "rm", "-f", cname).Run()
	}
	for i := range 3 {
		eventually(t, 60*time.Second, fmt.Sprintf("container %d's /ready", i+1), func() error {
			return exec.Command("curl", "-sf", fmt.Sprintf("http://127.0.0.1:%d/ready", cp[3*i+2])).Run()
		})
	}
	bootstrap := strings.Join(seeds, ",")
	if out, err := exec.Command(bin, "topics", "create", "boxes", "--bootstrap-server", bootstrap, "--partitions", "3", "--replication-factor", "3").CombinedOutput(); err != nil {
		t.Fatalf("topics create: %v\n%s", err, out)
	}
	var in strings.Builder
	for k := range 100 {
		fmt.Fprintf(&in, "box-%d\n", k)
	}
	produce := exec.Command("kcat", "-b", bootstrap, "-P", "-t", "boxes", "-X", "acks=all")
	produce.Stdin = strings.NewReader(in.String())
	if out, err := produce.CombinedOutput(); err != nil {
		t.Fatalf("kcat -P: %v\n%s", err, out)
	}
	got, err := exec.Command("kcat", "-b", bootstrap, "-C", "-t", "boxes", "-o", "beginning", "-e", "-q").Output()
	if err != nil || strings.Count(string(got), "box-") != 100 {
		t.Fatalf("kcat -C: %v, %d of 100", err, strings.Count(string(got), "box-"))
	}
	t.Logf("three containers (host network): a topic of RF 3, 100 records through kcat")
}
