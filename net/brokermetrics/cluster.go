package brokermetrics

import (
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/group"
	"github.com/samsa-broker/samsa/coordinator/metadata"
	"github.com/samsa-broker/samsa/engine"
	"github.com/samsa-broker/samsa/replication"
)

// Sources are what the cluster collectors read at scrape time, from any goroutine.
type Sources struct {
	NodeID int32
	// Image is the image the broker answers from and its metadata offset.
	Image func() (uint64, *metadata.Image)
	// Replicas is the replica manager (nil: the leader counts come from the image).
	Replicas *replication.Manager
	// ControllerID is the active controller's id (-1: unknown).
	ControllerID func() int32
	// MetadataHighWatermark is the metadata log's high watermark, the last committed
	// offset + 1 (nil: not known, and no lag is exported).
	MetadataHighWatermark func() uint64
	// Groups is the group coordinator of this node (nil, or it returns nil: no
	// group series).
	Groups func() *group.Coordinator
	// Engine holds the logs whose high watermarks the group lag is taken from.
	Engine *engine.Manager
	// Topics, if not nil, has the series of topics the image no longer holds dropped
	// at each image walk.
	Topics *Topics
}

// clusterCollector exports the cluster's state as this broker sees it, computed at
// scrape time from the image and the replica manager's Stats (Kafka's JMX names in
// brackets):
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
//	samsa_metadata_applied_offset            the image's metadata offset [last-applied-record-offset]
//	samsa_metadata_offset_lag                the committed metadata offset minus the applied one [last-applied-record-lag] (when the high watermark is known)
//
// The image-wide counts walk every partition, so a scrape's result is kept for a
// second.
type clusterCollector struct {
	s Sources

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

// RegisterCluster registers with reg (nil: nothing is registered) the collectors of
// the cluster's state and of the groups this node coordinates, read from s.
func RegisterCluster(reg prometheus.Registerer, s Sources) {
	if reg == nil {
		return
	}
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("samsa_"+name, help, labels, nil)
	}
	c := &clusterCollector{s: s,
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
	reg.MustRegister(&groupCollector{s: s,
		committed: d("group_committed_offset", "The group's committed offset of the partition (groups this node coordinates).", "group", "topic", "partition"),
		lag:       d("group_lag", "The partition's high watermark minus the group's committed offset, for partitions with a log on this node [kafka-consumer-groups LAG].", "group", "topic", "partition"),
		members:   d("group_members", "Members of the group (groups this node coordinates).", "group", "state"),
	})
}

// groupCollector exports, at scrape time, the committed offsets and the lag of the
// groups this node coordinates (the groups of the __consumer_offsets partitions it
// leads), as ListGroups and OffsetFetch would answer them:
//
//	samsa_group_committed_offset{group,topic,partition}
//	samsa_group_lag{group,topic,partition}   high watermark - committed offset, at least 0
//	samsa_group_members{group,state}
//
// The lag is computed only for partitions whose log is on this node (the high
// watermark of this replica, which on a follower may trail the leader's): a group
// committing offsets of a partition this node holds no replica of has its committed
// offset exported without a lag series. The lag of a partition without a committed
// offset is not exported (Kafka's tool prints "-").
type groupCollector struct {
	s                       Sources
	committed, lag, members *prometheus.Desc
}

// Describe implements prometheus.Collector.
func (c *groupCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.committed
	ch <- c.lag
	ch <- c.members
}

// Collect implements prometheus.Collector.
func (c *groupCollector) Collect(ch chan<- prometheus.Metric) {
	if c.s.Groups == nil {
		return
	}
	co := c.s.Groups()
	if co == nil {
		return
	}
	lreq := kmsg.NewPtrListGroupsRequest()
	lreq.Version = 4
	for _, g := range co.ListGroups(lreq).Groups {
		dreq := kmsg.NewPtrDescribeGroupsRequest()
		dreq.Groups = []string{g.Group}
		if dr := co.DescribeGroups(dreq); len(dr.Groups) == 1 && dr.Groups[0].ErrorCode == 0 {
			ch <- prometheus.MustNewConstMetric(c.members, prometheus.GaugeValue, float64(len(dr.Groups[0].Members)), g.Group, g.GroupState)
		}
		freq := kmsg.NewPtrOffsetFetchRequest()
		freq.Version, freq.Group, freq.Topics = 7, g.Group, nil
		fr := co.OffsetFetch(freq)
		if fr.ErrorCode != 0 {
			continue
		}
		for _, t := range fr.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode != 0 || p.Offset < 0 {
					continue
				}
				part := strconv.Itoa(int(p.Partition))
				ch <- prometheus.MustNewConstMetric(c.committed, prometheus.GaugeValue, float64(p.Offset), g.Group, t.Topic, part)
				if l := c.s.Engine.Log(engine.TopicPartition{Topic: t.Topic, Partition: p.Partition}); l != nil {
					ch <- prometheus.MustNewConstMetric(c.lag, prometheus.GaugeValue, float64(max(l.HighWatermark()-p.Offset, 0)), g.Group, t.Topic, part)
				}
			}
		}
	}
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
	s := &c.s
	off, _ := s.Image()
	ic := c.counts()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	if s.Replicas != nil {
		st := s.Replicas.Stats()
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
	if s.ControllerID != nil && s.ControllerID() == s.NodeID {
		active = 1
	}
	gauge(c.active, active)
	gauge(c.applied, float64(off))
	if s.MetadataHighWatermark != nil {
		if hw := s.MetadataHighWatermark(); hw > off+1 {
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
		c.at, c.last = now, c.imageCounts()
	}
	return c.last
}

func (c *clusterCollector) imageCounts() imageCounts {
	_, im := c.s.Image()
	var ic imageCounts
	for _, bi := range im.Brokers() {
		if bi.Fenced {
			ic.fenced++
		} else {
			ic.unfenced++
		}
	}
	if c.s.Topics != nil {
		c.s.Topics.forget(func(topic string) bool { _, ok := im.Topic(topic); return ok })
	}
	for _, t := range im.Topics() {
		for i := range t.Partitions {
			p := &t.Partitions[i]
			if p.Leader < 0 {
				ic.offline++
			}
			if p.Leader == c.s.NodeID {
				ic.leaders++
				if len(p.ISR) < len(p.Replicas) && !slices.Equal(p.ISR, p.Replicas) {
					ic.underReplicated++
				}
			}
		}
	}
	return ic
}
