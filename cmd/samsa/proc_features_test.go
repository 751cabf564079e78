package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// runSamsa runs the samsa binary with args and returns its exit code, stdout and
// stderr.
func runSamsa(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(samsaBin(t), args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, stdout.String(), stderr.String()
}

// finalizedLevel asks the broker at addr (ApiVersions v3) for feature's finalized level.
func finalizedLevel(ctx context.Context, addr, feature string) (int16, error) {
	d := net.Dialer{Timeout: 5 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version, req.ClientSoftwareName, req.ClientSoftwareVersion = 3, "samsa-test", "1"
	if _, err := conn.Write(kmsg.NewRequestFormatter().AppendRequest(nil, req, 1)); err != nil {
		return 0, err
	}
	var hdr [4]byte
	if _, err := readFull(conn, hdr[:]); err != nil {
		return 0, err
	}
	body := make([]byte, int(hdr[0])<<24|int(hdr[1])<<16|int(hdr[2])<<8|int(hdr[3]))
	if _, err := readFull(conn, body); err != nil {
		return 0, err
	}
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 3
	if err := resp.ReadFrom(body[4:]); err != nil { // the correlation id, then the body (header v0)
		return 0, err
	}
	for _, f := range resp.FinalizedFeatures {
		if f.Name == feature {
			return f.MaxVersionLevel, nil
		}
	}
	return 0, nil
}

func readFull(c net.Conn, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := c.Read(b[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// TestProcFeatures: three `samsa serve` processes whose configuration sets the old key
// samsa.transaction.version=1, so the cluster is formatted at transaction.version 1.
// `samsa features describe` shows it; transactions keep their epoch; `samsa features
// upgrade --feature transaction.version=2` (a dry run first) raises it at run time:
// every node's ApiVersions reports 2, the nodes log that the key no longer has an
// effect, and a producer's epoch is bumped at every transaction. A downgrade of
// metadata.version across a level that changed the metadata is refused with Kafka's
// message and exit status 1.
func TestProcFeatures(t *testing.T) {
	spec := combined(3)
	spec.Keys = map[string]string{"samsa.transaction.version": "1", "transaction.state.log.num.partitions": "3",
		"broker.session.timeout.ms": "6000"}
	c := startProcCluster(t, spec)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	bs := c.Bootstrap()

	code, out, errOut := runSamsa(t, "features", "--bootstrap-server", bs, "describe")
	if code != 0 || !strings.Contains(out, "Feature: transaction.version\tSupportedMinVersion: 0\tSupportedMaxVersion: 2\tFinalizedVersionLevel: 1\tEpoch: ") ||
		!strings.Contains(out, "Feature: metadata.version\tSupportedMinVersion: 3.9-IV0\tSupportedMaxVersion: 4.4-IV2\tFinalizedVersionLevel: 4.4-IV2\tEpoch: ") {
		t.Fatalf("describe: exit %d\n%s%s", code, out, errOut)
	}
	t.Logf("samsa features describe:\n%s", out)

	adm := kadm.NewClient(client(t, bs))
	if _, err := adm.CreateTopic(ctx, 3, 3, nil, "feat"); err != nil {
		t.Fatal(err)
	}
	// Two transactions of one producer: the epoch stays at transaction.version 1.
	epochAfterTwo := func(id string) int16 {
		t.Helper()
		p := client(t, bs, kgo.TransactionalID(id), kgo.DefaultProduceTopic("feat"))
		for i := range 2 {
			if err := p.BeginTransaction(); err != nil {
				t.Fatal(err)
			}
			if err := p.ProduceSync(ctx, kgo.StringRecord(fmt.Sprintf("%s-%d", id, i))).FirstErr(); err != nil {
				t.Fatalf("produce: %v", err)
			}
			if err := p.EndTransaction(ctx, kgo.TryCommit); err != nil {
				t.Fatalf("commit: %v", err)
			}
		}
		d, err := adm.DescribeTransactions(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return d[id].ProducerEpoch
	}
	if e := epochAfterTwo("feat-v1"); e != 0 {
		t.Fatalf("epoch %d after two transactions at transaction.version 1", e)
	}

	code, out, errOut = runSamsa(t, "features", "--bootstrap-server", bs, "upgrade", "--feature", "transaction.version=2", "--dry-run")
	if code != 0 || out != "transaction.version can be upgraded to 2.\n" {
		t.Fatalf("dry run: exit %d\n%s%s", code, out, errOut)
	}
	if l, err := finalizedLevel(ctx, c.Node(3).Client, "transaction.version"); err != nil || l != 1 {
		t.Fatalf("after the dry run: %d %v", l, err)
	}
	code, out, errOut = runSamsa(t, "features", "--bootstrap-server", bs, "upgrade", "--feature", "transaction.version=2")
	if code != 0 || out != "transaction.version was upgraded to 2.\n" {
		t.Fatalf("upgrade: exit %d\n%s%s", code, out, errOut)
	}
	took := eventually(t, 30*time.Second, "transaction.version 2 on every node", func() error {
		for _, id := range c.Brokers() {
			l, err := finalizedLevel(ctx, c.Node(id).Client, "transaction.version")
			if err != nil {
				return err
			}
			if l != 2 {
				return fmt.Errorf("node %d reports transaction.version %d", id, l)
			}
		}
		return nil
	})
	t.Logf("transaction.version 2 on all three nodes %v after the upgrade answered", took)
	for _, id := range c.Brokers() {
		if !strings.Contains(c.LogTail(id, 400), "samsa.transaction.version has no effect at run time") {
			t.Errorf("node %d does not say that samsa.transaction.version no longer has an effect", id)
		}
	}
	if e := epochAfterTwo("feat-v2"); e < 2 {
		t.Fatalf("epoch %d after two transactions at transaction.version 2: not bumped per transaction", e)
	}

	code, out, errOut = runSamsa(t, "features", "--bootstrap-server", bs, "downgrade", "--release-version", "4.2")
	if code != 1 || !strings.Contains(out, "Could not downgrade metadata.version to 29. The update failed for all features since the following feature had an error: Unsupported metadata.version downgrade from 33 to 29. Refusing to perform the requested downgrade because it might delete metadata information.") ||
		!strings.Contains(errOut, "operation(s) failed.") {
		t.Fatalf("downgrade across 4.3-IV0: exit %d\n%s%s", code, out, errOut)
	}
	code, out, _ = runSamsa(t, "features", "--bootstrap-server", bs, "describe")
	if code != 0 || !strings.Contains(out, "Feature: transaction.version\tSupportedMinVersion: 0\tSupportedMaxVersion: 2\tFinalizedVersionLevel: 2\t") {
		t.Fatalf("describe after: %s", out)
	}
}
