package node

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// batchBytes sums, from the producer's side, the record-batch bytes the broker was
// sent: each batch's records (after compression) and the v2 batch header.
type batchBytes struct {
	mu      sync.Mutex
	bytes   map[string]int64
	records map[string]int64
}

// recordBatchHeader is the size of a v2 record batch's header (baseOffset to the
// record count), which kgo's CompressedBytes leaves out.
const recordBatchHeader = 61

func (b *batchBytes) OnProduceBatchWritten(_ kgo.BrokerMetadata, topic string, _ int32, m kgo.ProduceBatchMetrics) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.bytes[topic] += int64(m.CompressedBytes + recordBatchHeader)
	b.records[topic] += int64(m.NumRecords)
}

func (b *batchBytes) get(topic string) (bytes, records int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.bytes[topic], b.records[topic]
}

// scrape reads the admin listener's /metrics, parsed with Prometheus' own parser.
func scrape(t *testing.T, admin string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get("http://" + admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		t.Fatalf("/metrics does not parse: %v", err)
	}
	return fams
}

// series finds the value of the series of family name whose labels include want
// (name=value pairs); ok is false when there is none.
func series(fams map[string]*dto.MetricFamily, name string, want ...string) (m *dto.Metric, ok bool) {
	f := fams[name]
	if f == nil {
		return nil, false
	}
next:
	for _, m := range f.Metric {
		for i := 0; i+1 < len(want); i += 2 {
			found := false
			for _, l := range m.Label {
				if l.GetName() == want[i] && l.GetValue() == want[i+1] {
					found = true
				}
			}
			if !found {
				continue next
			}
		}
		return m, true
	}
	return nil, false
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Untyped != nil:
		return m.Untyped.GetValue()
	}
	return -1
}

// metricsWorkload is what the workload did, for the checks.
type metricsWorkload struct {
	topic, group     string
	bytesIn, records int64 // sent, as the producer counted them (the group read all of it)
	ends             map[int32]int64
	committed        map[int32]int64
}

// TestMetrics runs a produce/consume/group workload with franz-go against a real
// single node and checks what its /metrics exports: per-topic bytes and records in
// (equal to what the producer sent), bytes out (what the group read), per-partition
// log size and offsets, group committed offsets and lag, the fdatasync histogram,
// connections per listener, the cluster's partition counts and the controller; then
// that every query of the Grafana dashboard (deploy/grafana/samsa.json) names series
// and labels the broker exports.
func TestMetrics(t *testing.T) {
	nd, w := metricsWorkloadNode(t)
	var fams map[string]*dto.MetricFamily
	waitFor(t, 10*time.Second, "/metrics shows the workload", func() error {
		fams = scrape(t, nd.AdminAddr())
		return checkFamilies(fams, w)
	})
	t.Run("dashboard", func(t *testing.T) { checkDashboard(t, "../../deploy/grafana/samsa.json", fams) })
}

// metricsWorkloadNode starts a single node (shut down at the end of the test) and runs
// the workload against it: topic metrics-t with two partitions, 37 records produced
// to partition 0 and 20 to 1, all read by group metrics-g, which commits 30 and 20.
func metricsWorkloadNode(t *testing.T) (*Node, metricsWorkload) {
	t.Helper()
	dir := t.TempDir()
	cfg, err := FromKeys(map[string]string{
		"listeners": "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0", "data.dir": dir, "admin.listen": "127.0.0.1:0",
		"sync": "fsync", "group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "1",
	})
	if err != nil {
		t.Fatal(err)
	}
	nd, err := Start(cfg, Options{Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := nd.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := nd.Ready(ctx); err != nil {
		t.Fatal(err)
	}

	w := metricsWorkload{topic: "metrics-t", group: "metrics-g", ends: map[int32]int64{0: 37, 1: 20}, committed: map[int32]int64{0: 30, 1: 20}}
	hook := &batchBytes{bytes: map[string]int64{}, records: map[string]int64{}}
	prod, err := kgo.NewClient(kgo.SeedBrokers(nd.Addr()), kgo.WithHooks(hook), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(prod.Close) // its connections stay open for the scrape
	if _, err := kadm.NewClient(prod).CreateTopic(ctx, 2, 1, nil, w.topic); err != nil {
		t.Fatal(err)
	}
	produce := func(partition int32, n int) {
		t.Helper()
		recs := make([]*kgo.Record, n)
		for i := range recs {
			recs[i] = &kgo.Record{Topic: w.topic, Partition: partition, Value: []byte(strings.Repeat("v", 10+i*7))}
		}
		if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	produce(0, 30)
	produce(1, 20)
	produce(0, 7)
	// A lookup of a topic that does not exist, as a typo would make: one error answer.
	md := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr("metrics-absent")
	md.Topics = append(md.Topics, mt)
	if _, err := md.RequestWith(ctx, prod); err != nil {
		t.Fatal(err)
	}
	// kgo calls the hook after it completes the records' promises.
	waitFor(t, 5*time.Second, "the producer's batch hooks", func() error {
		if w.bytesIn, w.records = hook.get(w.topic); w.records != 57 {
			return fmt.Errorf("%d records counted, want 57", w.records)
		}
		return nil
	})

	// The group reads everything and commits 30 and 20: a lag of 7 on partition 0.
	cons, err := kgo.NewClient(kgo.SeedBrokers(nd.Addr()), kgo.ConsumerGroup(w.group), kgo.ConsumeTopics(w.topic),
		kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	for got < 57 {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of 57: %v", got, err)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s-%d: %v", topic, p, err) })
		got += fs.NumRecords()
	}
	var commitErr error
	cons.CommitOffsetsSync(ctx, map[string]map[int32]kgo.EpochOffset{w.topic: {0: {Epoch: -1, Offset: 30}, 1: {Epoch: -1, Offset: 20}}},
		func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			if commitErr = err; err == nil {
				for _, rt := range resp.Topics {
					for _, rp := range rt.Partitions {
						if e := kerr.ErrorForCode(rp.ErrorCode); e != nil {
							commitErr = e
						}
					}
				}
			}
		})
	if commitErr != nil {
		t.Fatal(commitErr)
	}
	cons.Close() // the group is left empty, its offsets kept

	return nd, w
}

// checkFamilies checks every family the workload moved, and the cluster's.
func checkFamilies(fams map[string]*dto.MetricFamily, w metricsWorkload) error {
	var errs []string
	expect := func(name string, want float64, labels ...string) {
		m, ok := series(fams, name, labels...)
		switch {
		case !ok:
			errs = append(errs, fmt.Sprintf("%s%v: no series", name, labels))
		case value(m) != want:
			errs = append(errs, fmt.Sprintf("%s%v = %v, want %v", name, labels, value(m), want))
		}
	}
	atLeast := func(name string, min float64, labels ...string) {
		m, ok := series(fams, name, labels...)
		switch {
		case !ok:
			errs = append(errs, fmt.Sprintf("%s%v: no series", name, labels))
		case value(m) < min:
			errs = append(errs, fmt.Sprintf("%s%v = %v, want at least %v", name, labels, value(m), min))
		}
	}
	topic := []string{"topic", w.topic}
	// Per topic: what the producer sent, what the group read.
	expect("samsa_topic_bytes_in_total", float64(w.bytesIn), topic...)
	expect("samsa_topic_messages_in_total", float64(w.records), topic...)
	expect("samsa_topic_bytes_out_total", float64(w.bytesIn), topic...)
	expect("samsa_topic_replication_bytes_out_total", 0, topic...)
	// Per partition: the log holds exactly the produced batches.
	var size float64
	for p, end := range w.ends {
		tp := []string{"topic", w.topic, "partition", fmt.Sprint(p)}
		expect("samsa_log_end_offset", float64(end), tp...)
		expect("samsa_log_high_watermark", float64(end), tp...)
		expect("samsa_log_start_offset", 0, tp...)
		if m, ok := series(fams, "samsa_log_size_bytes", tp...); ok {
			size += value(m)
		}
	}
	if size != float64(w.bytesIn) {
		errs = append(errs, fmt.Sprintf("samsa_log_size_bytes of %s sums to %v, want the %d bytes produced", w.topic, size, w.bytesIn))
	}
	// The group: committed offsets and lag against the high watermark.
	for p, c := range w.committed {
		gp := []string{"group", w.group, "topic", w.topic, "partition", fmt.Sprint(p)}
		expect("samsa_group_committed_offset", float64(c), gp...)
		expect("samsa_group_lag", float64(w.ends[p]-c), gp...)
	}
	expect("samsa_group_members", 0, "group", w.group, "state", "Empty")
	// fdatasync: a histogram (not quantile gauges) that counted the group commits.
	if f := fams["samsa_engine_fsync_latency_seconds"]; f == nil || f.GetType() != dto.MetricType_HISTOGRAM || len(f.Metric) != 1 {
		errs = append(errs, fmt.Sprintf("samsa_engine_fsync_latency_seconds: not one histogram: %v", f))
	} else {
		h := f.Metric[0].Histogram
		prev := uint64(0)
		for _, b := range h.Bucket {
			if b.GetCumulativeCount() < prev {
				errs = append(errs, "fsync histogram: buckets not cumulative")
			}
			prev = b.GetCumulativeCount()
		}
		if h.GetSampleCount() == 0 || h.GetSampleSum() <= 0 || prev > h.GetSampleCount() || len(h.Bucket) < 10 {
			errs = append(errs, fmt.Sprintf("fsync histogram: count %d sum %v, %d buckets", h.GetSampleCount(), h.GetSampleSum(), len(h.Bucket)))
		}
	}
	// The group commit's stages: histograms that counted the produce's rounds.
	for _, name := range []string{"samsa_engine_flush_queue_wait_seconds", "samsa_engine_flush_sync_seconds",
		"samsa_engine_flush_release_seconds", "samsa_engine_flush_round_files"} {
		if f := fams[name]; f == nil || f.GetType() != dto.MetricType_HISTOGRAM || len(f.Metric) != 1 || f.Metric[0].Histogram.GetSampleCount() == 0 {
			errs = append(errs, fmt.Sprintf("%s: not one histogram with observations: %v", name, f))
		}
	}
	atLeast("samsa_engine_flush_syncs_total", 3, "kind", "segment")
	atLeast("samsa_engine_flush_rounds_total", 1, "mode", "serial")
	if f := fams["samsa_request_latency_seconds"]; f == nil || f.GetType() != dto.MetricType_HISTOGRAM {
		errs = append(errs, "samsa_request_latency_seconds: not a histogram")
	}
	atLeast("samsa_requests_total", 3, "api", "Produce")
	atLeast("samsa_requests_total", 1, "api", "OffsetCommit")
	atLeast("samsa_request_errors_total", 1, "api", "Metadata", "error", "UNKNOWN_TOPIC_OR_PARTITION")
	// The producer's connections are open on the PLAINTEXT listener.
	atLeast("samsa_listener_connections", 1, "listener", "PLAINTEXT")
	// No storage failure.
	for _, k := range []string{"no_space", "eio", "io", "corrupt_batch", "dir_offline"} {
		expect("samsa_engine_storage_errors_total", 0, "kind", k)
	}
	expect("samsa_log_dir_offline", 0)
	atLeast("samsa_log_dir_usable_bytes", 1)
	// The cluster of one: all partitions led here, fully replicated, the controller here.
	atLeast("samsa_replica_leader_partitions", 3) // metrics-t's two and __consumer_offsets' one
	expect("samsa_replica_under_replicated_partitions", 0)
	expect("samsa_replica_under_min_isr_partitions", 0)
	expect("samsa_replica_isr_shrinks_total", 0)
	expect("samsa_replica_isr_expands_total", 0)
	expect("samsa_cluster_offline_partitions", 0)
	expect("samsa_cluster_brokers", 1, "state", "unfenced")
	expect("samsa_controller_active", 1)
	expect("samsa_metadata_offset_lag", 0)
	atLeast("samsa_metadata_applied_offset", 1)
	if len(errs) > 0 {
		return fmt.Errorf("%d wrong:\n%s", len(errs), strings.Join(errs, "\n"))
	}
	return nil
}

// promToken matches a PromQL metric name or label name token.
var promToken = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)

// promKeywords are PromQL's functions, aggregations and keywords, which are not
// series names.
var promKeywords = map[string]bool{
	"sum": true, "min": true, "max": true, "avg": true, "count": true, "rate": true, "irate": true, "increase": true,
	"histogram_quantile": true, "by": true, "without": true, "on": true, "ignoring": true, "group_left": true,
	"group_right": true, "topk": true, "bottomk": true, "label_values": true, "delta": true, "deriv": true,
	"and": true, "or": true, "unless": true, "offset": true, "bool": true, "abs": true, "clamp_min": true,
}

// exprNames returns the series names of a PromQL expression, with the label names
// its matchers use on each, and the labels of its by (...) clauses. Strings,
// matchers' values, durations in brackets and Grafana's $variables are skipped.
func exprNames(expr string) (names map[string][]string, grouping []string) {
	names = map[string][]string{}
	s := expr
	var last string
	for len(s) > 0 {
		switch c := s[0]; {
		case c == '"':
			end := strings.IndexByte(s[1:], '"')
			if end < 0 {
				return names, grouping
			}
			s = s[end+2:]
		case c == '[':
			end := strings.IndexByte(s, ']')
			if end < 0 {
				return names, grouping
			}
			s = s[end+1:]
		case c == '{':
			end := strings.IndexByte(s, '}')
			if end < 0 {
				return names, grouping
			}
			inner := regexp.MustCompile(`"[^"]*"`).ReplaceAllString(s[1:end], "")
			for _, l := range promToken.FindAllString(inner, -1) {
				if last != "" {
					names[last] = append(names[last], l)
				}
			}
			s = s[end+1:]
		case c == '$':
			loc := promToken.FindStringIndex(s[1:])
			if loc == nil || loc[0] != 0 {
				s = s[1:]
				continue
			}
			s = s[1+loc[1]:]
		case c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			tok := promToken.FindString(s)
			s = s[len(tok):]
			rest := strings.TrimLeft(s, " ")
			switch {
			case tok == "by" || tok == "without":
				if strings.HasPrefix(rest, "(") {
					end := strings.IndexByte(rest, ')')
					grouping = append(grouping, promToken.FindAllString(rest[1:end], -1)...)
					s = rest[end+1:]
				}
			case promKeywords[tok] || strings.HasPrefix(rest, "("):
			default:
				if _, ok := names[tok]; !ok {
					names[tok] = []string{}
				}
				last = tok
			}
		default:
			s = s[1:]
		}
	}
	return names, grouping
}

// afterAnEvent are the dashboard's counters the test workload cannot be relied on to
// start: they appear after a failed produce, or an error answer on the controller
// listener; tiered storage's only on a node with remote.log.storage.system.enable.
var afterAnEvent = []string{"samsa_topic_failed_produce_requests_total", "samsa_controller_listener_request_errors_total",
	"samsa_remote_copy_bytes_total", "samsa_remote_fetch_bytes_total", "samsa_remote_copy_errors_total", "samsa_remote_fetch_errors_total",
	"samsa_remote_delete_errors_total", "samsa_remote_log_size_bytes", "samsa_remote_copy_lag_bytes"}

// checkDashboard checks every target of the dashboard: the series it names are
// exported (a histogram's _bucket, _sum and _count by the family), and every label
// its matchers and grouping name is a label of those series (or instance and job,
// which Prometheus adds, or a histogram's le).
func checkDashboard(t *testing.T, path string, fams map[string]*dto.MetricFamily) {
	body, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Name  string `json:"name"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(body, &d); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	family := func(name string) *dto.MetricFamily {
		if f := fams[name]; f != nil {
			return f
		}
		for _, suf := range []string{"_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(name, suf); ok {
				if f := fams[base]; f != nil && (f.GetType() == dto.MetricType_HISTOGRAM || f.GetType() == dto.MetricType_SUMMARY) {
					return f
				}
			}
		}
		return nil
	}
	labelsOf := func(f *dto.MetricFamily) map[string]bool {
		ls := map[string]bool{"instance": true, "job": true}
		if f.GetType() == dto.MetricType_HISTOGRAM {
			ls["le"] = true
		}
		for _, m := range f.Metric {
			for _, l := range m.Label {
				ls[l.GetName()] = true
			}
		}
		return ls
	}
	check := func(where, expr string) {
		names, grouping := exprNames(expr)
		if len(names) == 0 {
			t.Errorf("%s: %q names no series", where, expr)
			return
		}
		all := map[string]bool{}
		unseen := false // a series of afterAnEvent not exported yet: its labels are unknown
		for name, labels := range names {
			f := family(name)
			if f == nil {
				if !slices.Contains(afterAnEvent, name) {
					t.Errorf("%s: %q: series %s is not exported", where, expr, name)
				} else {
					unseen = true
				}
				continue
			}
			ls := labelsOf(f)
			for l := range ls {
				all[l] = true
			}
			for _, l := range labels {
				if !ls[l] {
					t.Errorf("%s: %q: %s has no label %s", where, expr, name, l)
				}
			}
		}
		for _, l := range grouping {
			if !all[l] && !unseen {
				t.Errorf("%s: %q: groups by %s, which none of its series has", where, expr, l)
			}
		}
	}
	targets := 0
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			targets++
			check(fmt.Sprintf("panel %q", p.Title), tg.Expr)
		}
	}
	for _, v := range d.Templating.List {
		if q, ok := v.Query.(map[string]any); ok {
			if s, ok := q["query"].(string); ok {
				// label_values(series, label)
				inner := strings.TrimSuffix(strings.TrimPrefix(s, "label_values("), ")")
				name, label, _ := strings.Cut(inner, ",")
				check("variable "+v.Name, fmt.Sprintf("%s{%s=\"\"}", strings.TrimSpace(name), strings.TrimSpace(label)))
			}
		}
	}
	if targets < 30 {
		t.Errorf("the dashboard has %d queries", targets)
	}
	// Every family the broker exports under samsa_ is on the dashboard, or listed
	// below as left off.
	used := map[string]bool{}
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			names, _ := exprNames(tg.Expr)
			for n := range names {
				if f := family(n); f != nil {
					used[f.GetName()] = true
				}
			}
		}
	}
	// samsa_connections is samsa_listener_connections summed.
	leftOff := []string{"samsa_connections"}
	var missing []string
	for name := range fams {
		if strings.HasPrefix(name, "samsa_") && !used[name] && !slices.Contains(leftOff, name) {
			missing = append(missing, name)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("exported but on no panel: %v", missing)
	}
}

// TestExprNames checks the dashboard test's PromQL reading on the shapes it uses.
func TestExprNames(t *testing.T) {
	names, grouping := exprNames(`histogram_quantile(0.99, sum by (api, le) (rate(samsa_request_latency_seconds_bucket{instance=~"$instance",api!="x"}[$__rate_interval]))) / sum(samsa_b)`)
	if len(names) != 2 || !slices.Equal(names["samsa_request_latency_seconds_bucket"], []string{"instance", "api"}) || names["samsa_b"] == nil || len(names["samsa_b"]) != 0 {
		t.Errorf("names %v", names)
	}
	if !slices.Equal(grouping, []string{"api", "le"}) {
		t.Errorf("grouping %v", grouping)
	}
}
