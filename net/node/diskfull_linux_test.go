package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sys/unix"
)

// mountTmpfs mounts a tmpfs of size bytes on a new directory, unmounted at the end
// of the test; it skips the test, with the reason, where mounting is not permitted.
func mountTmpfs(t *testing.T, size int64) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tmpfs")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d", size)); err != nil {
		t.Skipf("mounting a %d-byte tmpfs for the log dir is not permitted here (needs root or CAP_SYS_ADMIN): %v", size, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// fill writes a file in dir until the file system is full, then gives back leave
// bytes (at least; tmpfs counts in pages).
func fill(t *testing.T, dir string, leave int64) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	var n int64
	for {
		w, err := f.Write(buf)
		n += int64(w)
		if errors.Is(err, unix.ENOSPC) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Truncate(max(n-leave, 0)); err != nil {
		t.Fatal(err)
	}
	return path
}

func usable(t *testing.T, dir string) int64 {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bavail) * st.Bsize
}

// TestFullDisk runs a node whose log dir is a small tmpfs: filled up, a produce is
// refused with KAFKA_STORAGE_ERROR (not a timeout), the node logs the cause once with
// the partition however many produces fail, and counts it in
// samsa_engine_storage_errors_total{kind="no_space"} and
// samsa_topic_failed_produce_requests_total; once space is freed the same
// node takes writes again and serves every acknowledged record; it restarts on the
// disk with little space left and serves them still.
func TestFullDisk(t *testing.T) {
	logDir := mountTmpfs(t, 8<<20)
	keys := map[string]string{
		"listeners": "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0", "data.dir": t.TempDir(), "log.dirs": logDir,
		"admin.listen": "127.0.0.1:0", "sync": "fsync", "offsets.topic.num.partitions": "1",
	}
	cfg, err := FromKeys(keys)
	if err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	start := func() *Node {
		t.Helper()
		nd, err := Start(cfg, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		if err != nil {
			t.Fatalf("start: %v\n%s", err, logs.String())
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := nd.Ready(ctx); err != nil {
			t.Fatalf("ready: %v\n%s", err, logs.String())
		}
		return nd
	}
	stop := func(nd *Node) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := nd.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	}
	nd := start()
	defer func() {
		if nd != nil {
			stop(nd)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const topic = "full"
	client := func(addr string) *kgo.Client {
		// No retries: the broker's answer is what the producer sees.
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic), kgo.AllowAutoTopicCreation(),
			kgo.RecordRetries(0), kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerLinger(0))
		if err != nil {
			t.Fatal(err)
		}
		return cl
	}
	cl := client(nd.Addr())
	defer func() { cl.Close() }()
	// The topic exists before the first produce: the Metadata request that auto-creates
	// a topic is answered LEADER_NOT_AVAILABLE for it (as Kafka's is), which a
	// producer without retries would take as its answer.
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	payload := []byte(strings.Repeat("x", 100<<10))
	acked := 0
	produce := func() error {
		err := cl.ProduceSync(ctx, &kgo.Record{Value: payload}).FirstErr()
		if err == nil {
			acked++
		}
		return err
	}
	if err := produce(); err != nil {
		t.Fatalf("first produce: %v\n%s", err, logs.String())
	}

	// Full: less room than one record.
	filler := fill(t, logDir, 32<<10)
	var refused int
	for range 5 {
		err := produce()
		if err == nil {
			continue // there was room for one more after all
		}
		if !errors.Is(err, kerr.KafkaStorageError) {
			t.Fatalf("a produce to a full disk: %v, want KAFKA_STORAGE_ERROR", err)
		}
		refused++
	}
	if refused < 3 {
		t.Fatalf("only %d of 5 produces refused on a full disk (%d bytes usable)", refused, usable(t, logDir))
	}
	failures := func() int {
		n := 0
		for _, l := range strings.Split(logs.String(), "\n") {
			if strings.Contains(l, "storage failure") && strings.Contains(l, `kind="no space"`) && strings.Contains(l, "where="+topic+"-0") {
				n++
			}
		}
		return n
	}
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "storage failure") {
			t.Logf("%d produces refused; the broker logged: %s", refused, l)
		}
	}
	if n := failures(); n != 1 {
		t.Errorf("%d produces refused, the failure logged %d times, want once:\n%s", refused, n, logs.String())
	}
	fams := scrape(t, nd.AdminAddr())
	if m, ok := series(fams, "samsa_engine_storage_errors_total", "kind", "no_space"); !ok || value(m) < float64(refused) {
		t.Errorf("samsa_engine_storage_errors_total{kind=no_space} = %v, want at least %d", m, refused)
	}
	if m, ok := series(fams, "samsa_topic_failed_produce_requests_total", "topic", topic, "error", "KAFKA_STORAGE_ERROR"); !ok || value(m) != float64(refused) {
		t.Errorf("samsa_topic_failed_produce_requests_total{topic=%s,error=KAFKA_STORAGE_ERROR} = %v, want %d", topic, m, refused)
	}
	if m, ok := series(fams, "samsa_log_dir_offline", "dir", logDir); !ok || value(m) != 0 {
		t.Errorf("samsa_log_dir_offline{dir=%s} = %v: a full directory stays online", logDir, m)
	}

	// Space freed: the same node takes writes again.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if err := produce(); err != nil {
		t.Fatalf("a produce after space was freed: %v", err)
	}
	consumeAll := func(addr string, want int) {
		t.Helper()
		c, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		got := 0
		for got < want {
			fs := c.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("read %d of %d acknowledged records: %v", got, want, ctx.Err())
			}
			fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("fetch: %v", err) })
			fs.EachRecord(func(r *kgo.Record) {
				if len(r.Value) != len(payload) {
					t.Fatalf("record %d: %d bytes, want %d", r.Offset, len(r.Value), len(payload))
				}
				if r.Offset != int64(got) {
					t.Fatalf("record at offset %d, want %d (an undone append left a hole or a duplicate)", r.Offset, got)
				}
				got++
			})
		}
	}
	consumeAll(nd.Addr(), acked)

	// A restart on a disk with little space left.
	cl.Close()
	stop(nd)
	nd = nil
	fill(t, logDir, 256<<10)
	nd = start()
	cl = client(nd.Addr())
	consumeAll(nd.Addr(), acked)
	if err := produce(); err != nil {
		t.Fatalf("a produce after the restart with %d bytes usable: %v", usable(t, logDir), err)
	}
	consumeAll(nd.Addr(), acked)
}
