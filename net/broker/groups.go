package broker

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/samsa-broker/samsa/coordinator/group"
	"github.com/samsa-broker/samsa/coordinator/host"
	"github.com/samsa-broker/samsa/coordinator/metadata"
)

// groupState is the broker's group coordinator and the __consumer_offsets partitions it
// serves: exactly those this node leads in the published image, hosted by
// coordinator/host (follow, from MetadataChanged after the replica manager applied the
// change, loads a partition when this node becomes its leader and unloads it — its
// groups answer NOT_COORDINATOR, their state is dropped — when it stops leading it).
// The coordinator writes through the replicated partition (group.ReplicatedLog: the
// leader's append, acks=all), so committed offsets survive the loss of this broker:
// the next leader's coordinator loads them from its replica.
//
// The coordinator maps a group to a partition by the topic's partition count, which is
// offsets.topic.num.partitions until the topic exists; should the topic appear with
// another count (created by hand before first use), the coordinator is rebuilt with it
// before any partition is loaded.
type groupState struct {
	b   *Broker
	log group.Log
	h   *host.Host[*group.Coordinator]

	// topics is the topic list last handed to the coordinator and topicsVersion its
	// version (SetTopics' version grows only when the list changed). Under the host's
	// follow lock (host.Config.Followed), or before the host is shared.
	topics        []group.TopicInfo
	topicsVersion uint64
}

func newGroupState(b *Broker, im *metadata.Image) *groupState {
	timeout := time.Duration(b.groupInt(im, "offsets.commit.timeout.ms", group.DefaultCommitTimeout.Milliseconds())) * time.Millisecond
	g := &groupState{b: b, log: group.NewReplicatedLog(b.repl, timeout)}
	g.h = host.New(host.Config[*group.Coordinator]{
		Topic:             group.OffsetsTopic,
		Self:              b.cfg.NodeID,
		New:               g.newCoordinator,
		DefaultPartitions: int32(b.groupInt(im, "offsets.topic.num.partitions", 50)),
		NumPartitions:     (*group.Coordinator).NumPartitions,
		Load: func(c *group.Coordinator, p, _ int32, done func(error)) {
			c.StartLoading([]int32{p}, done)
		},
		Unload: (*group.Coordinator).UnloadPartition,
		Close:  (*group.Coordinator).Close,
		Retry:  loadRetry,
		After:  b.after,
		Failed: func(p int32, err error) {
			b.log.Warn("loading __consumer_offsets partition failed; retrying", "partition", p, "in", loadRetry, "err", err)
		},
		Followed: func(c *group.Coordinator, im *metadata.Image, rebuilt bool) { g.setTopicsLocked(c, im, rebuilt) },
	}, im)
	g.setTopicsLocked(g.h.Coordinator(), im, true) // not shared yet: the follow lock is not needed
	g.follow(im)
	return g
}

// newCoordinator builds a coordinator for n partitions with the broker's group keys.
func (g *groupState) newCoordinator(im *metadata.Image, n int32) *group.Coordinator {
	b := g.b
	ms := func(key string, def int64) time.Duration {
		return time.Duration(b.groupInt(im, key, def)) * time.Millisecond
	}
	delay := ms("group.initial.rebalance.delay.ms", 3000)
	if delay == 0 {
		delay = -1 // Config: negative means none
	}
	return group.New(group.Config{
		NumPartitions:          n,
		MinSessionTimeout:      ms("group.min.session.timeout.ms", 6000),
		MaxSessionTimeout:      ms("group.max.session.timeout.ms", 1800000),
		InitialRebalanceDelay:  delay,
		MaxGroupSize:           int(b.groupInt(im, "group.max.size", 0)),
		OffsetRetention:        time.Duration(b.groupInt(im, "offsets.retention.minutes", 10080)) * time.Minute,
		RetentionCheckInterval: ms("offsets.retention.check.interval.ms", 600000),
		MaxOffsetMetadata:      int(b.groupInt(im, "offset.metadata.max.bytes", 4096)),
		Logger:                 b.log.With("component", "groups"),

		ConsumerSessionTimeout:    ms("group.consumer.session.timeout.ms", 45000),
		ConsumerHeartbeatInterval: ms("group.consumer.heartbeat.interval.ms", 5000),
		ConsumerMaxSize:           int(b.groupInt(im, "group.consumer.max.size", 0)),
		ConsumerAssignors:         g.consumerAssignors(im),
		MigrationPolicy:           strings.ToLower(b.brokerValue(im, "group.consumer.migration.policy")),

		ShareSessionTimeout:    ms("group.share.session.timeout.ms", 45000),
		ShareHeartbeatInterval: ms("group.share.heartbeat.interval.ms", 5000),
		ShareMaxSize:           int(b.groupInt(im, "group.share.max.size", 200)),
		GroupSettings:          b.groupSettings,
		ShareState:             shareInitializer{b},
	}, g.log)
}

// groupSettings is the coordinator's Config.GroupSettings: a group's own session
// timeouts and heartbeat intervals (GROUP configs) in the published image, capped to
// this broker's bounds; zero (the coordinator's) for the keys it does not set.
func (b *Broker) groupSettings(id string) group.GroupSettings {
	im := b.meta.Image()
	own := im.Configs(metadata.ResourceGroup, id)
	if len(own) == 0 {
		return group.GroupSettings{}
	}
	l := b.groupLayers(im, id)
	d := func(key string) time.Duration {
		if _, ok := own[key]; !ok {
			return 0
		}
		return l.GroupDuration(key)
	}
	return group.GroupSettings{
		ConsumerSessionTimeout:    d("consumer.session.timeout.ms"),
		ConsumerHeartbeatInterval: d("consumer.heartbeat.interval.ms"),
		ShareSessionTimeout:       d("share.session.timeout.ms"),
		ShareHeartbeatInterval:    d("share.heartbeat.interval.ms"),
	}
}

// consumerAssignors is group.consumer.assignors (Kafka's class names, or the
// assignors' names) as the coordinator names them; nil (the coordinator's default,
// uniform then range) when it names an assignor Samsa does not have, with a warning.
func (g *groupState) consumerAssignors(im *metadata.Image) []string {
	v := g.b.brokerValue(im, "group.consumer.assignors")
	if v == "" {
		return nil
	}
	out, err := group.ParseAssignors(v)
	if err != nil {
		g.b.log.Warn("ignoring group.consumer.assignors", "value", v, "err", err)
		return nil
	}
	return out
}

// setTopicsLocked hands the image's topics to c (for consumer groups' subscriptions)
// when they changed since the last call, or always when force is set (a new
// coordinator). Caller holds the host's follow lock.
func (g *groupState) setTopicsLocked(c *group.Coordinator, im *metadata.Image, force bool) {
	ts := im.Topics()
	topics := make([]group.TopicInfo, 0, len(ts))
	for _, t := range ts {
		topics = append(topics, group.TopicInfo{Name: t.Name, ID: t.ID, Partitions: int32(len(t.Partitions))})
	}
	if !force && slices.Equal(topics, g.topics) {
		return
	}
	g.topics = topics
	g.topicsVersion++
	c.SetTopics(g.topicsVersion, topics)
}

// coordinator returns the coordinator (nil after close).
func (g *groupState) coordinator() *group.Coordinator { return g.h.Coordinator() }

// follow loads the partitions this node now leads and unloads the ones it no longer
// leads.
func (g *groupState) follow(im *metadata.Image) { g.h.Follow(im) }

// loadRetry is the wait before a partition whose load failed is loaded again.
const loadRetry = time.Second

func (g *groupState) close() { g.h.Close() }

// after runs fn after d on a goroutine of the broker's, unless the broker closes
// first: the coordinator hosts' load retries.
func (b *Broker) after(d time.Duration, fn func()) {
	b.async(func(ctx context.Context) {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			fn()
		case <-ctx.Done():
		}
	})
}

func (b *Broker) groupInt(im *metadata.Image, key string, def int64) int64 {
	v := b.brokerValue(im, key)
	if v == "" {
		return def
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		b.log.Warn("ignoring unparsable group setting", "key", key, "value", v)
		return def
	}
	return n
}
