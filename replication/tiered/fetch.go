package tiered

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/samsa-broker/samsa/engine"
	"github.com/samsa-broker/samsa/replication"
)

// A consumer's fetch below the local log start, as Kafka's ReplicaManager
// serves one (Fetch):
//
//	remote reads over remote.log.manager.fetch.max.bytes.per.second?
//	  yes: Throttled, nothing read (Kafka's RLMQuotaManager: the partition is
//	       answered empty, without an error, and the fetch waits as a long poll)
//	  no:  the read (Read, and AbortedTransactions for READ_COMMITTED) runs
//	       on a goroutine of its own; Fetch waits for it up to
//	       remote.fetch.max.wait.ms (Kafka's DelayedRemoteFetch). Not done
//	       by then: no records and no error, as DelayedRemoteFetch's
//	       expiry answers; the read goes on and leaves its chunks in the
//	       chunk cache, where the client's next fetch finds them. A fetch of
//	       the same offset while a read of it is under way waits for that
//	       read rather than starting another, so a store that hangs holds
//	       one goroutine per offset asked for, not one per request.
//
// The bytes read count against the rate once read (even by a read that
// expired), as Kafka's RemoteLogReader records them.
//
// Every fetch that gets the read's records gets references of its own to
// their chunks (engine.Buffers.Retain), released with its answer; the read's
// own go when the read and every fetch that waited on it are done with it,
// whoever is last (pendingFetch.leave).

// fetchKey names a read under way.
type fetchKey struct {
	tp        engine.TopicPartition
	offset    int64
	maxBytes  int32
	committed bool
}

// pendingFetch is a read under way; res and err are set before done closes.
type pendingFetch struct {
	done  chan struct{}
	res   replication.RemoteFetch
	err   error
	users atomic.Int32 // the read and the fetches waiting on it (joined under Manager.mu)
}

// leave is a user of f done with it: the last releases the records read.
func (f *pendingFetch) leave() {
	if f.users.Add(-1) == 0 {
		f.res.Records.Release()
	}
}

// Fetch implements replication.RemoteLog.
func (m *Manager) Fetch(p *replication.Partition, offset int64, maxBytes int32, committed bool) (replication.RemoteFetch, error) {
	tp := p.TopicPartition()
	if m.fetchLim.over() {
		m.stats.topic(tp.Topic).fetchThrottled.Add(1)
		return replication.RemoteFetch{Throttled: true}, nil
	}
	k := fetchKey{tp, offset, maxBytes, committed}
	m.mu.Lock()
	f := m.fetches[k]
	if f == nil {
		if m.closed { // Close waits for wg: no Add once it may have begun
			m.mu.Unlock()
			return replication.RemoteFetch{}, fmt.Errorf("%w: the remote log manager is closed", replication.ErrRemoteStorage)
		}
		f = &pendingFetch{done: make(chan struct{})}
		f.users.Add(1) // the read's
		m.fetches[k] = f
		m.wg.Add(1)
		go m.runFetch(p, k, f)
	}
	f.users.Add(1)
	m.mu.Unlock()
	defer f.leave()
	t := time.NewTimer(m.cfg.FetchMaxWait)
	defer t.Stop()
	select {
	case <-f.done:
		res := f.res
		res.Records = res.Records.Retain()
		return res, f.err
	case <-t.C:
		m.stats.topic(tp.Topic).fetchExpires.Add(1)
		return replication.RemoteFetch{}, nil
	}
}

// runFetch reads for the fetches waiting on f.
func (m *Manager) runFetch(p *replication.Partition, k fetchKey, f *pendingFetch) {
	defer m.wg.Done()
	b, end, err := m.read(m.ctx, p, k.offset, k.maxBytes)
	var aborted []engine.AbortedTxn
	if err == nil && k.committed {
		aborted, err = m.AbortedTransactions(m.ctx, p, k.offset, end)
	}
	if err == nil {
		m.fetchLim.record(int64(b.Len()))
	} else {
		b.Release()
	}
	f.res, f.err = replication.RemoteFetch{Records: b, Aborted: aborted}, err
	m.mu.Lock()
	delete(m.fetches, k)
	m.mu.Unlock()
	// Left before the waiters are woken: the last of them, not this
	// goroutine scheduled later, lets the read's references go, before its
	// fetch is answered, so that the chunks' buffers are free for the next.
	f.leave()
	close(f.done)
}
