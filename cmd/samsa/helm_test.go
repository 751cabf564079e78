package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"gopkg.in/yaml.v3"
)

var updateManifests = flag.Bool("update-manifests", false, "rewrite deploy/kubernetes/samsa.yaml from the chart")

// The chart's sample cluster id, the one deploy/kubernetes/samsa.yaml is rendered with.
const chartClusterID = "F0ltxNg0TJ6edkSSh63jDw"

const manifestHeader = `# Samsa on Kubernetes: the Helm chart deploy/kubernetes/samsa rendered with its default
# values, release "samsa" in namespace "default":
#   helm template samsa deploy/kubernetes/samsa --namespace default --set clusterId=F0ltxNg0TJ6edkSSh63jDw
# Give your cluster its own id (samsa storage random-uuid) before applying it.
`

// helmBin is helm on PATH or in GOPATH/bin (.ci/run installs it from the module
// proxy), or "".
func helmBin() string {
	if p, err := exec.LookPath("helm"); err == nil {
		return p
	}
	out, err := exec.Command("go", "env", "GOPATH").Output()
	if err == nil {
		p := filepath.Join(strings.TrimSpace(string(out)), "bin", "helm")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

// k8sContainer is the part of the rendered StatefulSet's container the test runs.
type k8sContainer struct {
	Args []string `yaml:"args"`
	Env  []struct {
		Name      string `yaml:"name"`
		Value     string `yaml:"value"`
		ValueFrom *struct {
			FieldRef struct {
				FieldPath string `yaml:"fieldPath"`
			} `yaml:"fieldRef"`
		} `yaml:"valueFrom"`
	} `yaml:"env"`
	Ports []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	ReadinessProbe struct {
		HTTPGet struct {
			Path string `yaml:"path"`
		} `yaml:"httpGet"`
	} `yaml:"readinessProbe"`
	VolumeMounts []struct {
		MountPath string `yaml:"mountPath"`
	} `yaml:"volumeMounts"`
}

type k8sStatefulSet struct {
	Kind     string `yaml:"kind"`
	Metadata struct {
		Name string `yaml:"name"`
	} `yaml:"metadata"`
	Spec struct {
		Replicas    int    `yaml:"replicas"`
		ServiceName string `yaml:"serviceName"`
		Template    struct {
			Spec struct {
				TerminationGracePeriodSeconds int            `yaml:"terminationGracePeriodSeconds"`
				Containers                    []k8sContainer `yaml:"containers"`
			} `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

// TestHelmChart: deploy/kubernetes/samsa passes `helm lint`; `helm template` renders
// deploy/kubernetes/samsa.yaml exactly (-update-manifests rewrites it); and the
// rendered StatefulSet, run as Kubernetes would run its pods (each pod's environment
// from its fieldRefs and $(VAR) references, its DNS names and ports mapped to
// 127.0.0.1, its volume a directory), forms a cluster: every pod ready by its
// readiness probe, records produced with kcat read back, then a rolling restart in
// the StatefulSet's order (SIGTERM, the grace period, start, ready again) under
// acks=all idempotent load loses none, and no partition goes more than 2 s without an
// acknowledgement (goal; the test fails at 8 s).
func TestHelmChart(t *testing.T) {
	bin := samsaBin(t)
	helm := helmBin()
	if helm == "" {
		t.Skip("helm is not installed (.ci/run installs it: go install helm.sh/helm/v4/cmd/helm@v4.3.2)")
	}
	chart := "../../deploy/kubernetes/samsa"
	if out, err := exec.Command(helm, "lint", chart, "--set", "clusterId="+chartClusterID).CombinedOutput(); err != nil {
		t.Fatalf("helm lint: %v\n%s", err, out)
	}
	if out, err := exec.Command(helm, "template", "samsa", chart).CombinedOutput(); err == nil || !bytes.Contains(out, []byte("set clusterId")) {
		t.Fatalf("helm template without a cluster id: %v\n%s", err, out)
	}
	rendered, err := exec.Command(helm, "template", "samsa", chart, "--namespace", "default", "--set", "clusterId="+chartClusterID).Output()
	if err != nil {
		t.Fatalf("helm template: %v", err)
	}
	manifest := "../../deploy/kubernetes/samsa.yaml"
	want := manifestHeader + string(rendered)
	if *updateManifests {
		if err := os.WriteFile(manifest, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if have, err := os.ReadFile(manifest); err != nil || string(have) != want {
		t.Fatalf("%s is not what the chart renders (go test -run TestHelmChart ./cmd/samsa -update-manifests): %v", manifest, err)
	}

	var sts *k8sStatefulSet
	dec := yaml.NewDecoder(bytes.NewReader(rendered))
	for {
		var s k8sStatefulSet
		if err := dec.Decode(&s); err != nil {
			break
		}
		if s.Kind == "StatefulSet" {
			sts = &s
		}
	}
	if sts == nil || len(sts.Spec.Template.Spec.Containers) != 1 {
		t.Fatal("no StatefulSet with one container rendered")
	}
	ctr := sts.Spec.Template.Spec.Containers[0]
	if _, err := exec.LookPath("kcat"); err != nil {
		t.Skip("kcat is not installed")
	}
	n := sts.Spec.Replicas
	ports := map[string]int{}
	for _, p := range ctr.Ports {
		ports[p.Name] = p.ContainerPort
	}
	free, err := freePorts(n * len(ports))
	if err != nil {
		t.Fatal(err)
	}
	// Each pod's container port, mapped to its own port of 127.0.0.1.
	hostPort := map[string]int{}
	names := []string{}
	for name := range ports {
		names = append(names, name)
	}
	for i := range n {
		for j, name := range names {
			hostPort[fmt.Sprintf("%d/%d", i, ports[name])] = free[i*len(names)+j]
		}
	}
	dns := regexp.MustCompile(regexp.QuoteMeta(sts.Metadata.Name) + `-(\d+)\.` + regexp.QuoteMeta(sts.Spec.ServiceName) + `\.default\.svc\.cluster\.local:(\d+)`)
	any := regexp.MustCompile(`0\.0\.0\.0:(\d+)`)
	dir := t.TempDir()
	podEnv := func(i int) []string {
		vars := map[string]string{}
		env := childEnv()
		for _, e := range ctr.Env {
			v := e.Value
			if e.ValueFrom != nil {
				switch e.ValueFrom.FieldRef.FieldPath {
				case "metadata.name":
					v = fmt.Sprintf("%s-%d", sts.Metadata.Name, i)
				case "metadata.namespace":
					v = "default"
				case "metadata.labels['apps.kubernetes.io/pod-index']":
					v = strconv.Itoa(i)
				default:
					t.Fatalf("fieldRef %s", e.ValueFrom.FieldRef.FieldPath)
				}
			}
			v = regexp.MustCompile(`\$\((\w+)\)`).ReplaceAllStringFunc(v, func(m string) string { return vars[m[2:len(m)-1]] })
			v = dns.ReplaceAllStringFunc(v, func(m string) string {
				s := dns.FindStringSubmatch(m) // pod ordinal, port
				return fmt.Sprintf("127.0.0.1:%d", hostPort[s[1]+"/"+s[2]])
			})
			v = any.ReplaceAllStringFunc(v, func(m string) string {
				return fmt.Sprintf("127.0.0.1:%d", hostPort[strconv.Itoa(i)+"/"+any.FindStringSubmatch(m)[1]])
			})
			for _, vm := range ctr.VolumeMounts {
				v = strings.ReplaceAll(v, vm.MountPath, filepath.Join(dir, fmt.Sprintf("pod-%d", i)))
			}
			vars[e.Name] = v
			env = append(env, e.Name+"="+v)
		}
		return env
	}
	type pod struct {
		cmd    *exec.Cmd
		out    *syncBuffer
		exited chan error
	}
	pods := make([]*pod, n)
	start := func(i int) {
		p := &pod{cmd: exec.Command(bin, ctr.Args...), out: &syncBuffer{}, exited: make(chan error, 1)}
		p.cmd.Env = podEnv(i)
		p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
		if err := p.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { p.exited <- p.cmd.Wait() }()
		pods[i] = p
	}
	defer func() {
		for i, p := range pods {
			if p != nil {
				p.cmd.Process.Kill()
				if t.Failed() {
					t.Logf("pod %d:\n%s", i, p.out.String())
				}
			}
		}
	}()
	ready := func(i int) {
		t.Helper()
		url := fmt.Sprintf("http://127.0.0.1:%d%s", hostPort[fmt.Sprintf("%d/%d", i, ports["admin"])], ctr.ReadinessProbe.HTTPGet.Path)
		eventually(t, 60*time.Second, fmt.Sprintf("pod %d ready (%s)", i, url), func() error {
			resp, err := http.Get(url)
			if err != nil {
				return err
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				return fmt.Errorf("%s", resp.Status)
			}
			return nil
		})
	}
	for i := range n {
		start(i)
	}
	for i := range n {
		ready(i)
	}
	var seeds []string
	for i := range n {
		seeds = append(seeds, fmt.Sprintf("127.0.0.1:%d", hostPort[fmt.Sprintf("%d/%d", i, ports["kafka"])]))
	}
	bootstrap := strings.Join(seeds, ",")
	produce := func(from, to int) {
		t.Helper()
		var in strings.Builder
		for k := from; k < to; k++ {
			fmt.Fprintf(&in, "record-%d\n", k)
		}
		cmd := exec.Command("kcat", "-b", bootstrap, "-P", "-t", "smoke", "-X", "acks=all")
		cmd.Stdin = strings.NewReader(in.String())
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("kcat -P: %v\n%s", err, out)
		}
	}
	count := func() int {
		t.Helper()
		out, err := exec.Command("kcat", "-b", bootstrap, "-C", "-t", "smoke", "-o", "beginning", "-e", "-q").Output()
		if err != nil {
			t.Fatalf("kcat -C: %v", err)
		}
		return strings.Count(string(out), "record-")
	}
	produce(0, 1000)
	if c := count(); c != 1000 {
		t.Fatalf("read %d of 1000", c)
	}
	// acks=all idempotent load through the roll (franz-go, MetadataMinAge 100 ms as
	// in leaderKill) on a topic of 6 partitions at the chart's replication factor and
	// min.insync.replicas.
	adm := kadm.NewClient(client(t, bootstrap))
	actx, acancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer acancel()
	if _, err := adm.CreateTopic(actx, 6, -1, nil, "rolled"); err != nil {
		t.Fatal(err)
	}
	lp := startLoad(t, bootstrap, "rolled", kgo.MetadataMinAge(100*time.Millisecond))
	lp.waitAcked(t, 2000, 30*time.Second)
	rollStart := time.Now()
	// A rolling restart as the StatefulSet controller does it: the highest ordinal
	// first, each pod ready before the next.
	grace := time.Duration(sts.Spec.Template.Spec.TerminationGracePeriodSeconds) * time.Second
	for i := n - 1; i >= 0; i-- {
		began := time.Now()
		pods[i].cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-pods[i].exited:
			if err != nil {
				t.Fatalf("pod %d after SIGTERM: %v", i, err)
			}
		case <-time.After(grace):
			t.Fatalf("pod %d still ran after the grace period (%v)", i, grace)
		}
		start(i)
		ready(i)
		t.Logf("pod %d restarted and ready (%s) in %v", i, ctr.ReadinessProbe.HTTPGet.Path, time.Since(began).Round(time.Millisecond))
		produce(1000+100*(n-1-i), 1000+100*(n-i))
	}
	if c, want := count(), 1000+100*n; c != want {
		t.Fatalf("read %d of %d after the rolling restart", c, want)
	}
	lp.waitAcked(t, 2000, 30*time.Second)
	acks, _, errs := lp.finish()
	var worst time.Duration
	for p := range int32(6) {
		var ps []ack
		for _, a := range acks {
			if a.Partition == p {
				ps = append(ps, a)
			}
		}
		worst = max(worst, gapAfter(ps, rollStart))
	}
	log := readAll(t, bootstrap, "rolled")
	lost, dups, _ := compareAcked(acks, log)
	t.Logf("rolling restart of %d pods under acks=all load: %d acknowledged, %d lost, %d duplicated, %d producer errors; longest time a partition went without an acknowledgement %v",
		n, len(acks), lost, dups, len(errs), worst.Round(time.Millisecond))
	checkAcked(t, acks, log)
	// The goal is 2 s (the figure above, quoted where it is measured); the test fails
	// at 8 s, a regression rather than a loaded machine's stall.
	if worst > 8*time.Second {
		t.Errorf("a partition went %v without an acknowledgement during the roll (the goal is 2 s)", worst)
	}
}
