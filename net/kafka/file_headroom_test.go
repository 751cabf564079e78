package kafka

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// fileHeadroomChild is set in the environment of the re-executed test binary that
// lowers its own open file limit (TestFileHeadroomChild).
const fileHeadroomChild = "SAMSA_KAFKA_FILEHEADROOM_CHILD"

// TestFileHeadroomChild runs in a child process with RLIMIT_NOFILE at 1024: a topic
// whose partitions fit is created; one of 1,000 partitions, and growing the first to
// 1,000, fail with POLICY_VIOLATION and a message naming the limit, over a real client.
func TestFileHeadroomChild(t *testing.T) {
	if os.Getenv(fileHeadroomChild) == "" {
		t.Skip("the child of TestCreateTopicsRefusedOverFileLimit")
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: 1024, Max: 1024}); err != nil {
		t.Fatal(err)
	}
	tb := startTestBroker(t)
	adm := tb.admin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := adm.CreateTopic(ctx, 50, 1, nil, "fits")
	if err != nil || resp.Err != nil {
		t.Fatalf("50 partitions under a limit of 1024: %v %v", err, resp.Err)
	}
	rs, err := adm.CreateTopics(ctx, 1000, 1, nil, "too-many")
	if err != nil {
		t.Fatal(err)
	}
	resp = rs["too-many"]
	if !errors.Is(resp.Err, kerr.PolicyViolation) || !strings.Contains(resp.ErrMessage, "ulimit -n") || !strings.Contains(resp.ErrMessage, "1024") {
		t.Fatalf("1,000 partitions under a limit of 1024: %v %q, want POLICY_VIOLATION naming the limit", resp.Err, resp.ErrMessage)
	}
	if _, ok := tb.image().Topic("too-many"); ok {
		t.Fatal("the refused topic was created")
	}
	cr, err := adm.UpdatePartitions(ctx, 1000, "fits")
	if err != nil {
		t.Fatal(err)
	}
	if r := cr["fits"]; !errors.Is(r.Err, kerr.PolicyViolation) {
		t.Fatalf("growing to 1,000 partitions: %v, want POLICY_VIOLATION", r.Err)
	}
	if ti, _ := tb.image().Topic("fits"); len(ti.Partitions) != 50 {
		t.Fatalf("fits has %d partitions, want 50", len(ti.Partitions))
	}
}

func TestCreateTopicsRefusedOverFileLimit(t *testing.T) {
	if os.Getenv(fileHeadroomChild) != "" {
		t.Skip("in the child")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestFileHeadroomChild$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), fileHeadroomChild+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("--- PASS: TestFileHeadroomChild")) {
		t.Fatalf("child: %v\n%s", err, out)
	}
}
