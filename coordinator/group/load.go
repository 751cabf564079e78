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

// load replays p, which the caller marked partLoading.
func (c *Coordinator) load(p int32) error {
	offsets := map[string]map[topicPartition]OffsetValue{}
	metas := map[string]GroupValue{}
	metaSeq := map[string]int{} // replay position of each group's last GroupMetadata record
	consumers := map[string]*loadedConsumer{}
	shares := map[string]*loadedShare{}
	streams := map[string]*loadedStreams{}
	skipped, seq := 0, 0
	err := c.log.Replay(p, func(rec Record) error {
		seq++
		k, err := DecodeKey(rec.Key)
		if err != nil {
			if !errors.Is(err, ErrUnknownVersion) {
				skipped++
			}
			return nil
		}
		switch k.Kind {
		case KeyOffset:
			tp := topicPartition{k.Topic, k.Partition}
			if rec.Value == nil {
				delete(offsets[k.Group], tp)
				return nil
			}
			v, err := DecodeOffsetValue(rec.Value)
			if err != nil {
				skipped++
				return nil
			}
			m := offsets[k.Group]
			if m == nil {
				m = map[topicPartition]OffsetValue{}
				offsets[k.Group] = m
			}
			m[tp] = v
		case KeyGroup:
			metaSeq[k.Group] = seq
			if rec.Value == nil {
				delete(metas, k.Group)
				return nil
			}
			v, err := DecodeGroupValue(rec.Value)
			if err != nil {
				skipped++
				return nil
			}
			metas[k.Group] = v
		case KeyConsumerGroup, KeyConsumerPartitionMetadata, KeyConsumerMember, KeyConsumerTargetMetadata,
			KeyConsumerTargetMember, KeyConsumerCurrentAssignment, KeyConsumerRegex:
			l := consumers[k.Group]
			if l == nil {
				l = newLoadedConsumer()
				consumers[k.Group] = l
			}
			if !l.apply(k, rec.Value, seq) {
				skipped++
			}
		case KeySharePartitionMetadata, KeyShareMember, KeyShareGroup, KeyShareTargetMetadata,
			KeyShareTargetMember, KeyShareCurrentAssignment, KeyShareStatePartitionMetadata:
			l := shares[k.Group]
			if l == nil {
				l = newLoadedShare()
				shares[k.Group] = l
			}
			if !l.apply(k, rec.Value, seq) {
				skipped++
			}
		case KeyStreamsGroup, KeyStreamsPartitionMetadata, KeyStreamsMember, KeyStreamsTargetMetadata,
			KeyStreamsTargetMember, KeyStreamsCurrentAssignment, KeyStreamsTopology:
			l := streams[k.Group]
			if l == nil {
				l = newLoadedStreams()
				streams[k.Group] = l
			}
			if !l.apply(k, rec.Value, seq) {
				skipped++
			}
		}
		return nil
	})
	if err != nil {
		c.mu.Lock()
		if c.mu.parts[p] == partLoading {
			delete(c.mu.parts, p)
		}
		c.mu.Unlock()
		return fmt.Errorf("group: load __consumer_offsets-%d: %w", p, err)
	}
	if skipped > 0 {
		c.logger.Warn("skipped undecodable __consumer_offsets records", "partition", p, "count", skipped)
	}

	// A group id's kind is that of its latest group-level record: a migration deletes
	// the other kind's records first, so at most one is live.
	var loaded []*group
	seen := map[string]bool{}
	for id, l := range consumers {
		if !l.live || l.seq < metaSeq[id] {
			continue
		}
		if s := shares[id]; s != nil && s.live && s.seq > l.seq {
			continue
		}
		if s := streams[id]; s != nil && s.live && s.seq > l.seq {
			continue
		}
		g := newGroup(c, id, p)
		g.restoreConsumer(l)
		seen[id] = true
		loaded = append(loaded, g)
	}
	for id, l := range shares {
		if !l.live || l.seq < metaSeq[id] || seen[id] {
			continue
		}
		if cl := consumers[id]; cl != nil && cl.live && cl.seq > l.seq {
			continue
		}
		if s := streams[id]; s != nil && s.live && s.seq > l.seq {
			continue
		}
		g := newGroup(c, id, p)
		g.restoreShare(l)
		seen[id] = true
		loaded = append(loaded, g)
	}
	for id, l := range streams {
		if !l.live || l.seq < metaSeq[id] || seen[id] {
			continue
		}
		g := newGroup(c, id, p)
		g.restoreStreams(l)
		seen[id] = true
		loaded = append(loaded, g)
	}
	for id, v := range metas {
		if seen[id] {
			continue
		}
		g := newGroup(c, id, p)
		g.restore(v)
		seen[id] = true
		loaded = append(loaded, g)
	}
	for _, g := range loaded {
		if o := offsets[g.id]; o != nil {
			g.offsets = o
		}
	}
	for id, o := range offsets {
		if seen[id] || len(o) == 0 {
			continue
		}
		g := newGroup(c, id, p) // offsets only: a simple (standalone) consumer's group
		g.offsets = o
		loaded = append(loaded, g)
	}

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
