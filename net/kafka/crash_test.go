package kafka

import (
	"bufio"
	"context"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// brokerProc is a `samsa serve` process.
type brokerProc struct {
	cmd  *exec.Cmd
	addr string
}

var listeningRE = regexp.MustCompile(`msg=listening addr=(\S+)`)

func startBrokerProc(t *testing.T, bin, dataDir string) *brokerProc {
	t.Helper()
	cmd := exec.Command(bin, "serve", "--data-dir", dataDir, "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0", "--sync", "fsync")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &brokerProc{cmd: cmd}
	t.Cleanup(func() { p.kill() })
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := listeningRE.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case addr <- m[1]:
				default:
				}
			}
		}
	}()
	select {
	case p.addr = <-addr:
	case <-time.After(30 * time.Second):
		t.Fatal("broker did not start listening")
	}
	return p
}

func (p *brokerProc) kill() {
	if p.cmd.ProcessState == nil {
		p.cmd.Process.Signal(syscall.SIGKILL)
		p.cmd.Wait()
	}
}

// TestSigkillKeepsAcknowledgedRecords kills the broker with SIGKILL while producers
// write with acks=all under the fsync policy, restarts it on the same data and
// consumes: every acknowledged record must be there.
func TestSigkillKeepsAcknowledgedRecords(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the broker binary")
	}
	bin := filepath.Join(t.TempDir(), "samsa")
	build := exec.Command("go", "build", "-o", bin, "github.com/samsa-broker/samsa/cmd/samsa")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		t.Fatalf("building samsa: %v", err)
	}
	dataDir := t.TempDir()
	p := startBrokerProc(t, bin, dataDir)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	admCl, err := kgo.NewClient(kgo.SeedBrokers(p.addr))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kadm.NewClient(admCl).CreateTopic(ctx, 3, 1, nil, "crash"); err != nil {
		t.Fatal(err)
	}
	admCl.Close()

	var mu sync.Mutex
	acked := map[int]bool{}
	prod, err := kgo.NewClient(kgo.SeedBrokers(p.addr), kgo.DefaultProduceTopic("crash"), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(time.Millisecond), kgo.RecordRetries(2), kgo.RecordDeliveryTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	produced := make(chan struct{})
	go func() {
		defer close(produced)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			prod.Produce(ctx, &kgo.Record{Value: []byte(strconv.Itoa(i))}, func(r *kgo.Record, err error) {
				if err == nil {
					mu.Lock()
					acked[i] = true
					mu.Unlock()
				}
			})
		}
	}()
	for deadline := time.Now().Add(30 * time.Second); ; {
		mu.Lock()
		n := len(acked)
		mu.Unlock()
		if n >= 5000 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d records acknowledged", n)
		}
		time.Sleep(5 * time.Millisecond) // polling the acknowledgement count
	}
	p.cmd.Process.Signal(syscall.SIGKILL)
	p.cmd.Wait()
	close(stop)
	<-produced
	prod.Close() // fails what is still buffered; no callback after this
	mu.Lock()
	final := maps.Clone(acked) // read below without the lock, should a callback still run
	want := len(final)
	mu.Unlock()

	p2 := startBrokerProc(t, bin, dataDir)
	cons, err := kgo.NewClient(kgo.SeedBrokers(p2.addr), kgo.ConsumeTopics("crash"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	// The HW of a log recovered after a crash reaches its LEO only once the flusher
	// has synced the recovered bytes, so the end offsets can grow for a moment after
	// the restart: consume until every acknowledged record is seen, or the deadline.
	// The consumer's own deadline, from the restart: the producing phase may have
	// used much of ctx's on a loaded machine.
	cctx, ccancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer ccancel()
	seen := map[int]bool{}
	missing := want
	for missing > 0 {
		fs := cons.PollFetches(cctx)
		if cctx.Err() != nil {
			break
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			v, _ := strconv.Atoi(string(r.Value))
			if seen[v] {
				t.Fatalf("record %d twice", v)
			}
			seen[v] = true
			if final[v] {
				missing--
			}
		})
	}
	if missing > 0 {
		t.Fatalf("%d of %d acknowledged records lost (%d records consumed)", missing, want, len(seen))
	}
	ends, err := kadm.NewClient(cons).ListEndOffsets(context.Background(), "crash")
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	ends.Each(func(o kadm.ListedOffset) { total += o.Offset })
	t.Logf("%d acknowledged, %d on disk after SIGKILL and restart", want, total)
}
