package broker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/configs"
	"github.com/samsa-broker/samsa/coordinator/metadata"
	"github.com/samsa-broker/samsa/coordinator/remotelog"
	"github.com/samsa-broker/samsa/engine/remote"
	"github.com/samsa-broker/samsa/replication/tiered"
)

// tieredState is tiered storage on this broker (KIP-405), built when
// remote.log.storage.system.enable is true: the remote storage manager over the
// S3-compatible store of the rsm.config.* keys (engine/remote), the remote log
// metadata manager over __remote_log_metadata (coordinator/remotelog), and the remote
// log manager (replication/tiered), which the replica manager's partitions reach
// through replication.RemoteLog. The metadata topic is created through the active
// controller when the remote log manager first meets a tiered partition here (retried
// every task until it exists): by then a cluster's brokers are up, and the topic's
// replication factor (capped at the live brokers) counts them all. A broker with no
// replica of a metadata partition appends to it and reads it at its leader, over
// Deps.Peer (forwardRemoteLogMetadata, fetchRemoteLogMetadata).
//
// Keys read when the broker starts (Kafka's names and defaults):
// remote.log.storage.system.enable (false), remote.log.manager.task.interval.ms (30000),
// remote.log.manager.copy.max.bytes.per.second (unlimited),
// remote.log.manager.fetch.max.bytes.per.second (unlimited), remote.fetch.max.wait.ms
// (500), remote.log.reader.threads (10), remote.log.storage.manager.impl.prefix
// (rsm.config.) and the storage manager's keys under it (with the chunk cache's,
// fetch.chunk.cache.*), rlmm.config.remote.log.metadata.topic.{num.partitions (50),
// replication.factor (3), min.isr (2), segment.bytes}.
type tieredState struct {
	meta *remotelog.Manager
	rlm  *tiered.Manager
}

// startTiered builds tiered storage if the broker's keys turn it on; nil otherwise.
func (b *Broker) startTiered(im *metadata.Image) (*tieredState, error) {
	l := b.layers(im, "")
	if !strings.EqualFold(strings.TrimSpace(l.BrokerValue(configs.RemoteStorageSystemKey)), "true") {
		return nil, nil
	}
	rcfg, notices, err := remote.ParseConfig(b.cfg.Static, os.Getenv)
	for _, n := range notices {
		b.log.Info("tiered storage key without effect", "key", n.Key, "why", n.Reason)
	}
	if err != nil {
		return nil, fmt.Errorf("broker: %s is true but the remote storage manager's keys are not usable: %w", configs.RemoteStorageSystemKey, err)
	}
	sm, err := remote.New(rcfg)
	if err != nil {
		return nil, err
	}
	var cache *tiered.ChunkCache // nil: the remote log manager's built-in one
	if cc := rcfg.ChunkCache; cc.Class != "" {
		if cache, err = tiered.NewChunkCache(tiered.ChunkCacheConfig{Path: cc.Path, Size: cc.Size, Retention: cc.Retention}); err != nil {
			return nil, fmt.Errorf("broker: the chunk cache (fetch.chunk.cache.*): %w", err)
		}
	}
	s := &tieredState{}
	s.meta = remotelog.New(remotelog.Config{Replicas: b.repl, Partitions: func() int32 {
		if t, ok := b.meta.Image().Topic(remotelog.Topic); ok {
			return int32(len(t.Partitions))
		}
		return 0
	}, Forward: b.forwardRemoteLogMetadata, Fetch: b.fetchRemoteLogMetadata})
	s.rlm = tiered.New(tiered.Config{
		NodeID: b.cfg.NodeID, Replicas: b.repl, Storage: sm, Metadata: s.meta,
		Interval:            time.Duration(b.groupInt(im, "remote.log.manager.task.interval.ms", 30000)) * time.Millisecond,
		CopyBytesPerSecond:  b.groupInt(im, "remote.log.manager.copy.max.bytes.per.second", 0),
		FetchBytesPerSecond: b.groupInt(im, "remote.log.manager.fetch.max.bytes.per.second", 0),
		FetchMaxWait:        time.Duration(b.groupInt(im, "remote.fetch.max.wait.ms", 500)) * time.Millisecond,
		ReaderThreads:       int(b.groupInt(im, "remote.log.reader.threads", 10)),
		ChunkCache:          cache, ChunkSize: int64(rcfg.ChunkSize), PrefetchBytes: rcfg.ChunkCache.PrefetchMaxSize,
		EnsureMetadata: func(ctx context.Context) error {
			ctx, cancel := context.WithTimeout(ctx, forwardTimeout)
			defer cancel()
			return b.topics.EnsureInternal(ctx, remotelog.Topic)
		},
		Logger: b.log.With("component", "tiered-storage"),
	})
	b.repl.SetRemoteLog(s.rlm)
	if b.cfg.Registerer != nil {
		if err := b.cfg.Registerer.Register(tieredCollector{s.rlm}); err != nil {
			return nil, fmt.Errorf("broker: tiered storage metrics: %w", err)
		}
	}
	s.rlm.Start()
	b.log.Info("tiered storage on", "bucket", rcfg.Bucket, "endpoint", rcfg.Endpoint)
	return s, nil
}

// remoteLogMetadataLeader returns the leader of __remote_log_metadata-p, another
// broker, and the topic's id.
func (b *Broker) remoteLogMetadataLeader(p int32) (int32, metadata.UUID, error) {
	if b.peer == nil {
		return 0, metadata.UUID{}, errNoPeer
	}
	t, ok := b.meta.Image().Topic(remotelog.Topic)
	if !ok || int(p) >= len(t.Partitions) {
		return 0, metadata.UUID{}, fmt.Errorf("broker: no %s-%d in the image", remotelog.Topic, p)
	}
	leader := t.Partitions[p].Leader
	if leader < 0 || leader == b.cfg.NodeID {
		return 0, metadata.UUID{}, fmt.Errorf("broker: %s-%d has no leader on another broker (leader %d)", remotelog.Topic, p, leader)
	}
	return leader, t.ID, nil
}

// forwardRemoteLogMetadata appends batch to __remote_log_metadata-p at its leader on
// another broker (remotelog.Config.Forward): a Produce with acks=all over Deps.Peer, as
// Kafka's metadata manager's producer sends it. It returns the batch's base offset.
func (b *Broker) forwardRemoteLogMetadata(ctx context.Context, p int32, batch []byte) (int64, error) {
	leader, id, err := b.remoteLogMetadataLeader(p)
	if err != nil {
		return 0, err
	}
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, int32(forwardTimeout.Milliseconds())
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic, rt.TopicID = remotelog.Topic, id // by name up to v12, by id from v13
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = p, batch
	rt.Partitions = []kmsg.ProduceRequestTopicPartition{rp}
	req.Topics = []kmsg.ProduceRequestTopic{rt}
	ctx, cancel := context.WithTimeout(ctx, forwardTimeout)
	defer cancel()
	resp, err := b.peer(ctx, leader, req)
	if err != nil {
		return 0, err
	}
	pr, ok := resp.(*kmsg.ProduceResponse)
	if !ok || len(pr.Topics) != 1 || len(pr.Topics[0].Partitions) != 1 {
		return 0, errors.New("broker: a Produce to __remote_log_metadata answered by another kind")
	}
	ap := pr.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(ap.ErrorCode); err != nil {
		return 0, fmt.Errorf("broker: appending to %s-%d at broker %d: %w", remotelog.Topic, p, leader, err)
	}
	return ap.BaseOffset, nil
}

// fetchRemoteLogMetadata reads __remote_log_metadata-p from offset at its leader on
// another broker (remotelog.Config.Fetch), for a broker with no replica of it: a
// sessionless Fetch over Deps.Peer as Kafka's metadata manager's consumer sends it
// (replica id -1, READ_UNCOMMITTED, so up to the high watermark; no wait).
func (b *Broker) fetchRemoteLogMetadata(ctx context.Context, p int32, offset int64, maxBytes int32) (remotelog.FetchResult, error) {
	var res remotelog.FetchResult
	leader, id, err := b.remoteLogMetadataLeader(p)
	if err != nil {
		return res, err
	}
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID, req.ReplicaState.ID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = -1, -1, 0, 1, maxBytes
	req.IsolationLevel, req.SessionID, req.SessionEpoch = 0, 0, -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = remotelog.Topic, id // by name up to v12, by id from v13
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p, offset, maxBytes
	rp.CurrentLeaderEpoch, rp.LastFetchedEpoch, rp.LogStartOffset = -1, -1, -1
	rt.Partitions = []kmsg.FetchRequestTopicPartition{rp}
	req.Topics = []kmsg.FetchRequestTopic{rt}
	ctx, cancel := context.WithTimeout(ctx, forwardTimeout)
	defer cancel()
	resp, err := b.peer(ctx, leader, req)
	if err != nil {
		return res, err
	}
	fr, ok := resp.(*kmsg.FetchResponse)
	if !ok {
		return res, errors.New("broker: a Fetch of __remote_log_metadata answered by another kind")
	}
	if err := kerr.ErrorForCode(fr.ErrorCode); err != nil {
		return res, fmt.Errorf("broker: reading %s-%d at broker %d: %w", remotelog.Topic, p, leader, err)
	}
	if len(fr.Topics) != 1 || len(fr.Topics[0].Partitions) != 1 {
		return res, fmt.Errorf("broker: a Fetch of %s-%d answered %d topics", remotelog.Topic, p, len(fr.Topics))
	}
	fp := fr.Topics[0].Partitions[0]
	res = remotelog.FetchResult{Records: fp.RecordBatches, HighWatermark: fp.HighWatermark, LogStartOffset: fp.LogStartOffset}
	switch err := kerr.ErrorForCode(fp.ErrorCode); {
	case errors.Is(err, kerr.OffsetOutOfRange):
		return res, fmt.Errorf("broker: reading %s-%d at %d at broker %d: %w", remotelog.Topic, p, offset, leader, remotelog.ErrOffsetOutOfRange)
	case err != nil:
		return res, fmt.Errorf("broker: reading %s-%d at broker %d: %w", remotelog.Topic, p, leader, err)
	}
	return res, nil
}

func (s *tieredState) close() {
	if s != nil {
		s.rlm.Close()
	}
}

// tieredCollector exports the remote log manager's counts at scrape time, with
// Kafka's names in the help (BrokerTopicMetrics, RemoteLogManager):
//
//	samsa_remote_copy_bytes_total{topic}              [RemoteCopyBytesPerSec]
//	samsa_remote_copy_errors_total{topic}             [RemoteCopyErrorsPerSec]
//	samsa_remote_fetch_bytes_total{topic}             [RemoteFetchBytesPerSec]
//	samsa_remote_fetch_errors_total{topic}            [RemoteFetchErrorsPerSec]
//	samsa_remote_delete_errors_total{topic}           [RemoteDeleteErrorsPerSec]
//	samsa_remote_log_size_bytes{topic,partition}      [RemoteLogSizeBytes]
//	samsa_remote_copy_lag_bytes{topic,partition}      [RemoteCopyLagBytes]
//	samsa_remote_fetch_throttled_total{topic}         fetches over remote.log.manager.fetch.max.bytes.per.second
//	samsa_remote_fetch_expires_total{topic}           [DelayedRemoteFetchMetrics ExpiresPerSec]
//	samsa_remote_chunk_cache_hits_total               chunk cache (Aiven's fetch.chunk.cache): chunks found,
//	samsa_remote_chunk_cache_misses_total             not found (read from the store),
//	samsa_remote_chunk_cache_evictions_total          dropped by size or retention,
//	samsa_remote_chunk_cache_size_bytes               and the bytes it holds
type tieredCollector struct{ rlm *tiered.Manager }

var (
	descRemoteCopyBytes      = prometheus.NewDesc("samsa_remote_copy_bytes_total", "Bytes of segments copied to remote storage, per topic [RemoteCopyBytesPerSec].", []string{"topic"}, nil)
	descRemoteCopyErrors     = prometheus.NewDesc("samsa_remote_copy_errors_total", "Copies to remote storage that failed, per topic [RemoteCopyErrorsPerSec].", []string{"topic"}, nil)
	descRemoteFetchBytes     = prometheus.NewDesc("samsa_remote_fetch_bytes_total", "Record bytes read from remote storage, per topic [RemoteFetchBytesPerSec].", []string{"topic"}, nil)
	descRemoteFetchErrors    = prometheus.NewDesc("samsa_remote_fetch_errors_total", "Reads from remote storage that failed, per topic [RemoteFetchErrorsPerSec].", []string{"topic"}, nil)
	descRemoteDeleteErrors   = prometheus.NewDesc("samsa_remote_delete_errors_total", "Deletions of copies in remote storage that failed, per topic [RemoteDeleteErrorsPerSec].", []string{"topic"}, nil)
	descRemoteLogSize        = prometheus.NewDesc("samsa_remote_log_size_bytes", "Bytes of a tiered partition's copies in remote storage [RemoteLogSizeBytes].", []string{"topic", "partition"}, nil)
	descRemoteCopyLag        = prometheus.NewDesc("samsa_remote_copy_lag_bytes", "Bytes of a led tiered partition's sealed segments not copied yet [RemoteCopyLagBytes].", []string{"topic", "partition"}, nil)
	descRemoteFetchThrottled = prometheus.NewDesc("samsa_remote_fetch_throttled_total", "Consumers' fetches that read nothing from remote storage, over remote.log.manager.fetch.max.bytes.per.second, per topic.", []string{"topic"}, nil)
	descRemoteFetchExpires   = prometheus.NewDesc("samsa_remote_fetch_expires_total", "Consumers' fetches answered without their remote read, not done within remote.fetch.max.wait.ms, per topic [DelayedRemoteFetchMetrics ExpiresPerSec].", []string{"topic"}, nil)
	descChunkCacheHits       = prometheus.NewDesc("samsa_remote_chunk_cache_hits_total", "Chunks of remote segments found in the chunk cache (fetch.chunk.cache).", nil, nil)
	descChunkCacheMisses     = prometheus.NewDesc("samsa_remote_chunk_cache_misses_total", "Chunks of remote segments not in the chunk cache, read from remote storage.", nil, nil)
	descChunkCacheEvicts     = prometheus.NewDesc("samsa_remote_chunk_cache_evictions_total", "Chunks dropped from the chunk cache by its size or retention.", nil, nil)
	descChunkCacheSize       = prometheus.NewDesc("samsa_remote_chunk_cache_size_bytes", "Bytes held by the chunk cache.", nil, nil)
)

func (c tieredCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRemoteCopyBytes, descRemoteCopyErrors, descRemoteFetchBytes, descRemoteFetchErrors, descRemoteDeleteErrors, descRemoteLogSize, descRemoteCopyLag,
		descRemoteFetchThrottled, descRemoteFetchExpires,
		descChunkCacheHits, descChunkCacheMisses, descChunkCacheEvicts, descChunkCacheSize} {
		ch <- d
	}
}

func (c tieredCollector) Collect(ch chan<- prometheus.Metric) {
	ts, ps := c.rlm.Stats()
	for _, t := range ts {
		ch <- prometheus.MustNewConstMetric(descRemoteCopyBytes, prometheus.CounterValue, float64(t.CopyBytes), t.Topic)
		ch <- prometheus.MustNewConstMetric(descRemoteCopyErrors, prometheus.CounterValue, float64(t.CopyErrors), t.Topic)
		ch <- prometheus.MustNewConstMetric(descRemoteFetchBytes, prometheus.CounterValue, float64(t.FetchBytes), t.Topic)
		ch <- prometheus.MustNewConstMetric(descRemoteFetchErrors, prometheus.CounterValue, float64(t.FetchErrors), t.Topic)
		ch <- prometheus.MustNewConstMetric(descRemoteDeleteErrors, prometheus.CounterValue, float64(t.DeleteErrors), t.Topic)
		ch <- prometheus.MustNewConstMetric(descRemoteFetchThrottled, prometheus.CounterValue, float64(t.FetchThrottled), t.Topic)
		ch <- prometheus.MustNewConstMetric(descRemoteFetchExpires, prometheus.CounterValue, float64(t.FetchExpires), t.Topic)
	}
	for _, p := range ps {
		part := strconv.Itoa(int(p.Partition))
		ch <- prometheus.MustNewConstMetric(descRemoteLogSize, prometheus.GaugeValue, float64(p.RemoteLogSizeBytes), p.Topic, part)
		ch <- prometheus.MustNewConstMetric(descRemoteCopyLag, prometheus.GaugeValue, float64(p.CopyLagBytes), p.Topic, part)
	}
	cs := c.rlm.ChunkCacheStats()
	ch <- prometheus.MustNewConstMetric(descChunkCacheHits, prometheus.CounterValue, float64(cs.Hits))
	ch <- prometheus.MustNewConstMetric(descChunkCacheMisses, prometheus.CounterValue, float64(cs.Misses))
	ch <- prometheus.MustNewConstMetric(descChunkCacheEvicts, prometheus.CounterValue, float64(cs.Evictions))
	ch <- prometheus.MustNewConstMetric(descChunkCacheSize, prometheus.GaugeValue, float64(cs.Bytes))
}
