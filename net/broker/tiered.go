package broker

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

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
// controller when the broker starts (retried until it exists).
//
// Keys read when the broker starts (Kafka's names and defaults):
// remote.log.storage.system.enable (false), remote.log.manager.task.interval.ms (30000),
// remote.log.manager.copy.max.bytes.per.second (unlimited), remote.log.reader.threads
// (10), remote.log.storage.manager.impl.prefix (rsm.config.) and the storage manager's
// keys under it, rlmm.config.remote.log.metadata.topic.{num.partitions (50),
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
	s := &tieredState{}
	s.meta = remotelog.New(remotelog.Config{Replicas: b.repl, Partitions: func() int32 {
		if t, ok := b.meta.Image().Topic(remotelog.Topic); ok {
			return int32(len(t.Partitions))
		}
		return 0
	}})
	s.rlm = tiered.New(tiered.Config{
		NodeID: b.cfg.NodeID, Replicas: b.repl, Storage: sm, Metadata: s.meta,
		Interval:           time.Duration(b.groupInt(im, "remote.log.manager.task.interval.ms", 30000)) * time.Millisecond,
		CopyBytesPerSecond: b.groupInt(im, "remote.log.manager.copy.max.bytes.per.second", 0),
		ReaderThreads:      int(b.groupInt(im, "remote.log.reader.threads", 10)),
		Logger:             b.log.With("component", "tiered-storage"),
	})
	b.repl.SetRemoteLog(s.rlm)
	s.rlm.Start()
	b.async(func(ctx context.Context) { b.ensureRemoteLogMetadataTopic(ctx) })
	b.log.Info("tiered storage on", "bucket", rcfg.Bucket, "endpoint", rcfg.Endpoint)
	return s, nil
}

// ensureRemoteLogMetadataTopic creates __remote_log_metadata, retrying every 2 s
// until it exists or the broker closes.
func (b *Broker) ensureRemoteLogMetadataTopic(ctx context.Context) {
	for {
		cctx, cancel := context.WithTimeout(ctx, forwardTimeout)
		err := b.topics.EnsureInternal(cctx, remotelog.Topic)
		cancel()
		if err == nil {
			return
		}
		b.log.Warn("creating __remote_log_metadata; retrying", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(2 * time.Second):
		}
	}
}

func (s *tieredState) close() {
	if s != nil {
		s.rlm.Close()
	}
}
