package audit

import (
	"errors"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// The audit's metrics, in Prometheus' text format on --metrics-listen:
//
//	samsa_audit_records_produced_total{producer}       records handed to each producer
//	samsa_audit_records_acknowledged_total{producer}   produces answered with an offset
//	samsa_audit_records_failed_total{producer}         produces the client gave up on
//	samsa_audit_records_read_total{reader}             canary records returned (re-reads too)
//	samsa_audit_records_foreign_total                  records of the topic not of this run (not judged)
//	samsa_audit_transactions_total{outcome}            committed, aborted, unknown
//	samsa_audit_anomalies_total{kind}                  lost, duplicated, reordered, aborted-read, phantom
//	samsa_audit_unseen_records                         owed, overdue, not passed (a gauge)
//	samsa_audit_window_records                         records the checker holds (its memory)
//	samsa_audit_no_ack_seconds{partition}              time since the partition's last acknowledgement
//	samsa_audit_longest_no_ack_seconds{partition}      the longest such time of the run
//	samsa_audit_valid                                  1 while no anomaly and no unseen record
//	samsa_audit_e2e_latency_seconds{reader}            histogram: send to a reader's first read
//	samsa_audit_produce_latency_seconds{producer}      histogram: send to acknowledgement
//	samsa_audit_client_errors_total{client}            errors the clients returned
//
// producer is idempotent or transactional; reader group or read_committed.
type metrics struct {
	e2e     [numReaders]prometheus.Observer
	produce [numProducers]prometheus.Observer
	errors  *prometheus.CounterVec
	all     []prometheus.Collector
}

var (
	descProduced = prometheus.NewDesc("samsa_audit_records_produced_total", "Canary records handed to the producer.", []string{"producer"}, nil)
	descAcked    = prometheus.NewDesc("samsa_audit_records_acknowledged_total", "Canary records whose produce was answered with an offset.", []string{"producer"}, nil)
	descFailed   = prometheus.NewDesc("samsa_audit_records_failed_total", "Canary records the producer gave up on (they may or may not be in the log).", []string{"producer"}, nil)
	descRead     = prometheus.NewDesc("samsa_audit_records_read_total", "Canary records of this run returned by the reader, re-reads included.", []string{"reader"}, nil)
	descForeign  = prometheus.NewDesc("samsa_audit_records_foreign_total", "Records of the canary topic that are not this run's canary records (not judged).", nil, nil)
	descTxns     = prometheus.NewDesc("samsa_audit_transactions_total", "Transactions of the canary's transactional producer by outcome.", []string{"outcome"}, nil)
	descAnom     = prometheus.NewDesc("samsa_audit_anomalies_total", "Anomalies found, by kind.", []string{"kind"}, nil)
	descUnseen   = prometheus.NewDesc("samsa_audit_unseen_records", "Acknowledged records a reader has not returned within the horizon and not passed.", nil, nil)
	descWindow   = prometheus.NewDesc("samsa_audit_window_records", "Records the checker holds.", nil, nil)
	descNoAck    = prometheus.NewDesc("samsa_audit_no_ack_seconds", "Time since the partition's last acknowledgement (0 once production stopped).", []string{"partition"}, nil)
	descLongest  = prometheus.NewDesc("samsa_audit_longest_no_ack_seconds", "The longest time of the run without an acknowledgement in the partition.", []string{"partition"}, nil)
	descValid    = prometheus.NewDesc("samsa_audit_valid", "1 while the audit has found no anomaly and no unseen record, else 0.", nil, nil)
)

// collector reads the checker's counts at each scrape.
type collector struct{ a *auditor }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descProduced, descAcked, descFailed, descRead, descForeign, descTxns, descAnom, descUnseen, descWindow, descNoAck, descLongest, descValid} {
		ch <- d
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	c.a.mu.Lock()
	r := c.a.mu.c.Report(c.a.now())
	foreign := c.a.mu.foreign
	c.a.mu.Unlock()
	counter := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	for p := range numProducers {
		counter(descProduced, r.Produced[p], p.String())
		counter(descAcked, r.Acked[p], p.String())
		counter(descFailed, r.Failed[p], p.String())
	}
	for rd := range numReaders {
		counter(descRead, r.Read[rd], rd.String())
	}
	counter(descForeign, foreign)
	for _, o := range []Outcome{Committed, Aborted, Unknown} {
		counter(descTxns, r.Txns[o], o.String())
	}
	for _, k := range Kinds {
		counter(descAnom, r.Counts[k], k)
	}
	gauge(descUnseen, float64(r.Unseen))
	gauge(descWindow, float64(r.Window))
	for _, na := range r.NoAck {
		p := strconv.Itoa(int(na.P))
		gauge(descNoAck, na.Current.Seconds(), p)
		gauge(descLongest, na.Longest.Seconds(), p)
	}
	valid := 0.0
	if r.Valid() {
		valid = 1
	}
	gauge(descValid, valid)
}

// latencyBuckets: 1 ms to about 65 s.
var latencyBuckets = prometheus.ExponentialBuckets(0.001, 2, 17)

func newMetrics(a *auditor, reg prometheus.Registerer) (*metrics, error) {
	e2e := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "samsa_audit_e2e_latency_seconds", Help: "From a canary record's send to the reader's first read of it.", Buckets: latencyBuckets,
	}, []string{"reader"})
	produce := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "samsa_audit_produce_latency_seconds", Help: "From a canary record's send to its acknowledgement.", Buckets: latencyBuckets,
	}, []string{"producer"})
	errs := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "samsa_audit_client_errors_total", Help: "Errors returned to the audit's clients (produce, fetch, transactions).",
	}, []string{"client"})
	m := &metrics{errors: errs, all: []prometheus.Collector{collector{a}, e2e, produce, errs}}
	for r := range numReaders {
		m.e2e[r] = e2e.WithLabelValues(r.String())
	}
	for p := range numProducers {
		m.produce[p] = produce.WithLabelValues(p.String())
	}
	var done []prometheus.Collector
	for _, c := range m.all {
		if err := reg.Register(c); err != nil {
			for _, d := range done {
				reg.Unregister(d)
			}
			return nil, errors.Join(errors.New("audit: registering metrics"), err)
		}
		done = append(done, c)
	}
	return m, nil
}

func (m *metrics) unregister(reg prometheus.Registerer) {
	for _, c := range m.all {
		reg.Unregister(c)
	}
}
