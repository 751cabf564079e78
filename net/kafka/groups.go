package kafka

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/group"
	"github.com/samsa-broker/samsa/coordinator/metadata"
)

// groupState is the broker's group coordinator and the __consumer_offsets partitions it
// serves: exactly those this node leads in the published image. Built with the broker;
// follow (from MetadataChanged, after the replica manager applied the change) loads a
// partition when this node becomes its leader and unloads it (its groups answer
// NOT_COORDINATOR, their state is dropped) when it stops leading it. The coordinator
// writes through the replicated partition (group.ReplicatedLog: the leader's append,
// acks=all), so committed offsets survive the loss of this broker: the next leader's
// coordinator loads them from its replica.
//
// The coordinator maps a group to a partition by the topic's partition count, which is
// offsets.topic.num.partitions until the topic exists; should the topic appear with
// another count (created by hand before first use), the coordinator is rebuilt with it
// before any partition is loaded.
type groupState struct {
	b   *Broker
	log group.Log

	followMu sync.Mutex      // serializes follow (MetadataChanged's and load retries')
	last     *metadata.Image // the image follow last followed (under followMu)

	// consumerProtocol: group.coordinator.rebalance.protocols holds "consumer", so
	// ConsumerGroupHeartbeat and ConsumerGroupDescribe are served (read at start).
	consumerProtocol bool
	// topics is the topic list last handed to the coordinator and topicsVersion its
	// version (SetTopics' version grows only when the list changed). Under followMu.
	topics        []group.TopicInfo
	topicsVersion uint64

	mu struct {
		sync.Mutex
		c       *group.Coordinator
		topicID metadata.UUID  // the __consumer_offsets topic the loaded set belongs to
		loaded  map[int32]bool // partitions loaded or loading
		closed  bool
	}
}

func newGroupState(b *Broker, im *metadata.Image) *groupState {
	timeout := time.Duration(b.groupInt(im, "offsets.commit.timeout.ms", group.DefaultCommitTimeout.Milliseconds())) * time.Millisecond
	g := &groupState{b: b, log: group.NewReplicatedLog(b.repl, timeout)}
	g.consumerProtocol = slices.Contains(b.groupList(im, "group.coordinator.rebalance.protocols", "classic,consumer"), "consumer")
	g.mu.loaded = map[int32]bool{}
	n := int32(b.groupInt(im, "offsets.topic.num.partitions", 50))
	if t, ok := im.Topic(group.OffsetsTopic); ok {
		n = int32(len(t.Partitions))
	}
	g.mu.c = g.newCoordinator(im, n)
	g.setTopicsLocked(g.mu.c, im, true) // not shared yet: followMu is not needed
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
// coordinator). Caller holds followMu.
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
func (g *groupState) coordinator() *group.Coordinator {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.mu.closed {
		return nil
	}
	return g.mu.c
}

// follow loads the partitions this node now leads and unloads the ones it no longer
// leads.
func (g *groupState) follow(im *metadata.Image) {
	g.followMu.Lock()
	defer g.followMu.Unlock()
	g.last = im
	g.followLocked(im)
}

// refollow follows the last image again (a load retry).
func (g *groupState) refollow() {
	g.followMu.Lock()
	defer g.followMu.Unlock()
	if g.last != nil {
		g.followLocked(g.last)
	}
}

// followLocked is follow's body. Caller holds followMu.
func (g *groupState) followLocked(im *metadata.Image) {
	self := g.b.cfg.NodeID
	g.mu.Lock()
	if g.mu.closed {
		g.mu.Unlock()
		return
	}
	c := g.mu.c
	prev := c
	t, ok := im.Topic(group.OffsetsTopic)
	var unload, load []int32
	if !ok || t.ID != g.mu.topicID {
		for p := range g.mu.loaded {
			unload = append(unload, p)
		}
		clear(g.mu.loaded)
	}
	if ok {
		g.mu.topicID = t.ID
		if n := int32(len(t.Partitions)); n != c.NumPartitions() && len(g.mu.loaded) == 0 {
			old := c
			c = g.newCoordinator(im, n)
			g.mu.c = c
			defer old.Close()
		}
		for p := range t.Partitions {
			leads := t.Partitions[p].Leader == self
			switch {
			case leads && !g.mu.loaded[int32(p)]:
				g.mu.loaded[int32(p)] = true
				load = append(load, int32(p))
			case !leads && g.mu.loaded[int32(p)]:
				delete(g.mu.loaded, int32(p))
				unload = append(unload, int32(p))
			}
		}
	}
	g.mu.Unlock()
	g.setTopicsLocked(c, im, c != prev)
	for _, p := range unload {
		c.UnloadPartition(p)
	}
	for _, p := range load {
		c.StartLoading([]int32{p}, func(err error) {
			if err != nil {
				g.loadFailed(c, p, err)
			}
		})
	}
}

// loadRetry is the wait before a partition whose load failed is loaded again.
const loadRetry = time.Second

// loadFailed forgets that p is loaded, so that it is loaded again: after loadRetry,
// if this node still leads it (a replica not yet made leader by the replica manager,
// a read error).
func (g *groupState) loadFailed(c *group.Coordinator, p int32, err error) {
	g.b.log.Warn("loading __consumer_offsets partition failed; retrying", "partition", p, "in", loadRetry, "err", err)
	g.mu.Lock()
	if g.mu.c == c {
		delete(g.mu.loaded, p)
	}
	closed := g.mu.closed
	g.mu.Unlock()
	if closed {
		return
	}
	g.b.async(func(ctx context.Context) {
		t := time.NewTimer(loadRetry)
		defer t.Stop()
		select {
		case <-t.C:
			g.refollow()
		case <-ctx.Done():
		}
	})
}

func (g *groupState) close() {
	g.mu.Lock()
	if g.mu.closed {
		g.mu.Unlock()
		return
	}
	g.mu.closed = true
	c := g.mu.c
	g.mu.Unlock()
	c.Close()
}

// groupList is a list-valued broker key's items (def when unset), trimmed and
// lower-cased where Kafka compares them so (protocol names).
func (b *Broker) groupList(im *metadata.Image, key, def string) []string {
	v := b.brokerValue(im, key)
	if v == "" {
		v = def
	}
	var out []string
	for _, it := range strings.Split(v, ",") {
		if it = strings.TrimSpace(it); it != "" {
			if key == "group.coordinator.rebalance.protocols" {
				it = strings.ToLower(it)
			}
			out = append(out, it)
		}
	}
	return out
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

// GroupCoordinator returns the broker's group coordinator, built with the broker.
// (Kept for launchers that loaded committed offsets at start-up explicitly: the broker
// now does so itself.)
func (b *Broker) GroupCoordinator() (*group.Coordinator, error) {
	if c := b.groups.coordinator(); c != nil {
		return c, nil
	}
	return nil, kerr.CoordinatorNotAvailable
}

// CloseGroupCoordinator is Close (kept for launchers written before Close): the group
// coordinator stops (parked joins are answered NOT_COORDINATOR, timers stop) and
// forwarded requests end. Call it before closing the engine.
func (b *Broker) CloseGroupCoordinator() { b.Close() }

// groupCoordinatorOr returns the coordinator, or answers code via fail. Before
// __consumer_offsets exists a group request starts its creation (as FindCoordinator
// does) and is answered COORDINATOR_LOAD_IN_PROGRESS, so the client retries.
func (b *Broker) groupCoordinatorOr(fail func(code int16)) *group.Coordinator {
	c := b.groups.coordinator()
	if c == nil {
		fail(kerr.NotCoordinator.Code)
		return nil
	}
	if _, ok := b.meta.Image().Topic(group.OffsetsTopic); !ok {
		b.async(func(ctx context.Context) {
			ctx, cancel := context.WithTimeout(ctx, defaultForwardTimeout)
			defer cancel()
			if err := b.ensureOffsetsTopic(ctx); err != nil {
				b.log.Warn("creating __consumer_offsets", "err", err)
			}
		})
		fail(kerr.CoordinatorLoadInProgress.Code)
		return nil
	}
	return c
}

// offsetsTopic creates __consumer_offsets through the controller on first use, once
// at a time for the whole broker.
type offsetsTopic struct {
	mu       sync.Mutex
	creating chan struct{} // closed when the running creation ends
}

// ensureOffsetsTopic returns once the image has __consumer_offsets, creating it
// through the active controller (offsets.topic.num.partitions partitions,
// offsets.topic.replication.factor replicas capped at the live brokers, compacted,
// never deleted by retention) if it has not. It blocks: call it off the read path.
func (b *Broker) ensureOffsetsTopic(ctx context.Context) error {
	return b.ensureInternalTopic(ctx, &b.offsets, group.OffsetsTopic, offsetsTopicRequest)
}

// ensureInternalTopic returns once the image has the internal topic name, creating it
// through the active controller with mk's request if it has not; gate makes it one
// creation at a time for the whole broker. It blocks: call it off the read path.
func (b *Broker) ensureInternalTopic(ctx context.Context, gate *offsetsTopic, name string, mk func(*Broker, *metadata.Image) *kmsg.CreateTopicsRequest) error {
	for {
		im := b.meta.Image()
		if _, ok := im.Topic(name); ok {
			return nil
		}
		o := gate
		o.mu.Lock()
		if ch := o.creating; ch != nil {
			o.mu.Unlock()
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		ch := make(chan struct{})
		o.creating = ch
		o.mu.Unlock()

		code := b.createTopics(ctx, mk(b, im))[name]

		o.mu.Lock()
		o.creating = nil
		close(ch)
		o.mu.Unlock()
		if code != 0 && code != kerr.TopicAlreadyExists.Code {
			return kerr.ErrorForCode(code)
		}
		if _, ok := b.meta.Image().Topic(name); ok {
			return nil
		}
		return kerr.CoordinatorNotAvailable
	}
}

func offsetsTopicRequest(b *Broker, im *metadata.Image) *kmsg.CreateTopicsRequest {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = int32(defaultForwardTimeout.Milliseconds())
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic = group.OffsetsTopic
	rt.NumPartitions = int32(b.groupInt(im, "offsets.topic.num.partitions", 50))
	rf := b.groupInt(im, "offsets.topic.replication.factor", 3)
	if live := int64(len(im.UnfencedBrokers())); rf > live {
		rf = live // Kafka: capped at the brokers there are
	}
	rt.ReplicationFactor = int16(max(rf, 1))
	for _, kv := range [][2]string{
		{"cleanup.policy", "compact"},
		{"segment.bytes", strconv.FormatInt(b.groupInt(im, "offsets.topic.segment.bytes", 104857600), 10)},
		{"retention.ms", "-1"},
		{"retention.bytes", "-1"},
		{"compression.type", "producer"},
	} {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = kv[0], stringPtr(kv[1])
		rt.Configs = append(rt.Configs, c)
	}
	req.Topics = []kmsg.CreateTopicsRequestTopic{rt}
	return req
}
