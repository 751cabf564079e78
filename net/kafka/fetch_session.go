package kafka

import (
	"hash/maphash"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/metadata"
	"github.com/samsa-broker/samsa/engine"
	"github.com/samsa-broker/samsa/replication"
)

// Incremental fetch sessions (KIP-227).
//
// A session remembers the partitions a client fetches and, per partition, the fetch
// offset and limit it asked for and the HW, LSO and log start last sent. An
// incremental request names only what changed (new partitions, new offsets, forgotten
// partitions); its answer carries only partitions with records, an error or a changed
// HW / LSO / log start.
//
//	SessionID  SessionEpoch   meaning
//	0          -1             sessionless full fetch
//	id         -1             close session id, sessionless full fetch
//	0 or id    0              (close id,) open a new session with the request's
//	                          partitions: full fetch, answer carries the new id
//	id         n > 0          incremental fetch in session id; n must be the
//	                          session's epoch (INVALID_FETCH_SESSION_EPOCH), id must
//	                          exist (FETCH_SESSION_ID_NOT_FOUND); the epoch then
//	                          becomes n+1 (after MaxInt32: 1)
//
// The cache holds at most maxFetchSessions sessions; a new session evicts the least
// recently used one when it is full (Kafka prefers evicting small, idle sessions).
// A session is keyed by partition name for requests before v13 and by topic id from
// v13 on; switching within a session is FETCH_SESSION_TOPIC_ID_ERROR.
//
// Quiet partitions. An idle follower's incremental fetch
// names nothing, yet serving it would read every partition of the session (3,333 per
// follower for 10,000 partitions over three nodes) every replica.fetch.wait.max.ms.
// So a partition whose answer had nothing to send, its follower at the log end and in
// the ISR, goes quiet: replication is told (Partition.FollowerQuiet: the follower's
// fetches keep counting as caught-up fetches at that offset, through the session's
// clock), the partition is listed under its log in the broker's quietParts, and
// requests leave it out. It wakes when the request names it, when its log changes
// (the HighWatermarkMoved and LeaderAppended hooks: Broker.logChanged), when this
// broker's metadata image changes, and every quietRescan (which catches what no hook
// reports: a log start moved by retention or DeleteRecords). A woken partition is
// served by the session's parked long poll, which it completes, or by the next
// request. The scan of a request is then a flag test per partition; what is read,
// resolved and watched is the partitions that changed.
//
// A consumer's session does the same with the partitions this broker leads: a
// consumer reads up to the HW (read_committed: the LSO), so a partition whose answer
// had nothing to send, its fetch offset at that end, goes quiet, listed in the
// sessions' consumer list, which only a moved HW wakes (HighWatermarkMoved: an append
// the HW has not passed gives a consumer nothing, and an LSO moves only when the HW
// passes a marker). A follower's HW is not announced, so a consumer fetching from a
// follower (KIP-392) keeps reading every partition. A consumer's session over the
// 2,500 partitions of a 10,000-partition topic with four members otherwise read each
// of them at every fetch: half the broker's CPU at 5 records a second per partition.
const maxFetchSessions = 1000

// quietRescan is how often a follower's session serves its quiet partitions anyway
// (read when a broker's data path starts; tests change it before).
var quietRescan = 5 * time.Second

// sessKey names a partition in a session.
type sessKey struct {
	topic     string        // before v13
	id        metadata.UUID // v13+
	partition int32
}

// sessPart is one partition of a session. Its fields are guarded by the session's mu.
type sessPart struct {
	key                       sessKey
	fetchOffset               int64
	maxBytes                  int32
	currentEpoch, lastFetched int32
	hw, lso, logStart         int64 // last sent; -1 before the first answer
	removed                   bool

	sess  *fetchSession
	quiet bool // left out of requests until woken (see above)
	// awakeAt is its index in the session's awake list (not quiet, not removed), or -1.
	awakeAt int
	qlog    *engine.Log            // while quiet: its log, where quietParts lists it
	qrep    *replication.Partition // while quiet: its replica (FollowerQuiet was told)
}

// fetchSession is one KIP-227 session.
type fetchSession struct {
	id       int32
	topicIDs bool

	mu    sync.Mutex
	epoch int32 // the epoch the next incremental request must carry
	parts []*sessPart
	idx   map[sessKey]*sessPart
	// awake is the parts neither quiet nor removed, in no particular order: what a
	// request of a session with quiet parts serves, without a walk over all of them.
	awake    []*sessPart
	lastUsed time.Time

	// Its quiet partitions: a follower's (replicaID >= 0) or a consumer's (-1).
	replicaID int32
	quiet     *quietParts // fetchSessions.quiet or, for a consumer's, cquiet
	nquiet    int
	woken     atomic.Bool     // a partition woke since the last request collected them
	parked    *fetchOp        // the session's long poll, while parked
	im        *metadata.Image // the image the quiet partitions were served in
	scanned   time.Time       // when a request last served every partition
	clock     atomic.Int64    // its latest request's time (FollowerQuiet's clock)
	rescan    time.Duration   // quietRescan
}

// fetchSessions is a broker's session cache.
type fetchSessions struct {
	max    int
	mu     sync.Mutex
	m      map[int32]*fetchSession
	quiet  *quietParts   // followers' sessions: woken by appends and HW moves
	cquiet *quietParts   // consumers' sessions: woken by HW moves
	rescan time.Duration // quietRescan
}

func newFetchSessions(max int) *fetchSessions {
	return &fetchSessions{max: max, m: make(map[int32]*fetchSession), quiet: newQuietParts(), cquiet: newQuietParts(), rescan: quietRescan}
}

// remove forgets session id.
func (c *fetchSessions) remove(id int32) {
	c.mu.Lock()
	s := c.m[id]
	delete(c.m, id)
	c.mu.Unlock()
	if s != nil {
		s.drop()
	}
}

// drop wakes the quiet partitions of a session leaving the cache, so that quietParts
// no longer lists them (its clock stops: replication counts no more of its fetches).
func (s *fetchSession) drop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.nquiet == 0 {
		return
	}
	for _, sp := range s.parts {
		s.unquietLocked(sp)
	}
}

// get returns session id, or nil.
func (c *fetchSessions) get(id int32) *fetchSession {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[id]
}

// create opens a session, evicting the least recently used one when full. It returns
// nil when sessions are disabled (max 0).
func (c *fetchSessions) create(topicIDs bool, now time.Time) *fetchSession {
	if c.max <= 0 {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= c.max {
		var lru *fetchSession
		for _, s := range c.m {
			s.mu.Lock()
			if lru == nil || s.lastUsed.Before(lru.lastUsed) {
				lru = s
			}
			s.mu.Unlock()
		}
		delete(c.m, lru.id)
		defer lru.drop()
	}
	var id int32
	for id == 0 || c.m[id] != nil {
		id = rand.Int32()
	}
	s := &fetchSession{id: id, topicIDs: topicIDs, epoch: 1, idx: make(map[sessKey]*sessPart), lastUsed: now,
		replicaID: -1, quiet: c.quiet, rescan: c.rescan}
	c.m[id] = s
	return s
}

// len is the number of sessions.
func (c *fetchSessions) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}

// upsertLocked adds or updates a partition from a request.
func (s *fetchSession) upsertLocked(k sessKey, p *kmsg.FetchRequestTopicPartition) {
	sp := s.idx[k]
	if sp == nil {
		k.topic = strings.Clone(k.topic) // the request's name aliases its frame
		sp = &sessPart{key: k, hw: -1, lso: -1, logStart: -1, sess: s, awakeAt: -1}
		s.idx[k] = sp
		s.parts = append(s.parts, sp)
		s.awakeAddLocked(sp)
	}
	s.unquietLocked(sp) // the follower's state of it changed: served by this request
	sp.fetchOffset, sp.maxBytes = p.FetchOffset, p.PartitionMaxBytes
	sp.currentEpoch, sp.lastFetched = p.CurrentLeaderEpoch, p.LastFetchedEpoch
}

// forgetLocked removes a partition.
func (s *fetchSession) forgetLocked(k sessKey) {
	sp := s.idx[k]
	if sp == nil {
		return
	}
	delete(s.idx, k)
	s.unquietLocked(sp)
	s.awakeDelLocked(sp)
	sp.removed = true
	for i, q := range s.parts {
		if q == sp {
			s.parts = append(s.parts[:i], s.parts[i+1:]...)
			break
		}
	}
}

// openSession applies the request's session fields. It returns the session the
// request runs in (nil: sessionless), whether the answer must list every partition,
// and a top-level error.
func (c *fetchSessions) open(req *kmsg.FetchRequest, v int16, now time.Time) (s *fetchSession, full bool, err *kerr.Error) {
	if v < 7 {
		return nil, true, nil
	}
	topicIDs := v >= 13
	switch {
	case req.SessionEpoch == -1:
		if req.SessionID != 0 {
			c.remove(req.SessionID)
		}
		return nil, true, nil
	case req.SessionEpoch == 0:
		if req.SessionID != 0 {
			c.remove(req.SessionID)
		}
		s = c.create(topicIDs, now)
		if s == nil {
			return nil, true, nil
		}
		s.mu.Lock()
		if v >= 15 {
			s.replicaID = req.ReplicaState.ID
		} else {
			s.replicaID = req.ReplicaID
		}
		if s.replicaID < 0 {
			s.replicaID, s.quiet = -1, c.cquiet
		}
		s.scanned = now
		for i := range req.Topics {
			t := &req.Topics[i]
			for j := range t.Partitions {
				s.upsertLocked(keyOf(topicIDs, t.Topic, t.TopicID, t.Partitions[j].Partition), &t.Partitions[j])
			}
		}
		s.mu.Unlock()
		return s, true, nil
	}
	s = c.get(req.SessionID)
	if s == nil {
		return nil, false, kerr.FetchSessionIDNotFound
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.epoch != req.SessionEpoch {
		return nil, false, kerr.InvalidFetchSessionEpoch
	}
	if s.topicIDs != topicIDs {
		return nil, false, kerr.FetchSessionTopicIDError
	}
	if s.epoch == 1<<31-1 {
		s.epoch = 1
	} else {
		s.epoch++
	}
	s.lastUsed = now
	for i := range req.ForgottenTopics {
		f := &req.ForgottenTopics[i]
		for _, p := range f.Partitions {
			s.forgetLocked(keyOf(topicIDs, f.Topic, f.TopicID, p))
		}
	}
	for i := range req.Topics {
		t := &req.Topics[i]
		for j := range t.Partitions {
			s.upsertLocked(keyOf(topicIDs, t.Topic, t.TopicID, t.Partitions[j].Partition), &t.Partitions[j])
		}
	}
	return s, false, nil
}

func keyOf(topicIDs bool, topic string, id [16]byte, partition int32) sessKey {
	if topicIDs {
		return sessKey{id: id, partition: partition}
	}
	return sessKey{topic: topic, partition: partition}
}

// unquietLocked wakes sp if it is quiet, taking it off quietParts and ending its
// replica's quiet state (the fetches until now count). Caller holds s.mu.
func (s *fetchSession) unquietLocked(sp *sessPart) {
	if !sp.quiet {
		return
	}
	s.quiet.remove(sp.qlog, sp)
	if sp.qrep != nil {
		sp.qrep.FollowerAwake(s.replicaID, &s.clock)
	}
	sp.quiet, sp.qlog, sp.qrep = false, nil, nil
	s.nquiet--
	s.awakeAddLocked(sp)
}

// awakeAddLocked lists sp as awake. Caller holds s.mu.
func (s *fetchSession) awakeAddLocked(sp *sessPart) {
	if sp.awakeAt < 0 && !sp.removed {
		sp.awakeAt = len(s.awake)
		s.awake = append(s.awake, sp)
	}
}

// awakeDelLocked takes sp off the awake list (the last one takes its place). Caller
// holds s.mu.
func (s *fetchSession) awakeDelLocked(sp *sessPart) {
	i := sp.awakeAt
	if i < 0 {
		return
	}
	last := len(s.awake) - 1
	s.awake[i] = s.awake[last]
	s.awake[i].awakeAt = i
	s.awake[last] = nil
	s.awake = s.awake[:last]
	sp.awakeAt = -1
}

// collectLocked returns the partitions a request of a quiet session serves: the
// ones not quiet, or all of them after a metadata change or quietRescan. Caller holds
// s.mu.
func (s *fetchSession) collectLocked(im *metadata.Image, now time.Time) []*sessPart {
	s.woken.Store(false)
	if s.nquiet == 0 {
		s.im, s.scanned = im, now
		return s.parts
	}
	if s.im != im || now.Sub(s.scanned) >= s.rescan {
		for _, sp := range s.parts {
			s.unquietLocked(sp)
		}
		s.im, s.scanned = im, now
		return s.parts
	}
	return s.awake
}

// quietParts lists the quiet partitions of sessions by log, so that a change to a log
// wakes them (Broker.logChanged, Broker.leaderAppended).
type quietParts struct {
	seed   maphash.Seed
	shards [64]quietShard
}

type quietShard struct {
	mu sync.Mutex
	m  map[*engine.Log][]*sessPart
	_  [40]byte
}

func newQuietParts() *quietParts {
	q := &quietParts{seed: maphash.MakeSeed()}
	for i := range q.shards {
		q.shards[i].m = make(map[*engine.Log][]*sessPart)
	}
	return q
}

func (q *quietParts) shard(l *engine.Log) *quietShard {
	return &q.shards[maphash.Comparable(q.seed, l)%uint64(len(q.shards))]
}

func (q *quietParts) add(l *engine.Log, sp *sessPart) {
	sh := q.shard(l)
	sh.mu.Lock()
	sh.m[l] = append(sh.m[l], sp)
	sh.mu.Unlock()
}

func (q *quietParts) remove(l *engine.Log, sp *sessPart) {
	sh := q.shard(l)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	list := sh.m[l]
	for i, x := range list {
		if x == sp {
			list[i] = list[len(list)-1]
			list[len(list)-1] = nil
			list = list[:len(list)-1]
			break
		}
	}
	if len(list) == 0 {
		delete(sh.m, l)
	} else {
		sh.m[l] = list
	}
}

// wake wakes the quiet partitions of l: each is served by its session's next request,
// which the answer to its parked long poll (completed here, with what the partitions
// it reads hold) makes the follower or consumer send at once.
func (q *quietParts) wake(l *engine.Log) {
	sh := q.shard(l)
	sh.mu.Lock()
	list := sh.m[l]
	if list == nil {
		sh.mu.Unlock()
		return
	}
	delete(sh.m, l)
	sh.mu.Unlock()
	for _, sp := range list {
		s := sp.sess
		s.mu.Lock()
		var op *fetchOp
		if sp.quiet && sp.qlog == l {
			sp.quiet, sp.qlog, sp.qrep = false, nil, nil
			s.nquiet--
			s.awakeAddLocked(sp)
			s.woken.Store(true)
			op = s.parked
		}
		s.mu.Unlock()
		if op != nil {
			op.ForceComplete()
		}
	}
}

// quietLen is the number of partitions quietParts lists (tests).
func (q *quietParts) quietLen() int {
	n := 0
	for i := range q.shards {
		sh := &q.shards[i]
		sh.mu.Lock()
		for _, l := range sh.m {
			n += len(l)
		}
		sh.mu.Unlock()
	}
	return n
}

// hasQuiet reports whether the session has quiet partitions (a long poll then waits
// for them even when it reads no log).
func (s *fetchSession) hasQuiet() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.nquiet > 0
}

// setParked records op as the session's parked long poll.
func (s *fetchSession) setParked(op *fetchOp) {
	s.mu.Lock()
	s.parked = op
	s.mu.Unlock()
}

// unpark forgets op as the session's parked long poll.
func (s *fetchSession) unpark(op *fetchOp) {
	s.mu.Lock()
	if s.parked == op {
		s.parked = nil
	}
	s.mu.Unlock()
}

// quietIdle makes quiet the parts of op at idx, answered with nothing to send, their
// follower at the log end (a consumer: at the HW or LSO it reads to): those
// replication agrees to (FollowerQuiet; a consumer's need no agreement) leave the
// session's requests until woken. Called before the answer is sent, so the next
// request finds them quiet.
func (op *fetchOp) quietIdle(idx []int) {
	s := op.sess
	ok := idx
	if op.replica {
		ok = idx[:0]
		for _, i := range idx {
			p := &op.parts[i]
			if p.rep.FollowerQuiet(op.replicaID, p.offset, &s.clock) {
				ok = append(ok, i)
			}
		}
	}
	if len(ok) == 0 {
		return
	}
	s.mu.Lock()
	for _, i := range ok {
		p := &op.parts[i]
		sp := p.sp
		if sp.removed || sp.quiet || sp.fetchOffset != p.offset {
			continue
		}
		sp.quiet, sp.qlog, sp.qrep = true, p.log, nil
		if op.replica {
			sp.qrep = p.rep // FollowerQuiet was told: FollowerAwake ends it
		}
		s.awakeDelLocked(sp)
		s.nquiet++
		s.quiet.add(p.log, sp)
	}
	s.mu.Unlock()
	// A change between the gather and the listing above woke nobody: look again.
	for _, i := range ok {
		p := &op.parts[i]
		moved := p.log.HighWatermark() != p.hw || p.log.LogStartOffset() != p.logStart
		if op.replica {
			moved = moved || p.log.LogEndOffset() != p.offset
		} else {
			moved = moved || p.log.LastStableOffset() != p.lso
		}
		if moved {
			s.quiet.wake(p.log)
		}
	}
}
