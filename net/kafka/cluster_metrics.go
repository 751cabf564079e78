package kafka

import (
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/samsa-broker/samsa/replication"
)

// clusterCollector exports the cluster's state as this broker sees it, computed at
// scrape time from the published image and the replica manager's Stats (Kafka's JMX
// names in brackets):
//
//	samsa_replica_leader_partitions          partitions this node leads [ReplicaManager LeaderCount]
//	samsa_replica_under_replicated_partitions led partitions whose ISR is below the replicas [UnderReplicatedPartitions]
//	samsa_replica_under_min_isr_partitions   led partitions whose ISR is below min.insync.replicas [UnderMinIsrPartitionCount]
//	samsa_replica_isr_shrinks_total          ISR shrinks this node proposed and the controller accepted [IsrShrinksPerSec]
//	samsa_replica_isr_expands_total          ISR expands, likewise [IsrExpandsPerSec]
//	samsa_replica_follower_lag_max           the largest lag of a follower of a led partition, in records [ReplicaFetcherManager MaxLag]
//	samsa_cluster_offline_partitions         partitions without a leader [KafkaController OfflinePartitionsCount]
//	samsa_cluster_brokers                    registered brokers, by state (unfenced, fenced)
//	samsa_controller_active                  1 when the active controller is this node [ActiveControllerCount]
//	samsa_metadata_applied_offset            the published image's metadata offset [last-applied-record-offset]
//	samsa_metadata_offset_lag                the committed metadata offset minus the applied one [last-applied-record-lag] (when the view knows the committed offset)
//
// The image-wide counts walk every partition, so a scrape's result is kept for a
// second.
type clusterCollector struct {
	b *Broker

	leaders, underReplicated, underMinISR *prometheus.Desc
	shrinks, expands, followerLag         *prometheus.Desc
	offline, brokers, active              *prometheus.Desc
	applied, lag                          *prometheus.Desc

	mu   sync.Mutex
	at   time.Time
	last imageCounts
}

type imageCounts struct {
	offline, unfenced, fenced int
	// leaders, underReplicated, underMinISR from the image, for a broker without a
	// replica manager.
	leaders, underReplicated int
}

// highWatermarkView is a MetadataView that knows the metadata log's high watermark,
// the last committed offset + 1 (the metadata follower does, from its fetches).
type highWatermarkView interface {
	HighWatermark() uint64
}

func (b *Broker) registerClusterMetrics(reg prometheus.Registerer) {
	if reg == nil {
		return
	}
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("samsa_"+name, help, labels, nil)
	}
	c := &clusterCollector{b: b,
		leaders:         d("replica_leader_partitions", "Partitions this node leads."),
		underReplicated: d("replica_under_replicated_partitions", "Partitions this node leads whose ISR is smaller than their replica set."),
		underMinISR:     d("replica_under_min_isr_partitions", "Partitions this node leads whose ISR is smaller than min.insync.replicas."),
		shrinks:         d("replica_isr_shrinks_total", "ISR shrinks this node proposed that the controller accepted."),
		expands:         d("replica_isr_expands_total", "ISR expands this node proposed that the controller accepted."),
		followerLag:     d("replica_follower_lag_max", "The largest lag, in records, of a follower of a partition this node leads."),
		offline:         d("cluster_offline_partitions", "Partitions without a leader in this broker's metadata image."),
		brokers:         d("cluster_brokers", "Registered brokers in this broker's metadata image.", "state"),
		active:          d("controller_active", "1 when this node is the active controller."),
		applied:         d("metadata_applied_offset", "The metadata offset of this broker's published image."),
		lag:             d("metadata_offset_lag", "The committed metadata offset minus the one this broker applied."),
	}
	reg.MustRegister(c)
}

// Describe implements prometheus.Collector.
func (c *clusterCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.leaders, c.underReplicated, c.underMinISR, c.shrinks, c.expands,
		c.followerLag, c.offline, c.brokers, c.active, c.applied, c.lag} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *clusterCollector) Collect(ch chan<- prometheus.Metric) {
	b := c.b
	off := b.meta.Offset()
	ic := c.counts()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	if b.repl != nil {
		st := b.repl.Stats()
		gauge(c.leaders, float64(st.Leaders))
		gauge(c.underReplicated, float64(st.UnderReplicated))
		gauge(c.underMinISR, float64(st.UnderMinISR))
		ch <- prometheus.MustNewConstMetric(c.shrinks, prometheus.CounterValue, float64(st.ISRShrinks))
		ch <- prometheus.MustNewConstMetric(c.expands, prometheus.CounterValue, float64(st.ISRExpands))
		gauge(c.followerLag, float64(maxFollowerLag(st.Lags)))
	} else {
		gauge(c.leaders, float64(ic.leaders))
		gauge(c.underReplicated, float64(ic.underReplicated))
	}
	gauge(c.offline, float64(ic.offline))
	gauge(c.brokers, float64(ic.unfenced), "unfenced")
	gauge(c.brokers, float64(ic.fenced), "fenced")
	active := 0.0
	if b.controllerID() == b.cfg.NodeID {
		active = 1
	}
	gauge(c.active, active)
	gauge(c.applied, float64(off))
	if v, ok := b.source.(highWatermarkView); ok {
		if hw := v.HighWatermark(); hw > off+1 {
			gauge(c.lag, float64(hw-1-off))
		} else {
			gauge(c.lag, 0)
		}
	}
}

func maxFollowerLag(lags []replication.FollowerLag) int64 {
	var m int64
	for _, l := range lags {
		m = max(m, l.Lag)
	}
	return m
}

// counts walks the image (at most once a second).
func (c *clusterCollector) counts() imageCounts {
	c.mu.Lock()
	defer c.mu.Unlock()
	if now := time.Now(); c.at.IsZero() || now.Sub(c.at) >= time.Second {
		c.at, c.last = now, c.b.imageCounts()
	}
	return c.last
}

func (b *Broker) imageCounts() imageCounts {
	im := b.meta.Image()
	var ic imageCounts
	for _, bi := range im.Brokers() {
		if bi.Fenced {
			ic.fenced++
		} else {
			ic.unfenced++
		}
	}
	for _, t := range im.Topics() {
		for i := range t.Partitions {
			p := &t.Partitions[i]
			if p.Leader < 0 {
				ic.offline++
			}
			if p.Leader == b.cfg.NodeID {
				ic.leaders++
				if len(p.ISR) < len(p.Replicas) && !slices.Equal(p.ISR, p.Replicas) {
					ic.underReplicated++
				}
			}
		}
	}
	return ic
}
