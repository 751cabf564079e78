package broker

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/controller"
	"github.com/samsa-broker/samsa/replication"
)

// startReplication builds the broker's replica manager (New calls it, once) and
// gives it the replicas the starting image places on this node
// (controller.ReplicaDelta from the empty image). Its settings are the broker keys
// (replica.lag.time.max.ms, num.replica.fetchers, replica.fetch.*,
// follower.replication.throttled.rate); its ISR changes go to the controller channel;
// its followers fetch through Deps.Fetch (net/peer's ReplicaClient; nil: a follower
// replica stays idle, and the manager logs it).
//
// After start-up MetadataChanged applies every image's controller.ReplicaDelta to it.
func (b *Broker) startReplication() error {
	_, im := b.source.Image()
	l := b.layers(im, "")
	self := b.cfg.NodeID
	cfg := replication.Config{
		NodeID: self,
		BrokerEpoch: func() int64 {
			if bi, ok := b.meta.Image().Broker(self); ok {
				return bi.Epoch
			}
			return -1
		},
		Logs:               replication.EngineLogs(b.eng),
		Logger:             b.log.With("component", "replication"),
		ReplicaLagTimeMax:  time.Duration(l.BrokerInt("replica.lag.time.max.ms")) * time.Millisecond,
		NumReplicaFetchers: int(l.BrokerInt("num.replica.fetchers")),
		Fetcher: replication.FetcherConfig{
			MaxBytes:         int32(l.BrokerInt("replica.fetch.max.bytes")),
			ResponseMaxBytes: int32(l.BrokerInt("replica.fetch.response.max.bytes")),
			MaxWait:          time.Duration(l.BrokerInt("replica.fetch.wait.max.ms")) * time.Millisecond,
			MinBytes:         int32(l.BrokerInt("replica.fetch.min.bytes")),
			Backoff:          time.Duration(l.BrokerInt("replica.fetch.backoff.ms")) * time.Millisecond,
		},
		FollowerThrottleRate: l.BrokerInt("follower.replication.throttled.rate"),
		Hooks:                replication.Hooks{HighWatermarkMoved: b.hwMoved, LeaderAppended: b.leaderAppended},
		Fetch:                b.fetch,
	}
	cfg.ISR = controllerISR{b.ctrl}
	m, err := replication.NewManager(cfg)
	if err != nil {
		return fmt.Errorf("broker: replica manager: %w", err)
	}
	b.repl = m
	if err := m.Apply(controller.ReplicaDelta(self, nil, im, b.cfg.Static)); err != nil {
		b.log.Error("replicas", "err", err)
	}
	return nil
}

// controllerISR sends the replica manager's AlterPartition through the controller
// channel.
type controllerISR struct{ ch controller.ControllerChannel }

func (c controllerISR) AlterPartition(ctx context.Context, req *kmsg.AlterPartitionRequest) (*kmsg.AlterPartitionResponse, error) {
	resp, err := c.ch.Request(ctx, req)
	if err != nil {
		return nil, err
	}
	r, ok := resp.(*kmsg.AlterPartitionResponse)
	if !ok {
		return nil, fmt.Errorf("broker: %T for AlterPartition", resp)
	}
	return r, nil
}

// hwMoved and leaderAppended are replication's hooks (HighWatermarkMoved,
// LeaderAppended): a partition's HW moved or its leader appended, which the adapter's
// parked fetches wait for. Before the adapter is built (the starting image's replicas)
// nothing waits.
func (b *Broker) hwMoved(p *replication.Partition) {
	if kb := b.kafka.Load(); kb != nil {
		kb.LogChanged(p.EngineLog(), true)
	}
}

func (b *Broker) leaderAppended(p *replication.Partition) {
	if kb := b.kafka.Load(); kb != nil {
		kb.LogChanged(p.EngineLog(), false)
	}
}
