package bench

// The many-partitions measurement (samsa-bench partitions): what a broker costs per
// partition, idle and touched once, and how long it takes to create, describe, stop
// and recover them. One round, on a fresh data directory:
//
//	start broker ─ baseline (fds, RSS, goroutines, disk)
//	create topics (one CreateTopics per topic) ─ wait until Metadata shows every
//	    partition with a leader                              → create time
//	measure idle: fds, RSS, goroutines, disk (du)            → per partition
//	Metadata of every topic, N times                         → median time, size
//	CPU over the idle window                                 → % of a core
//	produce R records to every partition, read them back     → touch time
//	SIGTERM ─ exit                                           → shutdown time
//	start again ─ every partition led and a record produced  → restart time
//	    to each (clean restart, then the same after SIGKILL: recovery)
//
// Rounds repeat this; the report gives each figure's median and range.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ErrPartitions is the class of errors of the many-partitions measurement.
var ErrPartitions = errors.New("bench: partitions")

// PartitionsConfig configures RunPartitions.
type PartitionsConfig struct {
	SamsaBin  string   // the broker binary (required)
	SamsaArgs []string // extra flags for samsa serve
	WorkDir   string   // data directories go under it (default os.TempDir())
	// Topics and PartitionsPerTopic: the layout (e.g. 10 × 1,000 or 1 × 10,000).
	Topics, PartitionsPerTopic int
	Rounds                     int           // default 1
	Idle                       time.Duration // idle CPU window (default 30s)
	MetadataRequests           int           // full Metadata requests timed (default 20)
	RecordsPerPartition        int           // produced to and read back from each partition (default 1; 0 skips)
	RecordSize                 int           // bytes per record (default 1024)
	SkipRestart                bool          // skip the clean and unclean restarts
	Progress                   io.Writer     // a line per step, or nil
}

// PartitionsRound holds one round's figures. Durations are in seconds, sizes in bytes.
type PartitionsRound struct {
	Partitions int `json:"partitions"`

	CreateSeconds float64 `json:"create_s"` // CreateTopics sent until every partition has a leader

	FDs        int   `json:"fds"`        // open descriptors, idle, after create
	FDsBase    int   `json:"fds_base"`   // before create
	RSS        int64 `json:"rss"`        // VmRSS, idle, after create
	RSSBase    int64 `json:"rss_base"`   // before create
	Goroutines int   `json:"goroutines"` // go_goroutines from /metrics, after create (-1: unknown)
	GoroutBase int   `json:"goroutines_base"`
	HeapInuse  int64 `json:"heap_inuse"` // go_memstats_heap_inuse_bytes after create (-1: unknown)
	DiskUsed   int64 `json:"disk_used"`  // allocated blocks under the data dir (du)
	DiskBase   int64 `json:"disk_base"`
	DiskApp    int64 `json:"disk_apparent"` // apparent size (du --apparent-size)

	MetadataSeconds float64 `json:"metadata_s"`     // median time of a Metadata request for every topic
	MetadataBytes   int     `json:"metadata_bytes"` // its response, encoded

	IdleCPU float64 `json:"idle_cpu"` // fraction of one core over the idle window

	ProduceSeconds float64 `json:"produce_s"` // RecordsPerPartition to every partition, acks=all
	ConsumeSeconds float64 `json:"consume_s"` // all of them read back
	TouchRSS       int64   `json:"touch_rss"` // VmRSS after the produce and consume
	TouchFDs       int     `json:"touch_fds"`

	ShutdownSeconds  float64 `json:"shutdown_s"`    // SIGTERM until exit
	RestartSeconds   float64 `json:"restart_s"`     // start until every partition is led and took a record
	RecoverySeconds  float64 `json:"recovery_s"`    // the same after SIGKILL
	RestartListenSec float64 `json:"restart_api_s"` // start until ApiVersions answers (clean restart)
}

// PartitionsReport is RunPartitions' result.
type PartitionsReport struct {
	Machine Machine           `json:"machine"`
	Config  PartitionsConfig  `json:"-"`
	Layout  string            `json:"layout"`
	Rounds  []PartitionsRound `json:"rounds"`
	Median  PartitionsRound   `json:"median"`
}

type partBroker struct {
	bin   string
	args  []string
	data  string
	addr  string
	admin string
	cmd   *exec.Cmd
	done  chan struct{}
	logf  *os.File
}

func (b *partBroker) start(ctx context.Context) error {
	args := append([]string{"serve", "--listen", b.addr, "--admin-listen", b.admin, "--data-dir", b.data}, b.args...)
	cmd := exec.Command(b.bin, args...)
	cmd.Stdout, cmd.Stderr = b.logf, b.logf
	cmd.SysProcAttr = childAttr()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%w: start %s: %w", ErrPartitions, b.bin, err)
	}
	b.cmd, b.done = cmd, make(chan struct{})
	go func() { _ = cmd.Wait(); close(b.done) }()
	deadline := time.Now().Add(5 * time.Minute)
	for {
		if _, err := apiVersions(ctx, b.addr, time.Second); err == nil {
			return nil
		}
		select {
		case <-b.done:
			return fmt.Errorf("%w: broker exited at start; log tail:\n%s", ErrPartitions, logTail(b.logf.Name()))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: broker did not answer within 5m", ErrPartitions)
		}
	}
}

// stop signals the broker and waits for it to exit; it returns how long that took.
func (b *partBroker) stop(sig syscall.Signal) time.Duration {
	if b.cmd == nil {
		return 0
	}
	t0 := time.Now()
	_ = b.cmd.Process.Signal(sig)
	select {
	case <-b.done:
	case <-time.After(5 * time.Minute):
		_ = b.cmd.Process.Kill()
		<-b.done
	}
	b.cmd = nil
	return time.Since(t0)
}

func (b *partBroker) pid() int { return b.cmd.Process.Pid }

// RunPartitions runs the many-partitions measurement (see the file comment).
func RunPartitions(ctx context.Context, cfg PartitionsConfig) (*PartitionsReport, error) {
	if cfg.SamsaBin == "" || cfg.Topics <= 0 || cfg.PartitionsPerTopic <= 0 {
		return nil, fmt.Errorf("%w: need a broker binary and a layout", ErrPartitions)
	}
	bin, err := absBinary(cfg.SamsaBin)
	if err != nil {
		return nil, err
	}
	cfg.SamsaBin = bin
	if cfg.WorkDir == "" {
		cfg.WorkDir = os.TempDir()
	}
	if cfg.Rounds <= 0 {
		cfg.Rounds = 1
	}
	if cfg.Idle <= 0 {
		cfg.Idle = 30 * time.Second
	}
	if cfg.MetadataRequests <= 0 {
		cfg.MetadataRequests = 20
	}
	if cfg.RecordSize <= 0 {
		cfg.RecordSize = 1024
	}
	if cfg.RecordsPerPartition < 0 {
		cfg.RecordsPerPartition = 0
	}
	rep := &PartitionsReport{Machine: DescribeMachine(), Config: cfg,
		Layout: fmt.Sprintf("%d topics x %d partitions", cfg.Topics, cfg.PartitionsPerTopic)}
	for r := 0; r < cfg.Rounds; r++ {
		rd, err := partitionsRound(ctx, cfg, r)
		if err != nil {
			return rep, err
		}
		rep.Rounds = append(rep.Rounds, rd)
	}
	rep.Median = medianRound(rep.Rounds)
	return rep, nil
}

func (c *PartitionsConfig) progress(format string, a ...any) {
	if c.Progress != nil {
		fmt.Fprintf(c.Progress, format+"\n", a...)
	}
}

func partitionsRound(ctx context.Context, cfg PartitionsConfig, round int) (PartitionsRound, error) {
	var rd PartitionsRound
	rd.Partitions = cfg.Topics * cfg.PartitionsPerTopic
	tmp, err := os.MkdirTemp(cfg.WorkDir, "samsa-partitions-")
	if err != nil {
		return rd, fmt.Errorf("%w: %w", ErrPartitions, err)
	}
	defer os.RemoveAll(tmp)
	logf, err := os.Create(filepath.Join(tmp, "broker.log"))
	if err != nil {
		return rd, fmt.Errorf("%w: %w", ErrPartitions, err)
	}
	defer logf.Close()
	addr, err := freeAddr()
	if err != nil {
		return rd, err
	}
	admin, err := freeAddr()
	if err != nil {
		return rd, err
	}
	b := &partBroker{bin: cfg.SamsaBin, args: cfg.SamsaArgs, data: filepath.Join(tmp, "data"), addr: addr, admin: admin, logf: logf}
	if err := b.start(ctx); err != nil {
		return rd, err
	}
	defer b.stop(syscall.SIGKILL)
	cfg.progress("round %d: broker pid %d on %s, data in %s", round+1, b.pid(), addr, b.data)
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.MetadataMinAge(100*time.Millisecond), kgo.MetadataMaxAge(time.Second))
	if err != nil {
		return rd, fmt.Errorf("%w: %w", ErrPartitions, err)
	}
	defer cl.Close()
	ka := kadm.NewClient(cl)
	// Let the node finish starting (its controller registers the broker) before the
	// baseline is taken.
	if err := waitLeaders(ctx, ka, nil, 0, time.Minute); err != nil {
		return rd, err
	}
	rd.FDsBase, rd.RSSBase, rd.GoroutBase = countFDs(b.pid()), vmRSS(b.pid()), scrapeMetric(admin, "go_goroutines")
	rd.DiskBase, _ = diskUsage(b.data)

	topics, err := createPartitions(ctx, cfg, ka, logf.Name(), &rd)
	if err != nil {
		return rd, err
	}
	pid := b.pid()
	if err := measureIdle(ctx, cfg, cl, b, admin, &rd); err != nil {
		return rd, err
	}

	if cfg.RecordsPerPartition > 0 {
		parts := allPartitions(topics, cfg.PartitionsPerTopic)
		if rd.ProduceSeconds, err = produceAll(ctx, addr, parts, cfg.RecordsPerPartition, cfg.RecordSize); err != nil {
			return rd, err
		}
		if rd.ConsumeSeconds, err = consumeAll(ctx, addr, topics, cfg.PartitionsPerTopic, cfg.RecordsPerPartition); err != nil {
			return rd, err
		}
		rd.TouchRSS, rd.TouchFDs = vmRSS(pid), countFDs(pid)
		cfg.progress("  produce %d x %d records: %.2fs, consume: %.2fs; RSS %s, %d fds", len(parts), cfg.RecordsPerPartition,
			rd.ProduceSeconds, rd.ConsumeSeconds, mib(rd.TouchRSS), rd.TouchFDs)
	}
	cl.Close()

	if cfg.SkipRestart {
		return rd, nil
	}
	err = measureRestarts(ctx, cfg, b, topics, &rd)
	return rd, err
}

// createPartitions creates the round's topics and waits for every partition's
// leader, timing both; it returns the topics' names. logName is the broker's log,
// whose tail a failed creation shows.
func createPartitions(ctx context.Context, cfg PartitionsConfig, ka *kadm.Client, logName string, rd *PartitionsRound) ([]string, error) {
	topics := make([]string, cfg.Topics)
	for i := range topics {
		topics[i] = fmt.Sprintf("p%d-%d", cfg.PartitionsPerTopic, i)
	}
	t0 := time.Now()
	for _, t := range topics {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		resp, err := ka.CreateTopics(cctx, int32(cfg.PartitionsPerTopic), 1, nil, t)
		cancel()
		if err == nil {
			err = resp.Error()
		}
		if err != nil {
			return nil, fmt.Errorf("%w: create %s: %w; log tail:\n%s", ErrPartitions, t, err, logTail(logName))
		}
	}
	if err := waitLeaders(ctx, ka, topics, cfg.PartitionsPerTopic, 5*time.Minute); err != nil {
		return nil, err
	}
	rd.CreateSeconds = time.Since(t0).Seconds()
	cfg.progress("  created %d partitions in %.2fs", rd.Partitions, rd.CreateSeconds)
	return topics, nil
}

// measureIdle measures the broker at rest with its partitions: file descriptors,
// RSS, goroutines, heap and disk once settled, the time and size of a Metadata
// answer for every partition, and CPU over cfg.Idle.
func measureIdle(ctx context.Context, cfg PartitionsConfig, cl *kgo.Client, b *partBroker, admin string, rd *PartitionsRound) error {
	settle(ctx, 3*time.Second)
	pid := b.pid()
	rd.FDs, rd.RSS = countFDs(pid), vmRSS(pid)
	rd.Goroutines = scrapeMetric(admin, "go_goroutines")
	rd.HeapInuse = int64(scrapeMetric(admin, "go_memstats_heap_inuse_bytes"))
	rd.DiskUsed, rd.DiskApp = diskUsage(b.data)
	cfg.progress("  idle: %d fds, RSS %s, %d goroutines, disk %s", rd.FDs, mib(rd.RSS), rd.Goroutines, mib(rd.DiskUsed))

	var err error
	rd.MetadataSeconds, rd.MetadataBytes, err = timeMetadata(ctx, cl, cfg.MetadataRequests)
	if err != nil {
		return err
	}
	cfg.progress("  metadata: %s, median %.1f ms", mib(int64(rd.MetadataBytes)), rd.MetadataSeconds*1e3)

	settle(ctx, 2*time.Second)
	c0, err := procUsage(pid)
	if err != nil {
		return err
	}
	w0 := time.Now()
	settle(ctx, cfg.Idle)
	c1, err := procUsage(pid)
	if err != nil {
		return err
	}
	rd.IdleCPU = (c1.CPUSeconds - c0.CPUSeconds) / time.Since(w0).Seconds()
	cfg.progress("  idle CPU over %v: %.2f%% of a core", cfg.Idle, rd.IdleCPU*100)
	return nil
}

// measureRestarts times a clean shutdown (SIGTERM), the restart after it until
// every partition is writable, and the restart after a SIGKILL (recovery).
func measureRestarts(ctx context.Context, cfg PartitionsConfig, b *partBroker, topics []string, rd *PartitionsRound) error {
	parts := allPartitions(topics, cfg.PartitionsPerTopic)
	rd.ShutdownSeconds = b.stop(syscall.SIGTERM).Seconds()
	cfg.progress("  shutdown (SIGTERM): %.2fs", rd.ShutdownSeconds)
	var err error
	if rd.RestartSeconds, rd.RestartListenSec, err = restartReady(ctx, b, topics, cfg.PartitionsPerTopic, parts); err != nil {
		return err
	}
	cfg.progress("  clean restart: answers in %.2fs, every partition writable in %.2fs", rd.RestartListenSec, rd.RestartSeconds)
	b.stop(syscall.SIGKILL)
	if rd.RecoverySeconds, _, err = restartReady(ctx, b, topics, cfg.PartitionsPerTopic, parts); err != nil {
		return err
	}
	cfg.progress("  restart after SIGKILL: every partition writable in %.2fs", rd.RecoverySeconds)
	return nil
}

// restartReady starts b and returns the time until every partition is led and took a
// record, and until ApiVersions answered.
func restartReady(ctx context.Context, b *partBroker, topics []string, per int, parts []kgo.Record) (ready, api float64, err error) {
	t0 := time.Now()
	if err := b.start(ctx); err != nil {
		return 0, 0, err
	}
	api = time.Since(t0).Seconds()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.addr), kgo.MetadataMinAge(100*time.Millisecond), kgo.MetadataMaxAge(time.Second))
	if err != nil {
		return 0, 0, fmt.Errorf("%w: %w", ErrPartitions, err)
	}
	defer cl.Close()
	if err := waitLeaders(ctx, kadm.NewClient(cl), topics, per, 5*time.Minute); err != nil {
		return 0, 0, err
	}
	if _, err := produceAll(ctx, b.addr, parts, 1, 16); err != nil {
		return 0, 0, err
	}
	return time.Since(t0).Seconds(), api, nil
}

// waitLeaders polls Metadata until every partition of topics has a leader (with no
// topics: until the broker answers Metadata with itself in it).
func waitLeaders(ctx context.Context, ka *kadm.Client, topics []string, per int, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	var last error
	for {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		md, err := ka.Metadata(cctx, topics...)
		cancel()
		if err == nil && len(md.Brokers) > 0 && (len(topics) == 0 || topicsReady(md.Topics, topics, per)) {
			return nil
		}
		last = err
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: partitions not led after %v (last error %v)", ErrPartitions, limit, last)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func allPartitions(topics []string, per int) []kgo.Record {
	out := make([]kgo.Record, 0, len(topics)*per)
	for _, t := range topics {
		for p := 0; p < per; p++ {
			out = append(out, kgo.Record{Topic: t, Partition: int32(p)})
		}
	}
	return out
}

// produceAll writes n records of size bytes to every partition (acks=all, the records
// of one partition in one batch where they fit) and returns the time it took.
func produceAll(ctx context.Context, addr string, parts []kgo.Record, n, size int) (float64, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(5*time.Millisecond), kgo.MaxBufferedRecords(len(parts)*n+1),
		kgo.RecordRetries(20), kgo.RecordDeliveryTimeout(5*time.Minute), kgo.MetadataMinAge(100*time.Millisecond), kgo.MetadataMaxAge(time.Second))
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrPartitions, err)
	}
	defer cl.Close()
	val := make([]byte, size)
	for i := range val {
		val[i] = byte('a' + i%26)
	}
	var wg sync.WaitGroup
	var first atomic.Pointer[error]
	t0 := time.Now()
	for i := 0; i < n; i++ {
		for j := range parts {
			r := &kgo.Record{Topic: parts[j].Topic, Partition: parts[j].Partition, Value: val}
			wg.Add(1)
			cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
				if err != nil {
					first.CompareAndSwap(nil, &err)
				}
				wg.Done()
			})
		}
	}
	wg.Wait()
	if e := first.Load(); e != nil {
		return 0, fmt.Errorf("%w: produce: %w", ErrPartitions, *e)
	}
	return time.Since(t0).Seconds(), nil
}

// consumeAll reads every partition from its start until n records of each came back.
func consumeAll(ctx context.Context, addr string, topics []string, per, n int) (float64, error) {
	want := len(topics) * per * n
	offs := map[string]map[int32]kgo.Offset{}
	for _, t := range topics {
		offs[t] = map[int32]kgo.Offset{}
		for p := 0; p < per; p++ {
			offs[t][int32(p)] = kgo.NewOffset().AtStart()
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumePartitions(offs), kgo.FetchMaxWait(100*time.Millisecond),
		kgo.FetchMaxBytes(64<<20), kgo.FetchMaxPartitionBytes(1<<20))
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrPartitions, err)
	}
	defer cl.Close()
	t0 := time.Now()
	cctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	got := 0
	for got < want {
		fs := cl.PollFetches(cctx)
		if err := cctx.Err(); err != nil {
			return 0, fmt.Errorf("%w: consumed %d of %d records: %w", ErrPartitions, got, want, err)
		}
		var ferr error
		fs.EachError(func(t string, p int32, err error) { ferr = fmt.Errorf("%s-%d: %w", t, p, err) })
		if ferr != nil {
			return 0, fmt.Errorf("%w: fetch: %w", ErrPartitions, ferr)
		}
		got += fs.NumRecords()
	}
	return time.Since(t0).Seconds(), nil
}

// timeMetadata sends n Metadata requests for every topic and returns the median time
// and the encoded size of the answer.
func timeMetadata(ctx context.Context, cl *kgo.Client, n int) (float64, int, error) {
	var ds []float64
	size := 0
	for i := 0; i < n; i++ {
		req := kmsg.NewPtrMetadataRequest() // Topics nil: every topic
		t0 := time.Now()
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return 0, 0, fmt.Errorf("%w: metadata: %w", ErrPartitions, err)
		}
		ds = append(ds, time.Since(t0).Seconds())
		size = len(resp.AppendTo(nil))
	}
	return medianF(ds), size, nil
}

func settle(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

func countFDs(pid int) int {
	es, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return -1
	}
	return len(es)
}

func vmRSS(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			if f := strings.Fields(v); len(f) > 0 {
				kb, _ := strconv.ParseInt(f[0], 10, 64)
				return kb << 10
			}
		}
	}
	return -1
}

// scrapeMetric reads one unlabelled gauge from the admin listener's /metrics (-1 if
// absent).
func scrapeMetric(admin, name string) int {
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get("http://" + admin + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err == nil {
				return int(f)
			}
		}
	}
	return -1
}

// diskUsage returns the allocated bytes (st_blocks × 512, as du counts them) and the
// apparent size of everything under dir, directories included.
func diskUsage(dir string) (used, apparent int64) {
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return nil
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			used += st.Blocks * 512
		}
		apparent += fi.Size()
		return nil
	})
	return used, apparent
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

func medianF(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// medianRound takes each figure's median over the rounds.
func medianRound(rs []PartitionsRound) PartitionsRound {
	if len(rs) == 0 {
		return PartitionsRound{}
	}
	f := func(get func(PartitionsRound) float64) float64 {
		xs := make([]float64, len(rs))
		for i, r := range rs {
			xs[i] = get(r)
		}
		return medianF(xs)
	}
	i := func(get func(PartitionsRound) float64) int64 { return int64(f(get)) }
	return PartitionsRound{
		Partitions:       rs[0].Partitions,
		CreateSeconds:    f(func(r PartitionsRound) float64 { return r.CreateSeconds }),
		FDs:              int(i(func(r PartitionsRound) float64 { return float64(r.FDs) })),
		FDsBase:          int(i(func(r PartitionsRound) float64 { return float64(r.FDsBase) })),
		RSS:              i(func(r PartitionsRound) float64 { return float64(r.RSS) }),
		RSSBase:          i(func(r PartitionsRound) float64 { return float64(r.RSSBase) }),
		Goroutines:       int(i(func(r PartitionsRound) float64 { return float64(r.Goroutines) })),
		GoroutBase:       int(i(func(r PartitionsRound) float64 { return float64(r.GoroutBase) })),
		HeapInuse:        i(func(r PartitionsRound) float64 { return float64(r.HeapInuse) }),
		DiskUsed:         i(func(r PartitionsRound) float64 { return float64(r.DiskUsed) }),
		DiskBase:         i(func(r PartitionsRound) float64 { return float64(r.DiskBase) }),
		DiskApp:          i(func(r PartitionsRound) float64 { return float64(r.DiskApp) }),
		MetadataSeconds:  f(func(r PartitionsRound) float64 { return r.MetadataSeconds }),
		MetadataBytes:    int(i(func(r PartitionsRound) float64 { return float64(r.MetadataBytes) })),
		IdleCPU:          f(func(r PartitionsRound) float64 { return r.IdleCPU }),
		ProduceSeconds:   f(func(r PartitionsRound) float64 { return r.ProduceSeconds }),
		ConsumeSeconds:   f(func(r PartitionsRound) float64 { return r.ConsumeSeconds }),
		TouchRSS:         i(func(r PartitionsRound) float64 { return float64(r.TouchRSS) }),
		TouchFDs:         int(i(func(r PartitionsRound) float64 { return float64(r.TouchFDs) })),
		ShutdownSeconds:  f(func(r PartitionsRound) float64 { return r.ShutdownSeconds }),
		RestartSeconds:   f(func(r PartitionsRound) float64 { return r.RestartSeconds }),
		RecoverySeconds:  f(func(r PartitionsRound) float64 { return r.RecoverySeconds }),
		RestartListenSec: f(func(r PartitionsRound) float64 { return r.RestartListenSec }),
	}
}

// WriteTable prints the report as a table: one row per figure, the median and the
// range over the rounds.
func (r *PartitionsReport) WriteTable(w io.Writer) {
	fmt.Fprintf(w, "%s (%d partitions), %d round(s); median [min … max]\n", r.Layout, r.Median.Partitions, len(r.Rounds))
	n := float64(max(r.Median.Partitions, 1))
	row := func(name string, get func(PartitionsRound) float64, format string) {
		xs := make([]float64, len(r.Rounds))
		for i, rd := range r.Rounds {
			xs[i] = get(rd)
		}
		fmt.Fprintf(w, "  %-34s "+format+"  ["+format+" … "+format+"]\n", name, medianF(xs), slices.Min(xs), slices.Max(xs))
	}
	row("create (s)", func(x PartitionsRound) float64 { return x.CreateSeconds }, "%.2f")
	row("open fds", func(x PartitionsRound) float64 { return float64(x.FDs) }, "%.0f")
	row("fds per partition", func(x PartitionsRound) float64 { return float64(x.FDs-x.FDsBase) / n }, "%.2f")
	row("RSS (MiB)", func(x PartitionsRound) float64 { return float64(x.RSS) / (1 << 20) }, "%.1f")
	row("RSS per partition (KiB)", func(x PartitionsRound) float64 { return float64(x.RSS-x.RSSBase) / n / 1024 }, "%.1f")
	row("heap in use (MiB)", func(x PartitionsRound) float64 { return float64(x.HeapInuse) / (1 << 20) }, "%.1f")
	row("goroutines", func(x PartitionsRound) float64 { return float64(x.Goroutines) }, "%.0f")
	row("disk per partition (KiB, du)", func(x PartitionsRound) float64 { return float64(x.DiskUsed-x.DiskBase) / n / 1024 }, "%.1f")
	row("disk apparent (MiB)", func(x PartitionsRound) float64 { return float64(x.DiskApp) / (1 << 20) }, "%.1f")
	row("Metadata, all topics (ms)", func(x PartitionsRound) float64 { return x.MetadataSeconds * 1e3 }, "%.1f")
	row("Metadata response (KiB)", func(x PartitionsRound) float64 { return float64(x.MetadataBytes) / 1024 }, "%.0f")
	row("idle CPU (% of a core)", func(x PartitionsRound) float64 { return x.IdleCPU * 100 }, "%.2f")
	if r.Config.RecordsPerPartition > 0 {
		row("produce to every partition (s)", func(x PartitionsRound) float64 { return x.ProduceSeconds }, "%.2f")
		row("consume every partition (s)", func(x PartitionsRound) float64 { return x.ConsumeSeconds }, "%.2f")
		row("RSS after touching all (MiB)", func(x PartitionsRound) float64 { return float64(x.TouchRSS) / (1 << 20) }, "%.1f")
		row("fds after touching all", func(x PartitionsRound) float64 { return float64(x.TouchFDs) }, "%.0f")
	}
	if !r.Config.SkipRestart {
		row("shutdown, SIGTERM (s)", func(x PartitionsRound) float64 { return x.ShutdownSeconds }, "%.2f")
		row("restart: ApiVersions (s)", func(x PartitionsRound) float64 { return x.RestartListenSec }, "%.2f")
		row("restart: all writable (s)", func(x PartitionsRound) float64 { return x.RestartSeconds }, "%.2f")
		row("after SIGKILL: all writable (s)", func(x PartitionsRound) float64 { return x.RecoverySeconds }, "%.2f")
	}
}

// WriteJSON writes the report as JSON.
func (r *PartitionsReport) WriteJSON(w io.Writer) error {
	e := json.NewEncoder(w)
	e.SetIndent("", "  ")
	return e.Encode(r)
}
