package group

import (
	"slices"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// The group coordinator's half of share-partition state (Kafka's
// GroupCoordinatorService and GroupMetadataManager as they use the share
// coordinator): a share group's share partitions are initialized in
// __share_group_state (InitializeShareGroupState, through Config.ShareState) when the
// group first subscribes to their topic, and the group records which it initialized
// in its ShareGroupStatePartitionMetadata (record 15):
//
//	heartbeat: subscribed partitions neither initialized nor initializing (or
//	           initializing for longer than shareInitRetry) -> initializing, written
//	           with the heartbeat's records
//	then:      ShareState.Initialize(group, group epoch, partitions, start -1)
//	done:      succeeded -> initialized, failed -> dropped from initializing (retried
//	           at a later heartbeat); record 15 written; the heartbeat answered
//
// The share partition's leader picks the start offset (share.auto.offset.reset) when
// it first reads a state initialized without one. DeleteGroups and
// DeleteShareGroupOffsets delete the recorded partitions' state (net/kafka), so a
// group re-created under the same id starts afresh.
//
// Differences from Kafka: Kafka answers the heartbeat at once and assigns only the
// partitions already initialized (its next heartbeat, after the initialization,
// assigns them); here the assignor assigns every subscribed partition and the
// heartbeat that brings new partitions is answered after their initialization, so a
// member never learns of a partition whose state is not initialized, and the first
// assignment needs no second heartbeat.

// ShareStateInitializer initializes share partitions' state at their share
// coordinators for the group coordinator (Kafka's Persister.initializeState).
type ShareStateInitializer interface {
	// InitializeShareState initializes the share partitions of topics for group at
	// stateEpoch with no start offset (-1), and calls done, on any goroutine, with
	// the partitions it could not initialize (by topic id; nil when all were).
	InitializeShareState(group string, stateEpoch int32, topics []ShareStateTopic, done func(failed map[[16]byte][]int32))
}

// shareInitRetry is how long partitions may stay initializing before a heartbeat
// initializes them again (Kafka's group.share.initialize.retry.interval.ms, 30 s).
const shareInitRetry = 30 * time.Second

// shareInit is an initialization a heartbeat started: group, its epoch then, and the
// partitions.
type shareInit struct {
	epoch  int32
	topics []ShareStateTopic
}

// shareInitializingLocked marks the subscribed partitions of the share group that
// need their state initialized as initializing (appending record 15 to recs), and
// returns them; nil when there are none or no initializer is configured.
func (g *group) shareInitializingLocked(recs *[]Record) *shareInit {
	if g.c.cfg.ShareState == nil || g.kind != kindShare || g.sg == nil {
		return nil
	}
	sg := g.sg
	now := g.c.clock.Now()
	have := map[[16]byte]map[int32]bool{}
	mark := func(ts []ShareStateTopic, keep func(ShareStateTopic) bool) {
		for _, t := range ts {
			if !keep(t) {
				continue
			}
			if have[t.TopicID] == nil {
				have[t.TopicID] = map[int32]bool{}
			}
			for _, p := range t.Partitions {
				have[t.TopicID][p] = true
			}
		}
	}
	mark(sg.state.Initialized, func(ShareStateTopic) bool { return true })
	mark(sg.state.Initializing, func(t ShareStateTopic) bool {
		return now.Sub(time.UnixMilli(t.CreateTimestamp)) < shareInitRetry
	})
	var todo []ShareStateTopic
	for _, t := range sg.subMeta {
		var parts []int32
		for p := int32(0); p < t.NumPartitions; p++ {
			if !have[t.TopicID][p] {
				parts = append(parts, p)
			}
		}
		if len(parts) > 0 {
			todo = append(todo, ShareStateTopic{TopicID: t.TopicID, TopicName: t.TopicName, Partitions: parts, CreateTimestamp: now.UnixMilli()})
		}
	}
	if len(todo) == 0 {
		return nil
	}
	sort.Slice(todo, func(i, j int) bool { return todo[i].TopicName < todo[j].TopicName })
	sg.state = sg.state.withInitializing(todo)
	sg.inits.n++
	*recs = append(*recs, g.rec(recShareStatePartitionMetadata, "", appendShareStateValue(nil, &sg.state)))
	return &shareInit{epoch: sg.epoch, topics: todo}
}

// shareInits counts a share group's initializations under way, and holds the
// heartbeats waiting for them. Guarded by the group's mu.
type shareInits struct {
	n       int
	waiters []func()
}

// initializeShareState runs in and then calls then, with no lock held: the
// initialized partitions move to initialized, the failed ones leave initializing,
// and record 15 is written first. With in nil (the heartbeat brought nothing to
// initialize), then waits for the group's initializations under way, if any: a
// member joining while another member's heartbeat initializes their topic's
// partitions must not fetch them before their state is there.
func (g *group) initializeShareState(in *shareInit, then func()) {
	if in == nil {
		g.with(func(fx *effects) {
			if g.kind == kindShare && g.sg != nil && g.sg.inits.n > 0 {
				g.sg.inits.waiters = append(g.sg.inits.waiters, then)
				return
			}
			fx.add(then)
		})
		return
	}
	g.c.cfg.ShareState.InitializeShareState(g.id, in.epoch, in.topics, func(failed map[[16]byte][]int32) {
		g.with(func(fx *effects) {
			g.shareInitDoneLocked(fx)
			if g.kind != kindShare || g.state == stateDead || g.sg == nil {
				fx.add(then)
				return
			}
			sg := g.sg
			if len(failed) > 0 {
				g.c.logger.Warn("initializing share partition state failed; retried at a later heartbeat", "group", g.id, "partitions", len(failed))
			}
			sg.state = sg.state.initialized(in.topics, failed, g.c.clock.Now().UnixMilli())
			recs := []Record{g.rec(recShareStatePartitionMetadata, "", appendShareStateValue(nil, &sg.state))}
			g.writeThenLocked(fx, recs, func(error) { then() })
		})
	})
}

// shareInitDoneLocked counts an initialization the group started as ended (done or
// abandoned: its heartbeat's records failed), releasing the heartbeats waiting once
// none is left.
func (g *group) shareInitDoneLocked(fx *effects) {
	sg := g.sg
	if sg == nil {
		return
	}
	if sg.inits.n--; sg.inits.n <= 0 {
		sg.inits.n = 0
		for _, w := range sg.inits.waiters {
			fx.add(w)
		}
		sg.inits.waiters = nil
	}
}

// abandonShareInit ends in (not nil) without running it: its heartbeat's records
// were not written.
func (g *group) abandonShareInit(in *shareInit) {
	if in == nil {
		return
	}
	g.with(g.shareInitDoneLocked)
}

// withInitializing returns v with the partitions of add among its initializing topics
// (a topic already there takes add's timestamp).
func (v ShareStateMetadata) withInitializing(add []ShareStateTopic) ShareStateMetadata {
	out := v.clone()
	for _, a := range add {
		i := slices.IndexFunc(out.Initializing, func(t ShareStateTopic) bool { return t.TopicID == a.TopicID })
		if i < 0 {
			out.Initializing = append(out.Initializing, ShareStateTopic{TopicID: a.TopicID, TopicName: a.TopicName})
			i = len(out.Initializing) - 1
		}
		t := &out.Initializing[i]
		t.CreateTimestamp = a.CreateTimestamp
		for _, p := range a.Partitions {
			if !slices.Contains(t.Partitions, p) {
				t.Partitions = append(t.Partitions, p)
			}
		}
		slices.Sort(t.Partitions)
	}
	return out
}

// initialized returns v with the partitions of done, but those of failed, moved from
// initializing to initialized (a topic new there dated now), and the failed ones out
// of initializing (Kafka's initializeShareGroupState and uninitializeShareGroupState).
func (v ShareStateMetadata) initialized(done []ShareStateTopic, failed map[[16]byte][]int32, now int64) ShareStateMetadata {
	var ok []ShareStateTopic
	leave := map[[16]byte][]int32{}
	for _, t := range done {
		var parts []int32
		for _, p := range t.Partitions {
			if !slices.Contains(failed[t.TopicID], p) {
				parts = append(parts, p)
			}
			leave[t.TopicID] = append(leave[t.TopicID], p)
		}
		if len(parts) > 0 {
			ok = append(ok, ShareStateTopic{TopicID: t.TopicID, TopicName: t.TopicName, Partitions: parts})
		}
	}
	out := v.withInitialized(ok, now)
	var still []ShareStateTopic
	for _, t := range out.Initializing {
		var parts []int32
		for _, p := range t.Partitions {
			if !slices.Contains(leave[t.TopicID], p) {
				parts = append(parts, p)
			}
		}
		if len(parts) > 0 {
			t.Partitions = parts
			still = append(still, t)
		}
	}
	out.Initializing = still
	return out
}

func (v ShareStateMetadata) clone() ShareStateMetadata {
	cp := func(ts []ShareStateTopic) []ShareStateTopic {
		out := make([]ShareStateTopic, len(ts))
		for i, t := range ts {
			t.Partitions = slices.Clone(t.Partitions)
			out[i] = t
		}
		return out
	}
	return ShareStateMetadata{Initializing: cp(v.Initializing), Initialized: cp(v.Initialized), Deleting: cp(v.Deleting)}
}

// ShareStatePartitions returns the share partitions a share group holds state for
// (initialized or initializing, by its ShareGroupStatePartitionMetadata), for deleting
// that state before the group (DeleteGroups); ok is false when group is not a share
// group here, with the code to answer for it (GROUP_ID_NOT_FOUND, NOT_COORDINATOR,
// COORDINATOR_LOAD_IN_PROGRESS), or NON_EMPTY_GROUP when it has members.
func (c *Coordinator) ShareStatePartitions(group string) (topics []ShareStateTopic, code int16, ok bool) {
	g, code := c.lookup(group, false)
	switch {
	case code != 0:
		return nil, code, false
	case g == nil:
		return nil, kerr.GroupIDNotFound.Code, false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case g.kind != kindShare || g.state == stateDead || g.sg == nil:
		return nil, kerr.GroupIDNotFound.Code, false
	case len(g.sg.members) > 0:
		return nil, kerr.NonEmptyGroup.Code, false
	}
	st := g.sg.state.clone()
	return append(st.Initialized, st.Initializing...), 0, true
}
