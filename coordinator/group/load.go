package group

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// LoadPartitions marks every partition of ps as loading at once (their groups answer
// COORDINATOR_LOAD_IN_PROGRESS rather than NOT_COORDINATOR meanwhile) and then loads
// them one by one. It returns the first error; the other partitions still load.
func (c *Coordinator) LoadPartitions(ps ...int32) error {
	return c.loadMarked(c.markLoading(ps))
}

// StartLoading marks the partitions of ps loading at once and replays them on a new
// goroutine; done (may be nil) receives LoadPartitions' result. A broker calls it at
// start-up so that it answers COORDINATOR_LOAD_IN_PROGRESS while it replays.
func (c *Coordinator) StartLoading(ps []int32, done func(error)) {
	todo := c.markLoading(ps)
	go func() {
		err := c.loadMarked(todo)
		if done != nil {
			done(err)
		}
	}()
}

func (c *Coordinator) markLoading(ps []int32) []int32 {
	c.mu.Lock()
	var todo []int32
	for _, p := range ps {
		if _, ok := c.mu.parts[p]; !ok && p >= 0 && p < c.cfg.NumPartitions && !c.mu.closed {
			c.mu.parts[p] = partLoading
			todo = append(todo, p)
		}
	}
	c.mu.Unlock()
	return todo
}

func (c *Coordinator) loadMarked(todo []int32) error {
	var first error
	for _, p := range todo {
		if err := c.load(p); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// LoadPartition replays partition p of __consumer_offsets and starts serving its
// groups. While it runs, requests for those groups get COORDINATOR_LOAD_IN_PROGRESS.
// Groups whose last metadata record has members come back Stable with their
// assignments, and their members' sessions start now: members that reconnect and
// heartbeat within their session keep their generation. Undecodable records are
// logged and skipped; a Replay error aborts the load and leaves p unowned.
func (c *Coordinator) LoadPartition(p int32) error {
	if p < 0 || p >= c.cfg.NumPartitions {
		return fmt.Errorf("%w: %d of %d", ErrNotCoordinator, p, c.cfg.NumPartitions)
	}
	c.mu.Lock()
	if c.mu.closed {
		c.mu.Unlock()
		return fmt.Errorf("%w: coordinator closed", ErrNotCoordinator)
	}
	if _, ok := c.mu.parts[p]; ok {
		c.mu.Unlock()
		return nil
	}
	c.mu.parts[p] = partLoading
	c.mu.Unlock()
	return c.load(p)
}

// load replays p, which the caller marked partLoading, and serves its groups.
func (c *Coordinator) load(p int32) error {
	r := newReplayed()
	if err := c.log.Replay(p, r.apply); err != nil {
		c.mu.Lock()
		if c.mu.parts[p] == partLoading {
			delete(c.mu.parts, p)
		}
		c.mu.Unlock()
		return fmt.Errorf("group: load __consumer_offsets-%d: %w", p, err)
	}
	if r.skipped > 0 {
		c.logger.Warn("skipped undecodable __consumer_offsets records", "partition", p, "count", r.skipped)
	}
	loaded := r.groups(c, p)

	c.mu.Lock()
	if c.mu.parts[p] != partLoading { // unloaded or closed meanwhile
		c.mu.Unlock()
		return fmt.Errorf("%w: partition %d unloaded during load", ErrNotCoordinator, p)
	}
	for _, g := range loaded {
		c.mu.groups[g.id] = g
	}
	c.mu.parts[p] = partLoaded
	c.mu.Unlock()
	for _, g := range loaded {
		g.with(func(*effects) {
			if mg := g.modern(); mg != nil {
				mg.startTimersLocked(g)
				return
			}
			for _, id := range sortedKeys(g.members) {
				m := g.members[id]
				g.armSessionLocked(m, m.sessionTimeout)
			}
		})
	}
	level := slog.LevelInfo
	if len(loaded) == 0 {
		level = slog.LevelDebug // 50 empty partitions on a new broker say nothing
	}
	c.logger.Log(context.Background(), level, "loaded __consumer_offsets partition", "partition", p, "groups", len(loaded))
	return nil
}

// replayed is what the replay of a partition found, per group id: committed offsets,
// classic groups' last metadata, and the records of consumer, share and streams groups.
type replayed struct {
	seq, skipped int // records seen; records that did not decode
	offsets      map[string]map[topicPartition]OffsetValue
	metas        map[string]GroupValue
	metaSeq      map[string]int // replay position of each group's last GroupMetadata record
	consumers    map[string]*loadedConsumer
	shares       map[string]*loadedShare
	streams      map[string]*loadedStreams
}

func newReplayed() *replayed {
	return &replayed{
		offsets: map[string]map[topicPartition]OffsetValue{}, metas: map[string]GroupValue{}, metaSeq: map[string]int{},
		consumers: map[string]*loadedConsumer{}, shares: map[string]*loadedShare{}, streams: map[string]*loadedStreams{},
	}
}

// apply folds one record into r. Undecodable records are counted and skipped; keys of
// a version this coordinator does not know are skipped silently.
func (r *replayed) apply(rec Record) error {
	r.seq++
	k, err := DecodeKey(rec.Key)
	if err != nil {
		if !errors.Is(err, ErrUnknownVersion) {
			r.skipped++
		}
		return nil
	}
	ok := true
	switch k.Kind {
	case KeyOffset:
		tp := topicPartition{k.Topic, k.Partition}
		if rec.Value == nil {
			delete(r.offsets[k.Group], tp)
			return nil
		}
		v, err := DecodeOffsetValue(rec.Value)
		if ok = err == nil; ok {
			m := r.offsets[k.Group]
			if m == nil {
				m = map[topicPartition]OffsetValue{}
				r.offsets[k.Group] = m
			}
			m[tp] = v
		}
	case KeyGroup:
		r.metaSeq[k.Group] = r.seq
		if rec.Value == nil {
			delete(r.metas, k.Group)
			return nil
		}
		v, err := DecodeGroupValue(rec.Value)
		if ok = err == nil; ok {
			r.metas[k.Group] = v
		}
	case KeyConsumerGroup, KeyConsumerPartitionMetadata, KeyConsumerMember, KeyConsumerTargetMetadata,
		KeyConsumerTargetMember, KeyConsumerCurrentAssignment, KeyConsumerRegex:
		ok = loadedOf(r.consumers, k.Group, newLoadedConsumer).apply(k, rec.Value, r.seq)
	case KeySharePartitionMetadata, KeyShareMember, KeyShareGroup, KeyShareTargetMetadata,
		KeyShareTargetMember, KeyShareCurrentAssignment, KeyShareStatePartitionMetadata:
		ok = loadedOf(r.shares, k.Group, newLoadedShare).apply(k, rec.Value, r.seq)
	case KeyStreamsGroup, KeyStreamsPartitionMetadata, KeyStreamsMember, KeyStreamsTargetMetadata,
		KeyStreamsTargetMember, KeyStreamsCurrentAssignment, KeyStreamsTopology:
		ok = loadedOf(r.streams, k.Group, newLoadedStreams).apply(k, rec.Value, r.seq)
	}
	if !ok {
		r.skipped++
	}
	return nil
}

func loadedOf[L any](m map[string]*L, id string, fresh func() *L) *L {
	l := m[id]
	if l == nil {
		l = fresh()
		m[id] = l
	}
	return l
}

// groups makes the groups of the replay, in group id order. A group id's kind is that
// of its latest group-level record: a migration deletes the other kind's records
// first, so at most one is live; a consumer, share or streams group whose records
// precede the id's last classic GroupMetadata record is gone.
func (r *replayed) groups(c *Coordinator, p int32) []*group {
	restore := map[string]func(*group){}
	latest := map[string]int{}
	offer := func(id string, live bool, seq int, f func(*group)) {
		if !live || seq < r.metaSeq[id] {
			return
		}
		if s, ok := latest[id]; ok && s > seq {
			return
		}
		latest[id], restore[id] = seq, f
	}
	for id, l := range r.consumers {
		offer(id, l.live, l.seq, func(g *group) { g.restoreConsumer(l) })
	}
	for id, l := range r.shares {
		offer(id, l.live, l.seq, func(g *group) { g.restoreShare(l) })
	}
	for id, l := range r.streams {
		offer(id, l.live, l.seq, func(g *group) { g.restoreStreams(l) })
	}
	for id, v := range r.metas {
		if _, ok := restore[id]; !ok {
			restore[id] = func(g *group) { g.restore(v) }
		}
	}
	for id, o := range r.offsets {
		if _, ok := restore[id]; !ok && len(o) > 0 {
			restore[id] = func(*group) {} // offsets only: a simple (standalone) consumer's group
		}
	}
	loaded := make([]*group, 0, len(restore))
	for _, id := range sortedKeys(restore) {
		g := newGroup(c, id, p)
		restore[id](g)
		if o := r.offsets[id]; o != nil {
			g.offsets = o
		}
		loaded = append(loaded, g)
	}
	return loaded
}

// restore sets the group from its last metadata record.
func (g *group) restore(v GroupValue) {
	g.protocolType = v.ProtocolType
	g.generation = v.Generation
	if v.Protocol != nil {
		g.protocol = *v.Protocol
	}
	if v.CurrentStateTimestamp >= 0 {
		g.stateTime = time.UnixMilli(v.CurrentStateTimestamp)
		g.hasStateTime = true
	} else {
		g.hasStateTime = false
	}
	for _, mv := range v.Members {
		m := &member{
			id:               mv.MemberID,
			instanceID:       mv.InstanceID,
			clientID:         mv.ClientID,
			clientHost:       mv.ClientHost,
			sessionTimeout:   millis(mv.SessionTimeout),
			rebalanceTimeout: millis(mv.RebalanceTimeout),
			protocolType:     v.ProtocolType,
			protocols:        []protocol{{name: g.protocol, metadata: mv.Subscription}},
			assignment:       mv.Assignment,
		}
		g.addMember(m)
	}
	g.leader = ""
	if v.Leader != nil && g.members[*v.Leader] != nil {
		g.leader = *v.Leader
	} else if ms := g.sortedMembers(); len(ms) > 0 {
		g.leader = ms[0].id
	}
	if len(g.members) > 0 && g.protocol != "" {
		g.state = stateStable
		g.computeSubscriptions()
	} else {
		g.state = stateEmpty
		g.members = map[string]*member{}
		g.static = map[string]string{}
		g.leader = ""
	}
}
