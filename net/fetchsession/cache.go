package fetchsession

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/engine"
)

// Cache is a broker's fetch-session cache (Kafka's FetchSessionCache).
type Cache struct {
	max    int
	mu     sync.Mutex
	m      map[int32]*Session
	quiet  *quietParts   // followers' sessions: woken by appends and HW moves
	cquiet *quietParts   // consumers' sessions: woken by HW moves
	rescan time.Duration // how often a session with quiet parts serves them all anyway
}

// NewCache returns a cache of at most max sessions (0: sessions are disabled, every
// fetch is sessionless) whose sessions serve their quiet partitions anyway every
// rescan.
func NewCache(max int, rescan time.Duration) *Cache {
	return &Cache{max: max, m: make(map[int32]*Session), quiet: newQuietParts(), cquiet: newQuietParts(), rescan: rescan}
}

// Remove forgets session id (nothing when there is none).
func (c *Cache) Remove(id int32) {
	c.mu.Lock()
	s := c.m[id]
	delete(c.m, id)
	c.mu.Unlock()
	if s != nil {
		s.drop()
	}
}

// Clear forgets every session, as Remove would one by one.
func (c *Cache) Clear() {
	c.mu.Lock()
	gone := make([]*Session, 0, len(c.m))
	for id, s := range c.m {
		gone = append(gone, s)
		delete(c.m, id)
	}
	c.mu.Unlock()
	for _, s := range gone {
		s.drop()
	}
}

// get returns session id, or nil.
func (c *Cache) get(id int32) *Session {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[id]
}

// create opens a session, evicting the least recently used one when full. It returns
// nil when sessions are disabled (max 0).
func (c *Cache) create(topicIDs bool, now time.Time) *Session {
	if c.max <= 0 {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= c.max {
		var lru *Session
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
	s := &Session{id: id, topicIDs: topicIDs, epoch: 1, idx: make(map[Key]*Part), lastUsed: now,
		replicaID: -1, quiet: c.quiet, rescan: c.rescan}
	c.m[id] = s
	return s
}

// Len is the number of sessions.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}

// Open applies the session fields of req, a Fetch request of version v. It returns
// the session the request runs in (nil: sessionless), whether the answer must list
// every partition, and a top-level error (FETCH_SESSION_ID_NOT_FOUND,
// INVALID_FETCH_SESSION_EPOCH, FETCH_SESSION_TOPIC_ID_ERROR). req's strings may alias
// its frame: a session copies the names it keeps.
func (c *Cache) Open(req *kmsg.FetchRequest, v int16, now time.Time) (s *Session, full bool, err *kerr.Error) {
	if v < 7 {
		return nil, true, nil
	}
	topicIDs := v >= 13
	switch {
	case req.SessionEpoch == -1:
		if req.SessionID != 0 {
			c.Remove(req.SessionID)
		}
		return nil, true, nil
	case req.SessionEpoch == 0:
		if req.SessionID != 0 {
			c.Remove(req.SessionID)
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

// Wake wakes the quiet partitions of the followers' sessions on l, and those of the
// consumers' sessions too when hwMoved (an append the HW has not passed gives a
// consumer nothing). Each is served by its session's next request, which the answer
// to its parked long poll (completed here) makes the follower or consumer send at
// once.
func (c *Cache) Wake(l *engine.Log, hwMoved bool) {
	c.quiet.wake(l)
	if hwMoved {
		c.cquiet.wake(l)
	}
}

// QuietParts is the number of quiet partitions listed, of the followers' sessions and
// of the consumers'.
func (c *Cache) QuietParts() (followers, consumers int) {
	return c.quiet.len(), c.cquiet.len()
}

// Check verifies the invariants of every session (invariant 1 of the package doc):
// the awake list holds exactly the parts neither quiet nor removed, each at the index
// it records. For tests: it takes every lock in turn.
func (c *Cache) Check() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	for id, s := range c.m {
		s.mu.Lock()
		awake := 0
		for _, sp := range s.parts {
			if sp.quiet != (sp.awakeAt < 0) {
				errs = append(errs, fmt.Errorf("session %d: partition %v quiet %v, listed awake at %d", id, sp.f.Key, sp.quiet, sp.awakeAt))
			}
			if sp.awakeAt >= 0 {
				awake++
				if sp.awakeAt >= len(s.awake) || s.awake[sp.awakeAt] != sp {
					errs = append(errs, fmt.Errorf("session %d: partition %v not at its awake index %d", id, sp.f.Key, sp.awakeAt))
				}
			}
		}
		if awake != len(s.awake) || awake+s.nquiet != len(s.parts) {
			errs = append(errs, fmt.Errorf("session %d: %d awake listed, %d counted, %d quiet, %d parts", id, len(s.awake), awake, s.nquiet, len(s.parts)))
		}
		s.mu.Unlock()
	}
	return errors.Join(errs...)
}
