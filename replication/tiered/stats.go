package tiered

import (
	"sort"
	"sync"
	"sync/atomic"

	"github.com/samsa-broker/samsa/engine"
)

// TopicStats are a topic's counts of tiered storage's work since the manager
// started, with Kafka's names (BrokerTopicMetrics).
type TopicStats struct {
	Topic        string
	CopyBytes    int64 // bytes of the segments copied [RemoteCopyBytesPerSec]
	CopyErrors   int64 // copies that failed [RemoteCopyErrorsPerSec]
	FetchBytes   int64 // record bytes read from remote storage [RemoteFetchBytesPerSec]
	FetchErrors  int64 // reads from remote storage that failed [RemoteFetchErrorsPerSec]
	DeleteErrors int64 // deletions of copies that failed [RemoteDeleteErrorsPerSec]
	// FetchThrottled are consumers' fetches that read nothing from remote
	// storage, over remote.log.manager.fetch.max.bytes.per.second.
	FetchThrottled int64
	// FetchExpires are consumers' fetches answered without their remote
	// read, not done within remote.fetch.max.wait.ms [DelayedRemoteFetchMetrics ExpiresPerSec].
	FetchExpires int64
}

// PartitionStats are a tiered partition's sizes as of the last task.
type PartitionStats struct {
	engine.TopicPartition
	RemoteLogSizeBytes int64 // bytes of its finished copies [RemoteLogSizeBytes]
	CopyLagBytes       int64 // bytes of its sealed segments not copied yet, on the leader [RemoteCopyLagBytes]
}

type topicCounters struct {
	copyBytes, copyErrors, fetchBytes, fetchErrors, deleteErrors, fetchThrottled, fetchExpires atomic.Int64
}

// stats is the manager's counters, by topic.
type stats struct {
	byTopic sync.Map // topic -> *topicCounters
}

func (s *stats) topic(name string) *topicCounters {
	if c, ok := s.byTopic.Load(name); ok {
		return c.(*topicCounters)
	}
	c, _ := s.byTopic.LoadOrStore(name, &topicCounters{})
	return c.(*topicCounters)
}

// Stats returns the counts per topic and the sizes per tiered partition
// this node holds, each sorted.
func (m *Manager) Stats() ([]TopicStats, []PartitionStats) {
	var ts []TopicStats
	m.stats.byTopic.Range(func(k, v any) bool {
		c := v.(*topicCounters)
		ts = append(ts, TopicStats{Topic: k.(string), CopyBytes: c.copyBytes.Load(), CopyErrors: c.copyErrors.Load(),
			FetchBytes: c.fetchBytes.Load(), FetchErrors: c.fetchErrors.Load(), DeleteErrors: c.deleteErrors.Load(),
			FetchThrottled: c.fetchThrottled.Load(), FetchExpires: c.fetchExpires.Load()})
		return true
	})
	sort.Slice(ts, func(i, j int) bool { return ts[i].Topic < ts[j].Topic })
	var ps []PartitionStats
	m.mu.Lock()
	for tp, st := range m.parts {
		if m.cfg.Replicas.Partition(tp) == nil {
			continue
		}
		var size int64
		for _, c := range st.copies {
			size += c.SegmentSize
		}
		ps = append(ps, PartitionStats{TopicPartition: tp, RemoteLogSizeBytes: size, CopyLagBytes: st.copyLag})
	}
	m.mu.Unlock()
	sort.Slice(ps, func(i, j int) bool {
		if ps[i].Topic != ps[j].Topic {
			return ps[i].Topic < ps[j].Topic
		}
		return ps[i].Partition < ps[j].Partition
	})
	return ts, ps
}

// ChunkCacheStats returns the chunk cache's counts (Aiven's chunk cache
// metrics: hits, misses, evictions, its size).
func (m *Manager) ChunkCacheStats() ChunkCacheStats { return m.cache.Stats() }
