package bench

import (
	"context"
	"fmt"
	"io/fs"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The tiered target, samsa@tiered (issue 34): the same samsa with tiered storage
// (KIP-405) copying segments to remote storage throughout a run, so that what the
// copies cost a fixed-rate workload is measured beside the same broker without
// tiering, in one comparison, A B A B:
//
//	samsa-bench compare --targets samsa,samsa@tiered --workload latency-20k --topic-config segment.bytes=1048576
//
// For the target samsa-bench starts a versitygw over a directory of the work dir
// (startObjectStore: the rsm.config.* keys name it), passes tieredBrokerKeys, and
// creates the run's topics with tieredTopicConfigs where the workload does not set
// them: remote.storage.enable and local.retention.bytes. Everything else is the
// workload's, the same on both targets; the segment size too, so that rolls cost the
// same: set a small one on every target (--topic-config segment.bytes=1048576: at
// latency-20k's 2 MB/s over 6 partitions a segment a partition rolls every 3 s).
//
// A client run in a comparison with a tiered target reads the broker's /metrics once
// a second over its measured window (copyProbe), on every target of the comparison so
// that each carries the same load. On the tiered target it gives what was copied in the
// window (Result.Copies): the copies finished (the rsm-manifest objects the object
// store gained, a copy's last object), the bytes and errors of the broker's
// samsa_remote_copy_bytes_total and _copy_errors_total, in how many of the seconds
// bytes were copied, and samsa_remote_copy_lag_bytes summed over the partitions. A
// round that copied nothing fails: it would not measure a run with copies.
const targetTiered = "tiered"

// tieredBrokerKeys are a samsa@tiered target's broker keys besides its object
// store's: the remote log manager's task every second (Kafka's default is 30 s) so
// that copies follow the rolls, and the retention check every second (Kafka's
// default is 5 minutes) so that local retention deletes what was copied.
var tieredBrokerKeys = [][2]string{
	{"remote.log.manager.task.interval.ms", "1000"},
	{"log.retention.check.interval.ms", "1000"},
}

// tieredTopicConfigs are the topic configs a run on a samsa@tiered target adds where
// the workload does not set them: tiered, keeping 4 MiB a partition locally.
var tieredTopicConfigs = map[string]string{
	"remote.storage.enable": "true",
	"local.retention.bytes": "4194304",
}

// tieredOf splits the tiered extra off a samsa@ spec's extras.
func tieredOf(extras []string) (tiered bool, rest []string) {
	for _, a := range extras {
		if a == targetTiered {
			tiered = true
		} else {
			rest = append(rest, a)
		}
	}
	return tiered, rest
}

// specTiered says spec is a samsa@tiered target.
func specTiered(spec string) bool {
	base, extra, _ := strings.Cut(spec, "@")
	tiered, _ := tieredOf(strings.Split(extra, "@"))
	return base == TargetSamsa && tiered
}

// startTieredSamsa starts an object store, then samsa with its keys and
// tieredBrokerKeys ahead of o's own (the workload's: they win).
func startTieredSamsa(ctx context.Context, o SpawnOptions) (*Target, error) {
	store, sets, err := startObjectStore(o.WorkDir)
	if err != nil {
		return nil, err
	}
	for _, kv := range tieredBrokerKeys {
		sets = append(sets, "--set", kv[0]+"="+kv[1])
	}
	o.tiered = false
	o.BrokerSets = append(sets, o.BrokerSets...)
	t, err := StartTarget(ctx, TargetSamsa, o)
	if err != nil {
		store.close()
		return nil, err
	}
	t.store, t.topicConfigs = store, maps.Clone(tieredTopicConfigs)
	return t, nil
}

// withTopicConfigs is w with the topic configs add where w does not set them, and
// the note that says what the target's topics have besides the workload's.
func withTopicConfigs(w *Workload, add map[string]string) (*Workload, string) {
	wc := *w
	wc.TopicConfigs = maps.Clone(w.TopicConfigs)
	if wc.TopicConfigs == nil {
		wc.TopicConfigs = map[string]string{}
	}
	var set []string
	for _, k := range slices.Sorted(maps.Keys(add)) {
		if _, ok := wc.TopicConfigs[k]; !ok {
			wc.TopicConfigs[k] = add[k]
			set = append(set, k+"="+add[k])
		}
	}
	var keys []string
	for _, kv := range tieredBrokerKeys {
		keys = append(keys, kv[0]+"="+kv[1])
	}
	note := fmt.Sprintf("tiered: versitygw as the object store; broker keys %s; the topics have %s besides the workload's configs",
		strings.Join(keys, ", "), strings.Join(set, ", "))
	if sb, ok := wc.TopicConfigs["segment.bytes"]; ok {
		note += " (segment.bytes " + sb + ")"
	} else {
		note += "; segment.bytes is the broker's default (1 GiB), so a short window may copy nothing: set a small one on every target (--topic-config segment.bytes=1048576)"
	}
	return &wc, note
}

// CopyFigures are what a samsa@tiered target copied to remote storage over a client
// run's measured window (Result.Copies).
type CopyFigures struct {
	Sec float64 `json:"s"` // the window the figures cover
	// Segments are the copies finished: the rsm-manifest objects (the last of a
	// copy's objects) the object store gained.
	Segments int64 `json:"segments"`
	// Bytes and Errors are the increase of the broker's samsa_remote_copy_bytes_total
	// [RemoteCopyBytesPerSec] and samsa_remote_copy_errors_total
	// [RemoteCopyErrorsPerSec], over every topic.
	Bytes  int64 `json:"bytes"`
	Errors int64 `json:"errors"`
	// Seconds are the probe's intervals (its reads of /metrics a second apart, the
	// last one cut at the window's end), Active those in which the bytes grew.
	Seconds int `json:"seconds"`
	Active  int `json:"active_seconds"`
	// LagMax, LagMean and LagEnd are samsa_remote_copy_lag_bytes [RemoteCopyLagBytes]
	// summed over the partitions (sealed segments not copied yet), over the reads.
	LagMax  int64   `json:"lag_max_bytes"`
	LagMean float64 `json:"lag_mean_bytes"`
	LagEnd  int64   `json:"lag_end_bytes"`
}

// copyProbe reads a target's tiered storage counters over a client run's measured
// window.
type copyProbe struct {
	metrics  *MetricsUsage
	storeDir string // the object store's directory; "" for a target without one
	window   time.Duration
	done     chan struct{}
	fig      CopyFigures
	err      error
}

func newCopyProbe(t *Target, window time.Duration) *copyProbe {
	p := &copyProbe{metrics: NewMetricsUsage(t.AdminURL), window: window, done: make(chan struct{})}
	if t.store != nil {
		p.storeDir = t.store.g.Root
	}
	return p
}

// around is a RunConfig.OnSteady that runs next (if any) beside the probe.
func (p *copyProbe) around(next func(context.Context)) func(context.Context) {
	return func(ctx context.Context) {
		if next != nil {
			go next(ctx)
		}
		p.run(ctx)
	}
}

// copySample is one read of the broker's counters.
type copySample struct{ bytes, errors, lag float64 }

func (p *copyProbe) sample() (copySample, error) {
	body, err := p.metrics.scrape()
	if err != nil {
		return copySample{}, err
	}
	v := scrapeSums(body, "samsa_remote_copy_bytes_total", "samsa_remote_copy_errors_total", "samsa_remote_copy_lag_bytes")
	return copySample{bytes: v[0], errors: v[1], lag: v[2]}, nil
}

// run reads the counters at the window's start, once a second, and at its end (the
// workload's duration on, or ctx's end if sooner).
func (p *copyProbe) run(ctx context.Context) {
	defer close(p.done)
	start := time.Now()
	segs0, err := countCopies(p.storeDir)
	if err != nil {
		p.err = err
		return
	}
	first, err := p.sample()
	if err != nil {
		p.err = err
		return
	}
	end := time.NewTimer(p.window)
	defer end.Stop()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	f, prev := &p.fig, first
	var lagSum float64
	for last := false; !last; {
		select {
		case <-ctx.Done():
			last = true
		case <-end.C:
			last = true
		case <-tick.C:
		}
		s, err := p.sample()
		if err != nil {
			p.err = err
			return
		}
		f.Seconds++
		if s.bytes > prev.bytes {
			f.Active++
		}
		lagSum += s.lag
		f.LagMax = max(f.LagMax, int64(s.lag))
		prev = s
	}
	f.Sec = time.Since(start).Seconds()
	segs1, err := countCopies(p.storeDir)
	if err != nil {
		p.err = err
		return
	}
	f.Segments = segs1 - segs0
	f.Bytes, f.Errors = int64(prev.bytes-first.bytes), int64(prev.errors-first.errors)
	f.LagMean, f.LagEnd = lagSum/float64(max(f.Seconds, 1)), int64(prev.lag)
}

// finish gives a tiered target's client result the figures once the probe ended
// (its window began: Run returned a result), with a note; a round in which nothing
// was copied, or whose copies were not read, fails. A target without an object store
// gets nothing: its probe only carried the same load.
func (p *copyProbe) finish(res *Result) {
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		p.err = fmt.Errorf("the probe did not end within 30 s of the run")
	}
	if p.storeDir == "" {
		return
	}
	if p.err != nil {
		res.Failed = "tiered: the copies of the measured window not read: " + p.err.Error()
		return
	}
	f := p.fig
	res.Copies = &f
	text := fmt.Sprintf("tiered copies in the measured window (%.1fs): %d segments copied (rsm-manifest objects the object store gained), %.1f MB (samsa_remote_copy_bytes_total: %.2f MB/s), %d copy errors, bytes copied in %d of %d seconds; remote copy lag (samsa_remote_copy_lag_bytes, all partitions) max %.2f MB, mean %.2f MB, at the end %.2f MB",
		f.Sec, f.Segments, float64(f.Bytes)/1e6, float64(f.Bytes)/max(f.Sec, 1e-9)/1e6, f.Errors, f.Active, f.Seconds,
		float64(f.LagMax)/1e6, f.LagMean/1e6, float64(f.LagEnd)/1e6)
	res.Notes = append(res.Notes, text)
	if f.Segments <= 0 || f.Bytes <= 0 {
		res.Failed = "tiered: nothing copied to remote storage in the measured window, so the round measures no copying: " + text
	}
}

// countCopies counts the rsm-manifest objects under an object store's directory (0
// for "").
func countCopies(dir string) (int64, error) {
	if dir == "" {
		return 0, nil
	}
	var n int64
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(d.Name(), ".rsm-manifest") {
			n++
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("object store %s: %w", dir, err)
	}
	return n, nil
}

// scrapeSums reads the Prometheus text format and returns, for each name, the sum
// of its samples over every label set (0 where it has none):
//
//	samsa_remote_copy_lag_bytes{partition="0",topic="t"} 1.048576e+06
func scrapeSums(page []byte, names ...string) []float64 {
	out := make([]float64, len(names))
	for line := range strings.Lines(string(page)) {
		if line == "" || line[0] == '#' {
			continue
		}
		cut := strings.IndexAny(line, "{ ")
		if cut < 0 {
			continue
		}
		i := slices.Index(names, line[:cut])
		if i < 0 {
			continue
		}
		rest := line[cut:]
		if rest[0] == '{' {
			end := strings.LastIndexByte(rest, '}')
			if end < 0 {
				continue
			}
			rest = rest[end+1:]
		}
		if f := strings.Fields(rest); len(f) > 0 {
			if v, err := strconv.ParseFloat(f[0], 64); err == nil {
				out[i] += v
			}
		}
	}
	return out
}
