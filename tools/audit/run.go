package audit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/samsa-broker/samsa/tools/chaos"
)

// DefaultTopic is the canary topic. Names that start with "__" are Kafka's internal
// topics, so the canary's does not.
const DefaultTopic = "samsa-audit-canary"

// ErrSetup is wrapped by the errors that stop an audit before it starts: no cluster,
// no topic, a bad configuration. Run returns anomalies in its Report, never as errors.
var ErrSetup = errors.New("audit: cannot start")

// Config is one audit run's configuration.
type Config struct {
	// Client holds the options every client of the audit gets: kgo.SeedBrokers and the
	// security settings (TLS, SASL).
	Client []kgo.Opt
	// Topic is the canary topic, created when missing (DefaultTopic when empty).
	Topic string
	// Partitions is the new topic's partition count (3 when 0); an existing topic
	// keeps its own. Its replication factor is min(3, brokers).
	Partitions int32
	// Rate is the records per second per partition of each producer (2 when 0): the
	// idempotent producer sends one record to every partition Rate times a second, the
	// transactional one runs Rate transactions a second, each one record per
	// partition, and aborts one in five.
	Rate float64
	// Duration bounds production (0: until ctx is done). Either way the readers then
	// drain and the final verdict is judged.
	Duration time.Duration
	// ReportInterval is how often a verdict line is printed while running (0: only the
	// final one).
	ReportInterval time.Duration
	// Horizon and MaxWindow: Options of the checker.
	Horizon   time.Duration
	MaxWindow int
	// Drain bounds the wait, after production stops, for the readers to return what
	// they are owed (30 s when 0); it ends as soon as nothing is owed.
	Drain time.Duration
	// Out receives the verdict lines and the anomalies as they are found.
	Out io.Writer
	// Log receives the clients' errors (rate-limited) and the run's notes.
	Log *slog.Logger
	// Registerer, when set, gets the audit's metrics (metrics.go).
	Registerer prometheus.Registerer
	// Abort, when closed, cuts the drain short (a second Ctrl-C).
	Abort <-chan struct{}
}

func (cfg *Config) defaults() {
	if cfg.Topic == "" {
		cfg.Topic = DefaultTopic
	}
	if cfg.Partitions <= 0 {
		cfg.Partitions = 3
	}
	if cfg.Rate <= 0 {
		cfg.Rate = 2
	}
	if cfg.Horizon <= 0 {
		cfg.Horizon = DefaultHorizon
	}
	if cfg.Drain <= 0 {
		cfg.Drain = 30 * time.Second
	}
	if cfg.Out == nil {
		cfg.Out = io.Discard
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
}

// auditor is one run: its clients, its checker and the lock that serializes the
// checker's calls (the producers' promises, the readers' polls, the ticks and the
// metrics' scrapes all take mu).
type auditor struct {
	cfg   Config
	run   string
	group string
	parts []int32
	start time.Time

	mu struct {
		sync.Mutex
		c       *Checker
		foreign int64 // records of other runs or not canary records
	}
	m    *metrics
	warn *warner
}

func (a *auditor) now() time.Duration { return time.Since(a.start) }

// Run audits the cluster the config's clients reach: it sets up the canary topic,
// produces and reads until Duration passes or ctx is done, drains, and returns the
// final report (Report.Valid). The verdict lines go to Out as it runs. An error is
// returned only when the audit could not run (ErrSetup) or its metrics could not be
// registered.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg.defaults()
	if strings.HasPrefix(cfg.Topic, "__") {
		return nil, fmt.Errorf("%w: topic %q: names starting with \"__\" are internal topics'", ErrSetup, cfg.Topic)
	}
	a := &auditor{cfg: cfg, warn: newWarner(cfg.Log)}
	a.run = runID()
	a.group = "samsa-audit-" + a.run

	admCl, err := kgo.NewClient(append(clientOpts(cfg.Client, "admin"), kgo.RetryTimeout(10*time.Second))...)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrSetup, err)
	}
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	setup, err := a.setup(ctx, admCl, adm)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrSetup, err)
	}

	a.start = time.Now()
	a.mu.c = NewChecker(a.parts, Options{Horizon: cfg.Horizon, MaxWindow: cfg.MaxWindow})
	if cfg.Registerer != nil {
		m, err := newMetrics(a, cfg.Registerer)
		if err != nil {
			return nil, err
		}
		a.m = m
		defer m.unregister(cfg.Registerer)
	}
	fmt.Fprintf(cfg.Out, "audit: topic %s: %d partitions, replication factor %d (%s); run %s, group %s; %g records/s per partition from each producer, horizon %s\n",
		cfg.Topic, len(a.parts), setup.rf, setup.how, a.run, a.group, cfg.Rate, cfg.Horizon)

	readCtx, stopReading := context.WithCancel(context.Background())
	defer stopReading()
	readers, err := a.startReaders(readCtx, setup)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrSetup, err)
	}
	// The group joins before the first record: its join is not end-to-end latency.
	select {
	case <-readers.assigned:
	case <-time.After(setupTimeout):
		cfg.Log.Warn("audit: the audit's group member has no partitions yet; producing anyway", "group", a.group, "waited", setupTimeout)
	case <-ctx.Done():
	}
	a.mu.Lock()
	a.mu.c.StartProducing(a.now())
	a.mu.Unlock()
	prodCtx, stopProducing := context.WithCancel(context.Background())
	defer stopProducing()
	prods, err := a.startProducers(prodCtx)
	if err != nil {
		stopReading()
		readers.wait()
		return nil, fmt.Errorf("%w: %v", ErrSetup, err)
	}

	a.loop(ctx)

	// Production stops; the readers drain; the run is judged.
	stopProducing()
	prods.stop(a.cfg.Drain, cfg.Abort)
	a.mu.Lock()
	a.mu.c.StopProducing(a.now())
	a.mu.Unlock()
	a.drain(cfg.Drain, cfg.Abort)
	stopReading()
	readers.wait()
	a.mu.Lock()
	a.mu.c.Finish(a.now())
	fresh := a.mu.c.TakeNew()
	rep := a.mu.c.Report(a.now())
	a.mu.Unlock()
	a.print(fresh)
	fmt.Fprintln(cfg.Out, rep.Verdict())

	dctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := adm.DeleteGroups(dctx, a.group); err != nil {
		cfg.Log.Warn("audit: deleting the audit's group", "group", a.group, "err", err)
	}
	return &rep, nil
}

// loop ticks the checker every second and prints a verdict every ReportInterval until
// Duration passes or ctx is done.
func (a *auditor) loop(ctx context.Context) {
	var end <-chan time.Time
	if a.cfg.Duration > 0 {
		t := time.NewTimer(a.cfg.Duration)
		defer t.Stop()
		end = t.C
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var report <-chan time.Time
	if a.cfg.ReportInterval > 0 {
		t := time.NewTicker(a.cfg.ReportInterval)
		defer t.Stop()
		report = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-end:
			return
		case <-tick.C:
			a.tick()
		case <-report:
			a.tick()
			a.mu.Lock()
			rep := a.mu.c.Report(a.now())
			a.mu.Unlock()
			fmt.Fprintln(a.cfg.Out, rep.Verdict())
		}
	}
}

func (a *auditor) tick() {
	a.mu.Lock()
	a.mu.c.Tick(a.now())
	fresh := a.mu.c.TakeNew()
	a.mu.Unlock()
	a.print(fresh)
}

func (a *auditor) print(fresh []chaos.Anomaly) {
	for _, an := range fresh {
		fmt.Fprintln(a.cfg.Out, AnomalyLine(an))
	}
}

// drain waits until no reader is owed a record, d passes or abort is closed.
func (a *auditor) drain(d time.Duration, abort <-chan struct{}) {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	poll := time.NewTicker(100 * time.Millisecond)
	defer poll.Stop()
	for {
		a.mu.Lock()
		n := a.mu.c.Outstanding()
		a.mu.Unlock()
		if n == 0 {
			return
		}
		select {
		case <-deadline.C:
			a.cfg.Log.Warn("audit: drain ended with records still owed", "records", n, "drain", d)
			return
		case <-abort:
			return
		case <-poll.C:
		}
	}
}

// clientOpts are the options of one of the audit's clients: the config's, and a client
// id that names its role.
func clientOpts(base []kgo.Opt, role string) []kgo.Opt {
	return append(append([]kgo.Opt(nil), base...), kgo.ClientID("samsa-audit-"+role))
}

func runID() string {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("audit: crypto/rand: " + err.Error()) // never fails on Linux
	}
	return hex.EncodeToString(b[:])
}

// warner logs a client error of one kind at most every 10 seconds, with how many
// there were since.
type warner struct {
	log *slog.Logger
	mu  struct {
		sync.Mutex
		last map[string]time.Time
		n    map[string]int
	}
}

func newWarner(log *slog.Logger) *warner {
	w := &warner{log: log}
	w.mu.last = map[string]time.Time{}
	w.mu.n = map[string]int{}
	return w
}

func (w *warner) warn(kind string, err error) {
	w.mu.Lock()
	w.mu.n[kind]++
	n := w.mu.n[kind]
	if time.Since(w.mu.last[kind]) < 10*time.Second {
		w.mu.Unlock()
		return
	}
	w.mu.last[kind] = time.Now()
	w.mu.n[kind] = 0
	w.mu.Unlock()
	w.log.Warn("audit: client error", "client", kind, "err", err, "errors", n)
}
