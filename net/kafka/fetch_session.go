package kafka

import (
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/metadata"
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
const maxFetchSessions = 1000

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
}

// fetchSession is one KIP-227 session.
type fetchSession struct {
	id       int32
	topicIDs bool

	mu       sync.Mutex
	epoch    int32 // the epoch the next incremental request must carry
	parts    []*sessPart
	idx      map[sessKey]*sessPart
	lastUsed time.Time
}

// fetchSessions is a broker's session cache.
type fetchSessions struct {
	max int
	mu  sync.Mutex
	m   map[int32]*fetchSession
}

func newFetchSessions(max int) *fetchSessions {
	return &fetchSessions{max: max, m: make(map[int32]*fetchSession)}
}

// remove forgets session id.
func (c *fetchSessions) remove(id int32) {
	c.mu.Lock()
	delete(c.m, id)
	c.mu.Unlock()
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
	}
	var id int32
	for id == 0 || c.m[id] != nil {
		id = rand.Int32()
	}
	s := &fetchSession{id: id, topicIDs: topicIDs, epoch: 1, idx: make(map[sessKey]*sessPart), lastUsed: now}
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
		sp = &sessPart{key: k, hw: -1, lso: -1, logStart: -1}
		s.idx[k] = sp
		s.parts = append(s.parts, sp)
	}
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
