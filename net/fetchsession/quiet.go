package fetchsession

import (
	"hash/maphash"
	"sync"

	"github.com/samsa-broker/samsa/engine"
)

// quietParts lists the quiet partitions of sessions by log, so that a change to a log
// wakes them (Cache.Wake). Sharded by log: a produce wakes many logs at once.
type quietParts struct {
	seed   maphash.Seed
	shards [64]quietShard
}

type quietShard struct {
	mu sync.Mutex
	m  map[*engine.Log][]*Part
	_  [40]byte
}

func newQuietParts() *quietParts {
	q := &quietParts{seed: maphash.MakeSeed()}
	for i := range q.shards {
		q.shards[i].m = make(map[*engine.Log][]*Part)
	}
	return q
}

func (q *quietParts) shard(l *engine.Log) *quietShard {
	return &q.shards[maphash.Comparable(q.seed, l)%uint64(len(q.shards))]
}

func (q *quietParts) add(l *engine.Log, sp *Part) {
	sh := q.shard(l)
	sh.mu.Lock()
	sh.m[l] = append(sh.m[l], sp)
	sh.mu.Unlock()
}

func (q *quietParts) remove(l *engine.Log, sp *Part) {
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
		var op Parked
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

// len is the number of partitions listed.
func (q *quietParts) len() int {
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
