package sharesession

import (
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/samsa-broker/samsa/coordinator/share"
	"github.com/samsa-broker/samsa/net/transport"
)

// Cache holds the share sessions of a broker (KIP-932's share fetch sessions): per
// (group, member), the partitions the member fetches here and the
// epoch its next request must carry. ShareFetch at epoch 0 opens (or replaces) the
// member's session with the request's partitions; later requests carry the epoch
// the previous answer moved to (epoch+1, wrapping to 1) and add partitions (Topics)
// or remove them (ForgottenTopicsData); epoch -1 closes it. What a member holds on a
// partition leaving its session is released.
//
// At most max sessions are kept (group.share.max.share.sessions, 2000); a new one
// beyond that evicts the least recently used session idle for longer than idle, else
// it is refused with SHARE_SESSION_LIMIT_REACHED. Safe for concurrent use; a
// session's requests are serialized by the client (one in flight per broker).
type Cache struct {
	max int

	mu       sync.Mutex
	sessions map[Key]*Session
}

// Key names a session: a share group's member.
type Key struct{ Group, Member string }

// Session is one member's share session.
type Session struct {
	Key   Key
	conn  transport.Conn // the connection that opened it (nil: unknown)
	epoch int32          // the epoch the next request must carry
	Parts []share.Key    // the share partitions it fetches
	used  time.Time
}

// idle is how long a session must be unused before a new one may evict it.
const idle = time.Minute

// NewCache returns a cache of at most max sessions (2000 when max is not positive).
func NewCache(max int) *Cache {
	if max <= 0 {
		max = 2000
	}
	return &Cache{max: max, sessions: map[Key]*Session{}}
}

// nextEpoch is the epoch after e (Kafka: wraps to 1).
func nextEpoch(e int32) int32 {
	if e == 1<<31-1 {
		return 1
	}
	return e + 1
}

// Open starts a session for key with parts, replacing the member's previous one
// (whose partitions are returned so its records are released).
func (ss *Cache) Open(key Key, conn transport.Conn, parts []share.Key, now time.Time) (s *Session, replaced []share.Key, code int16) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if old := ss.sessions[key]; old != nil {
		replaced = old.Parts
		delete(ss.sessions, key)
	}
	if len(ss.sessions) >= ss.max {
		var lru *Session
		for _, c := range ss.sessions {
			if now.Sub(c.used) >= idle && (lru == nil || c.used.Before(lru.used)) {
				lru = c
			}
		}
		if lru == nil {
			return nil, replaced, kerr.ShareSessionLimitReached.Code
		}
		delete(ss.sessions, lru.Key)
	}
	s = &Session{Key: key, conn: conn, epoch: 1, used: now}
	s.add(parts)
	ss.sessions[key] = s
	return s, replaced, 0
}

// Next checks epoch against key's session and moves it on, adding and removing
// partitions; removed lists what left it.
func (ss *Cache) Next(key Key, epoch int32, add, forget []share.Key, now time.Time) (parts, removed []share.Key, code int16) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s := ss.sessions[key]
	switch {
	case s == nil:
		return nil, nil, kerr.ShareSessionNotFound.Code
	case s.epoch != epoch:
		return nil, nil, kerr.InvalidShareSessionEpoch.Code
	}
	s.epoch = nextEpoch(s.epoch)
	s.used = now
	s.add(add)
	for _, k := range forget {
		for i, p := range s.Parts {
			if p == k {
				s.Parts = append(s.Parts[:i], s.Parts[i+1:]...)
				removed = append(removed, k)
				break
			}
		}
	}
	return append([]share.Key(nil), s.Parts...), removed, 0
}

// Close ends key's session, returning its partitions (code: no session).
func (ss *Cache) Close(key Key) (parts []share.Key, code int16) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s := ss.sessions[key]
	if s == nil {
		return nil, kerr.ShareSessionNotFound.Code
	}
	delete(ss.sessions, key)
	return s.Parts, 0
}

// CloseConn ends the sessions conn opened (Kafka ties a share session to its
// connection), returning each one's member and partitions.
func (ss *Cache) CloseConn(conn transport.Conn) (closed []*Session) {
	if conn == nil {
		return nil
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	for k, s := range ss.sessions {
		if s.conn == conn {
			delete(ss.sessions, k)
			closed = append(closed, s)
		}
	}
	return closed
}

// Unused returns the keys no session lists.
func (ss *Cache) Unused(keys []share.Key) []share.Key {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	var out []share.Key
	for _, k := range keys {
		used := false
		for _, s := range ss.sessions {
			for _, p := range s.Parts {
				if p == k {
					used = true
					break
				}
			}
			if used {
				break
			}
		}
		if !used {
			out = append(out, k)
		}
	}
	return out
}

// Check reports whether key's session expects epoch (ShareAcknowledge), moving it on.
func (ss *Cache) Check(key Key, epoch int32, now time.Time) int16 {
	_, _, code := ss.Next(key, epoch, nil, nil, now)
	return code
}

func (s *Session) add(parts []share.Key) {
	for _, k := range parts {
		dup := false
		for _, p := range s.Parts {
			if p == k {
				dup = true
				break
			}
		}
		if !dup {
			s.Parts = append(s.Parts, k)
		}
	}
}
