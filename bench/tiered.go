package bench

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/internal/versitygw"
)

// The tiered catch-up (workload tiered-catchup, issue 34): how fast a consumer far
// behind reads a backlog that lives in remote storage (KIP-405), beside how fast it
// reads the same records from the local log, in one run, with the raw loader:
//
//  1. the topic is created with remote.storage.enable but without the workload's
//     local.retention.bytes (Kafka's -2: the whole log stays local);
//  2. fill: the raw producers write the backlog (consumerBacklogSizeGB), no fetcher;
//  3. copies: wait until the remote log manager has copied every sealed segment:
//     ListOffsets -5 (latest tiered, KIP-1005) at 0 or more on every partition, -6
//     (earliest pending upload, KIP-1023) within a segment of the end (segment.bytes
//     over messageSize), and both unchanged for two task intervals (settleTime);
//  4. local drain: every partition from offset 0 to its end, from the local log;
//  5. local retention: the workload's local.retention.bytes set (IncrementalAlterConfigs),
//     then wait until -4 (earliest local) is above 0 on every partition, within
//     local.retention.bytes and two segments of the end, and unchanged for two
//     retention checks: the local log now starts past what was copied;
//  6. remote read, the measured window (broker and loader CPU, --profile): every
//     partition from offset 0 to its earliest local offset, all of it from remote
//     storage;
//  7. the local tail, from the earliest local offset to the end: every record of the
//     backlog has then been read once more;
//  8. with the workload's readBack (tiered-readback), whose fill numbers every
//     record and keeps what was acknowledged: the backlog from offset 0 to the end
//     through a franz-go consumer, then kcat, each record checked against the one
//     acknowledged at its offset (readback.go), and a verdict, PASS or FAIL, for each.
//
// Both reads are the backlog drain's fetcher (one connection per leader, one Fetch
// in flight, 8 MiB a partition, records counted from batch headers), over the same
// records on the same machine; the remote read's rate over the local drain's is its
// share. Each phase waits at most the workload's duration.
const tieredPoll = 250 * time.Millisecond

// settleTime is how long a tiered catch-up's offsets must stay still to be settled:
// two of the broker's task intervals (the workload's key, in ms), at least a second,
// and 5 s when the workload does not set it.
func settleTime(w *Workload, key string) time.Duration {
	ms, err := strconv.ParseInt(w.BrokerConfigs[key], 10, 64)
	if err != nil || ms <= 0 {
		return 5 * time.Second
	}
	return max(time.Second, 2*time.Duration(ms)*time.Millisecond)
}

// TieredFigures are a tiered catch-up's figures (Result.Tiered).
type TieredFigures struct {
	Records     int64        `json:"records"`     // the backlog
	CopyWaitSec float64      `json:"copy_wait_s"` // from the end of the fill to the copies done
	Local       DrainFigures `json:"local_drain"` // offset 0 to the end, from the local log
	Remote      DrainFigures `json:"remote_read"` // offset 0 to the earliest local offset
	Tail        DrainFigures `json:"local_tail"`  // the earliest local offset to the end
	// RemoteShare is the remote read's rate over the local drain's (records a second).
	RemoteShare float64 `json:"remote_share"`
	// ObjectStoreCPUs is the object store's CPU seconds over the remote read, when it
	// is a local process samsa-bench started (-1: not measured).
	ObjectStoreCPUs float64 `json:"object_store_cpu_s"`
	// ReadBack is the backlog read from offset 0 through franz-go, then kcat, each
	// checked against every acknowledged record (workload readBack: readback.go).
	ReadBack []ReadBackFigures `json:"read_back,omitempty"`
}

// ReadBackPassed says every read-back there was passed (true with none).
func (f *TieredFigures) ReadBackPassed() bool {
	for _, rb := range f.ReadBack {
		if !rb.Pass {
			return false
		}
	}
	return true
}

// DrainFigures are one read of a tiered catch-up.
type DrainFigures struct {
	Records int64   `json:"records"`
	Bytes   int64   `json:"bytes"` // of values, as the other rates
	Sec     float64 `json:"s"`
	Rate    float64 `json:"msgs"`
	MBps    float64 `json:"mbps"`
	// BrokerCPUUsPerMsg is the broker's CPU per record read, when measured.
	BrokerCPUUsPerMsg float64 `json:"broker_cpu_us_per_msg,omitempty"`
	Errors            int64   `json:"errors,omitempty"`
}

// tieredRun is a tiered catch-up under way.
type tieredRun struct {
	r     *rawRun
	res   *Result
	fig   *TieredFigures
	parts []int32          // every partition of the topic
	fver  map[string]int16 // each leader's Fetch version
}

// runTieredCatchup runs a tiered catch-up (RunRaw on a Workload.TieredCatchup).
func runTieredCatchup(ctx context.Context, cfg RawConfig) (*Result, error) {
	w := cfg.Workload
	wc := *w
	wc.TopicConfigs = maps.Clone(w.TopicConfigs)
	delete(wc.TopicConfigs, "local.retention.bytes") // set once the local drain is done
	t, err := openRawTopic(ctx, cfg.Brokers, &wc)
	if err != nil {
		return nil, err
	}
	defer t.close()
	cfg.NoConsume = true // the fetchers are the phases' own
	r := newRawRun(ctx, cfg, t)
	defer r.stop()
	if w.ReadBack {
		r.ledger = newAckLedger()
	}
	if err := r.startClients(ctx); err != nil {
		return nil, err
	}
	tc := &tieredRun{r: r, fig: &TieredFigures{ObjectStoreCPUs: -1}, fver: map[string]int16{},
		res: &Result{Target: cfg.Target, Workload: w.Name, Mode: "raw", Started: time.Now().UTC(), Notes: r.notes}}
	tc.res.Tiered = tc.fig
	for addr, parts := range t.byLeader {
		tc.parts = append(tc.parts, parts...)
		if _, tc.fver[addr], err = rawVersions(ctx, addr); err != nil {
			return nil, err
		}
	}
	sort.Slice(tc.parts, func(i, j int) bool { return tc.parts[i] < tc.parts[j] })
	if err := tc.run(ctx, w.TopicConfigs["local.retention.bytes"]); err != nil {
		return nil, fmt.Errorf("%w: tiered catch-up: %w", ErrRun, err)
	}
	return tc.res, nil
}

// run goes through the phases after the producers started.
func (tc *tieredRun) run(ctx context.Context, localRetention string) error {
	r, fig, res := tc.r, tc.fig, tc.res
	if err := tc.fill(ctx); err != nil {
		return err
	}
	end, n, err := rawEndOffsets(ctx, r.topic.ka, r.topic.name, r.prod.records.Load())
	if err != nil {
		return err
	}
	fig.Records, res.Acked = n, n
	w := r.w
	segRecords := int64(-1) // a bound on the records of a partition's active segment, or -1
	if sb, err := strconv.ParseInt(w.TopicConfigs["segment.bytes"], 10, 64); err == nil && sb > 0 {
		segRecords = sb/int64(w.MessageSize) + 1
	}
	t0 := time.Now()
	tiered, err := tc.settle(ctx, "copies", settleTime(w, "remote.log.manager.task.interval.ms"), func(o [2]map[int32]int64) bool {
		for _, p := range tc.parts {
			// copied, and (with segment.bytes) nothing left but the active segment
			if o[0][p] < 0 || segRecords >= 0 && end[p]-o[1][p] > segRecords {
				return false
			}
		}
		return true
	}, -5, -6)
	if err != nil {
		return err
	}
	fig.CopyWaitSec = time.Since(t0).Seconds()
	res.Notes = append(res.Notes, fmt.Sprintf("copies done %.1fs after the fill: %d of %d records copied to remote storage (ListOffsets -5 latest tiered + 1, summed)",
		fig.CopyWaitSec, sumPlusOne(tiered[0]), n))
	if fig.Local, err = tc.drain(ctx, "local", nil, end, false); err != nil {
		return err
	}
	if err := tc.setLocalRetention(ctx, localRetention); err != nil {
		return err
	}
	keep := int64(-1) // a bound on the records local retention keeps, or -1
	if lr, err := strconv.ParseInt(localRetention, 10, 64); err == nil && segRecords >= 0 {
		keep = lr/int64(w.MessageSize) + 2*segRecords
	}
	starts, err := tc.settle(ctx, "local retention", settleTime(w, "log.retention.check.interval.ms"), func(o [2]map[int32]int64) bool {
		for _, p := range tc.parts {
			if o[0][p] <= 0 || keep >= 0 && end[p]-o[0][p] > keep {
				return false
			}
		}
		return true
	}, -4)
	if err != nil {
		return err
	}
	localStart := starts[0]
	if fig.Remote, err = tc.drain(ctx, "remote", nil, localStart, true); err != nil {
		return err
	}
	if fig.Tail, err = tc.drain(ctx, "tail", localStart, end, false); err != nil {
		return err
	}
	res.Consumed = fig.Remote.Records + fig.Tail.Records
	res.CaughtUp = res.Consumed == n && fig.Local.Records == n
	res.Errors = fig.Local.Errors + fig.Remote.Errors + fig.Tail.Errors
	if fig.Local.Rate > 0 {
		fig.RemoteShare = fig.Remote.Rate / fig.Local.Rate
	}
	res.Notes = append(res.Notes, tc.summary(localStart, n)...)
	if w.ReadBack {
		if err := tc.readBack(ctx, end, localStart); err != nil {
			return err
		}
	}
	if res.Loader != nil {
		res.Notes = append(res.Notes, saturationNotes(res, runtime.NumCPU(), runtime.GOMAXPROCS(0))...)
	}
	return nil
}

// summary is the notes that give the run's figures.
func (tc *tieredRun) summary(localStart map[int32]int64, n int64) []string {
	fig, res := tc.fig, tc.res
	notes := []string{
		fmt.Sprintf("local drain: %d records from offset 0 to the end in %.2fs: %.0f msg/s, %.1f MB/s", fig.Local.Records, fig.Local.Sec, fig.Local.Rate, fig.Local.MBps),
		fmt.Sprintf("remote read: %d records (%.1f%% of the backlog) below the earliest local offsets %v in %.2fs: %.0f msg/s, %.1f MB/s: %.1f%% of the local drain's rate",
			fig.Remote.Records, 100*float64(fig.Remote.Records)/float64(max(n, 1)), localStart, fig.Remote.Sec, fig.Remote.Rate, fig.Remote.MBps, 100*fig.RemoteShare),
		fmt.Sprintf("local tail: %d records from the earliest local offsets to the end in %.2fs", fig.Tail.Records, fig.Tail.Sec),
	}
	if fig.Local.BrokerCPUUsPerMsg > 0 {
		notes = append(notes, fmt.Sprintf("broker CPU per record read: local drain %.3f µs, remote read %.3f µs", fig.Local.BrokerCPUUsPerMsg, fig.Remote.BrokerCPUUsPerMsg))
	}
	if fig.ObjectStoreCPUs >= 0 && fig.Remote.Sec > 0 {
		notes = append(notes, fmt.Sprintf("object store CPU over the remote read: %.2f s (%.2f cores, %.3f µs per record)",
			fig.ObjectStoreCPUs, fig.ObjectStoreCPUs/fig.Remote.Sec, fig.ObjectStoreCPUs*1e6/float64(max(fig.Remote.Records, 1))))
	}
	if !res.CaughtUp {
		notes = append(notes, fmt.Sprintf("NOT every record read: local drain %d, remote read + local tail %d, of %d", fig.Local.Records, res.Consumed, n))
	}
	return notes
}

func sumPlusOne(m map[int32]int64) int64 {
	var s int64
	for _, v := range m {
		s += v + 1
	}
	return s
}

// fill waits for the producers to write the backlog (at most the workload's
// duration: then they stop, and what is there is the backlog).
func (tc *tieredRun) fill(ctx context.Context) error {
	r := tc.r
	done := make(chan struct{})
	go func() { r.prodWG.Wait(); close(done) }()
	start := time.Now()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	stopped := false
	var last int64
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-r.errc:
			return err
		case <-done:
			secs := time.Since(start).Seconds()
			tc.res.PubRate, tc.res.PubMBps = float64(r.prod.records.Load())/secs, float64(r.prod.bytes.Load())/secs/1e6
			tc.res.Notes = append(tc.res.Notes, fmt.Sprintf("backlog filled: %d records, %.2f GiB of values in %.1fs (%.0f MB/s), the whole log local",
				r.prod.records.Load(), float64(r.prod.bytes.Load())/(1<<30), secs, tc.res.PubMBps))
			return nil
		case now := <-tick.C:
			cur := r.prod.bytes.Load()
			tc.say("%4.0fs fill    produce %7.1f MB/s, %.2f GiB", now.Sub(start).Seconds(), float64(cur-last)/1e6, float64(cur)/(1<<30))
			last = cur
			if !stopped && now.Sub(start) > r.cfg.Duration {
				stopped = true
				close(r.stopProd)
			}
		}
	}
}

// say prints a progress line.
func (tc *tieredRun) say(format string, args ...any) {
	if p := tc.r.cfg.Progress; p != nil {
		fmt.Fprintf(p, "[%s %s RAW] "+format+"\n", append([]any{tc.r.cfg.Target, tc.r.w.Name}, args...)...)
	}
}

// settle polls the offsets of the special timestamps ts (ListOffsets) until ok holds
// for them and none has changed for quiet; it returns them (at most the workload's
// duration).
func (tc *tieredRun) settle(ctx context.Context, what string, quiet time.Duration, ok func([2]map[int32]int64) bool, ts ...int64) ([2]map[int32]int64, error) {
	var last [2]map[int32]int64
	start := time.Now()
	since, said := start, start
	for {
		var cur [2]map[int32]int64
		for i, t := range ts {
			o, err := tc.listOffsets(ctx, t)
			if err != nil {
				return cur, fmt.Errorf("%s: ListOffsets %d: %w", what, t, err)
			}
			cur[i] = o
		}
		now := time.Now()
		if !maps.Equal(cur[0], last[0]) || !maps.Equal(cur[1], last[1]) {
			last, since = cur, now
		} else if now.Sub(since) >= quiet && ok(cur) {
			return cur, nil
		}
		if now.Sub(said) >= time.Second {
			said = now
			tc.say("%4.0fs %s: ListOffsets %v: %v %v", now.Sub(start).Seconds(), what, ts, cur[0], cur[1])
		}
		if now.Sub(start) > tc.r.cfg.Duration {
			return cur, fmt.Errorf("%s not settled after %v: ListOffsets %v: %v %v", what, tc.r.cfg.Duration, ts, cur[0], cur[1])
		}
		select {
		case <-ctx.Done():
			return cur, ctx.Err()
		case <-time.After(tieredPoll):
		}
	}
}

// listOffsets is every partition's offset for the special timestamp ts.
func (tc *tieredRun) listOffsets(ctx context.Context, ts int64) (map[int32]int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = tc.r.topic.name
	for _, p := range tc.parts {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = p, ts, -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	out := map[int32]int64{}
	for _, sh := range tc.r.topic.adm.RequestSharded(ctx, req) {
		if sh.Err != nil {
			return nil, sh.Err
		}
		for _, t := range sh.Resp.(*kmsg.ListOffsetsResponse).Topics {
			for _, p := range t.Partitions {
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
					return nil, fmt.Errorf("partition %d: %w", p.Partition, err)
				}
				out[p.Partition] = p.Offset
			}
		}
	}
	if len(out) != len(tc.parts) {
		return nil, fmt.Errorf("%d of %d partitions answered", len(out), len(tc.parts))
	}
	return out, nil
}

// setLocalRetention sets the topic's local.retention.bytes.
func (tc *tieredRun) setLocalRetention(ctx context.Context, v string) error {
	rs, err := tc.r.topic.ka.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "local.retention.bytes", Value: &v}}, tc.r.topic.name)
	if err == nil {
		for _, x := range rs {
			if x.Err != nil {
				err = fmt.Errorf("%w (%s)", x.Err, x.ErrMessage)
			}
		}
	}
	if err != nil {
		return fmt.Errorf("set local.retention.bytes %s: %w", v, err)
	}
	return nil
}

// drain reads every partition from from[p] (nil: 0) to until[p] with the backlog
// drain's fetchers, one a leader, and returns its figures. The measured one (the
// remote read) sets the result's window: rates, broker and loader CPU, runtime
// figures, the object store's CPU and cfg.OnSteady (the profile).
func (tc *tieredRun) drain(ctx context.Context, phase string, from, until map[int32]int64, measured bool) (DrainFigures, error) {
	r, cfg := tc.r, tc.r.cfg
	st := &rawStats{lat: newRecorder()}
	conns := map[string]*rawConn{}
	defer func() {
		for _, rc := range conns {
			rc.Close()
		}
	}()
	for addr := range r.topic.byLeader {
		rc, err := dialRaw(ctx, addr)
		if err != nil {
			return DrainFigures{}, fmt.Errorf("%s: dial %s: %w", phase, addr, err)
		}
		conns[addr] = rc
	}
	dctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var use0 Usage
	if cfg.Broker != nil {
		use0, _ = cfg.Broker.Usage()
	}
	os0, osErr := Usage{}, error(nil)
	var rt *runtimeProbe
	if measured {
		if cfg.ObjectStore != nil {
			os0, osErr = cfg.ObjectStore.Usage()
		}
		rt = startRuntimeProbe(cfg.BrokerRuntime)
		if cfg.OnSteady != nil {
			go cfg.OnSteady(dctx)
		}
	}
	snap0 := takeCPUSnap()
	start := time.Now()
	errc := make(chan error, len(conns))
	var wg sync.WaitGroup
	for addr, rc := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := rawFetch(dctx, rc, r.topic.name, r.topic.byLeader[addr], from, until, tc.fver[addr], int64(r.w.MessageSize), st); err != nil {
				errc <- err
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var last int64
	for waiting := true; waiting; {
		select {
		case <-ctx.Done():
			return DrainFigures{}, ctx.Err()
		case err := <-errc:
			return DrainFigures{}, fmt.Errorf("%s read: %w", phase, err)
		case <-done:
			waiting = false
		case now := <-tick.C:
			cur := st.bytes.Load()
			tc.say("%4.0fs %-7s fetch %7.1f MB/s, %d records", now.Sub(start).Seconds(), phase, float64(cur-last)/1e6, st.records.Load())
			last = cur
			if now.Sub(start) > cfg.Duration {
				return DrainFigures{}, fmt.Errorf("%s read not done after %v: %d records", phase, cfg.Duration, st.records.Load())
			}
		}
	}
	secs := max(time.Since(start).Seconds(), 1e-9)
	d := DrainFigures{Records: st.records.Load(), Bytes: st.bytes.Load(), Sec: secs, Errors: st.errs.Load()}
	d.Rate, d.MBps = float64(d.Records)/secs, float64(d.Bytes)/secs/1e6
	var cost *BrokerCost
	if cfg.Broker != nil {
		if use1, err := cfg.Broker.Usage(); err == nil && use1.CPUSeconds > 0 {
			cost = brokerCost(cfg.Broker, use0, use1, d.Records, d.Bytes)
			cost.PerWhat, cost.CPUCores = "consumed", cost.CPUSeconds/secs
			d.BrokerCPUUsPerMsg = cost.CPUUsPerMsg
		}
	}
	if !measured {
		return d, nil
	}
	res := tc.res
	res.DurationSec, res.ConsRate, res.ConsMBps, res.Broker = secs, d.Rate, d.MBps, cost
	res.Loader = loaderCost(snap0, takeCPUSnap(), d.Records, secs, "consumed", cfg.BrokerInProcess)
	rt.finish(res, cfg.BrokerInProcess)
	if cfg.ObjectStore != nil && osErr == nil {
		if os1, err := cfg.ObjectStore.Usage(); err == nil {
			tc.fig.ObjectStoreCPUs = os1.CPUSeconds - os0.CPUSeconds
		}
	}
	return d, nil
}

// objectStore is the versitygw samsa-bench starts as the object store of a samsa it
// spawns for a tiered workload (issue 34's tests use the same server: internal/s3test),
// over a directory of the work dir; nil when there is none.
type objectStore struct {
	g   *versitygw.Gateway
	dir string
}

// objectStoreBucket is the bucket samsa-bench makes in its object store.
const objectStoreBucket = "samsa-bench"

// startObjectStore starts a versitygw over a new directory of workDir with one
// bucket, and returns it with the broker keys (`--set`, Aiven's rsm.config.* names
// as samsa reads them) that give it to samsa as its remote storage.
func startObjectStore(workDir string) (*objectStore, []string, error) {
	bin, err := versitygw.Binary()
	if err != nil {
		return nil, nil, fmt.Errorf("%w: a tiered workload's object store: %w", ErrTarget, err)
	}
	dir, err := os.MkdirTemp(workDir, "samsa-bench-objstore-")
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrTarget, err)
	}
	root := filepath.Join(dir, "data")
	if err := os.Mkdir(root, 0o755); err != nil {
		os.RemoveAll(dir)
		return nil, nil, fmt.Errorf("%w: %w", ErrTarget, err)
	}
	g, err := versitygw.Start(bin, root, filepath.Join(dir, "versitygw.log"))
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, fmt.Errorf("%w: %w", ErrTarget, err)
	}
	s := &objectStore{g: g, dir: dir}
	if err := g.MakeBucket(objectStoreBucket); err != nil {
		s.close()
		return nil, nil, fmt.Errorf("%w: %w", ErrTarget, err)
	}
	var sets []string
	for _, kv := range [][2]string{
		{"remote.log.storage.system.enable", "true"},
		{"rsm.config.storage.s3.bucket.name", objectStoreBucket},
		{"rsm.config.storage.s3.region", "us-east-1"},
		{"rsm.config.storage.s3.endpoint.url", g.Endpoint},
		{"rsm.config.storage.s3.path.style.access.enabled", "true"},
		{"rsm.config.storage.aws.access.key.id", g.Access},
		{"rsm.config.storage.aws.secret.access.key", g.Secret},
		{"rsm.config.chunk.size", "4194304"}, // required by Aiven's plugin: 4 MiB as in its examples
	} {
		sets = append(sets, "--set", kv[0]+"="+kv[1])
	}
	return s, sets, nil
}

// close stops the object store and removes its data.
func (s *objectStore) close() {
	if s == nil {
		return
	}
	s.g.Kill()
	os.RemoveAll(s.dir)
}

// usage is the object store's process as a cost source, or nil.
func (s *objectStore) usage() UsageSource {
	if s == nil {
		return nil
	}
	return ProcUsage(s.g.Pid())
}

// targetSpawn is how runOne starts spec: the comparison's spawn options with the
// workload's broker configs for a samsa started here (every node of a
// samsa-cluster), and for a tiered workload an object store and the keys that name
// it, unless the workload names its own (rsm.config.storage.s3.endpoint.url). Any
// other broker runs as it is, and a note says so. The caller closes the store.
func targetSpawn(cfg CompareConfig, spec string) (SpawnOptions, []string, *objectStore, error) {
	sp, w := cfg.Spawn, cfg.Workload
	args := w.BrokerArgs()
	if base, _, _ := strings.Cut(spec, "@"); base != TargetSamsa && base != TargetSamsaCluster {
		var notes []string
		if len(args) > 0 {
			notes = append(notes, fmt.Sprintf("the workload's broker configs (%s) were not applied: samsa-bench sets them only on a samsa it starts; this broker runs with its own", strings.Join(args, " ")))
		}
		if w.Tiered() {
			notes = append(notes, "tiered storage is this broker's own: samsa-bench starts an object store only for a samsa it starts")
		}
		return sp, notes, nil, nil
	}
	var store *objectStore
	sets := append([]string(nil), sp.BrokerSets...)
	if w.Tiered() && w.BrokerConfigs["rsm.config.storage.s3.endpoint.url"] == "" && !specTiered(spec) { // samsa@tiered starts its own
		var storeSets []string
		var err error
		if store, storeSets, err = startObjectStore(sp.WorkDir); err != nil {
			return sp, nil, nil, err
		}
		sets = append(sets, storeSets...)
	}
	sp.BrokerSets = append(sets, args...) // the workload's keys last: they win
	return sp, nil, store, nil
}
