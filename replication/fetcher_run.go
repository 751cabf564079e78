package replication

import (
	"context"
	"slices"
	"time"
)

// attachFetcher hands p to the fetcher of its new leader (created if needed; started
// unless Manual).
func (m *Manager) attachFetcher(p *Partition, leader, epoch int32) {
	key := FetcherKey{Source: leader, Index: fetcherIndex(p.tp, m.cfg.NumReplicaFetchers)}
	m.fetchMu.Lock()
	f := m.fetchers[key]
	if f == nil {
		f = newFetcher(m, key)
		m.fetchers[key] = f
		if !m.cfg.Manual && !m.closed.Load() {
			f.startDriver(m.ctx)
		}
	}
	m.fetchMu.Unlock()
	p.fetcherA.Store(f)
	f.add(p, epoch)
}

// detachFetcher takes p from its fetcher, if it has one. Once it returns, no fetcher
// writes p's log.
func (m *Manager) detachFetcher(p *Partition) {
	if f := p.fetcherA.Swap(nil); f != nil {
		f.remove(p)
	}
}

// dropIdleFetchers stops the fetchers left with no partition (after an Apply).
func (m *Manager) dropIdleFetchers() {
	m.fetchMu.Lock()
	var idle []*Fetcher
	for k, f := range m.fetchers {
		if f.Len() == 0 {
			idle = append(idle, f)
			delete(m.fetchers, k)
		}
	}
	m.fetchMu.Unlock()
	for _, f := range idle {
		f.stopDriver()
	}
}

// Fetchers returns the fetchers, sorted by source and index (for Manual stepping and
// stats).
func (m *Manager) Fetchers() []*Fetcher {
	m.fetchMu.Lock()
	fs := make([]*Fetcher, 0, len(m.fetchers))
	for _, f := range m.fetchers {
		fs = append(fs, f)
	}
	m.fetchMu.Unlock()
	slices.SortFunc(fs, func(a, b *Fetcher) int {
		if a.key.Source != b.key.Source {
			return int(a.key.Source - b.key.Source)
		}
		return a.key.Index - b.key.Index
	})
	return fs
}

func (f *Fetcher) startDriver(ctx context.Context) {
	ctx, f.cancel = context.WithCancel(ctx)
	f.done = make(chan struct{})
	go f.run(ctx)
}

// stopDriver stops the fetcher's goroutine (if it has one) and waits for it.
func (f *Fetcher) stopDriver() {
	if f.cancel == nil || !f.stopped.CompareAndSwap(false, true) {
		return
	}
	f.cancel()
	<-f.done
}

// run is the fetcher's goroutine: send what Next says, hand the answer back, sleep
// until Next has something or a change wakes it.
func (f *Fetcher) run(ctx context.Context) {
	defer close(f.done)
	client := f.m.cfg.Fetch(f.key.Source, f.key.Index)
	t := time.NewTimer(time.Hour)
	t.Stop()
	for {
		if ctx.Err() != nil {
			return
		}
		req, wake := f.Next(f.m.clock.Now())
		if req.Empty() {
			var tc <-chan time.Time
			if !wake.IsZero() {
				t.Reset(max(time.Until(wake), 0))
				tc = t.C
			}
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-f.wake:
			case <-tc:
			}
			t.Stop()
			continue
		}
		timeout := f.m.cfg.Fetcher.MaxWait + 30*time.Second
		rctx, cancel := context.WithTimeout(ctx, timeout)
		switch {
		case req.Fetch != nil:
			resp, err := client.Fetch(rctx, req.Fetch)
			cancel()
			f.HandleFetch(f.m.clock.Now(), req.Fetch, resp, err)
		case req.ListOffsets != nil:
			resp, err := client.ListOffsets(rctx, req.ListOffsets)
			cancel()
			f.HandleListOffsets(f.m.clock.Now(), req.ListOffsets, resp, err)
		default:
			resp, err := client.OffsetForLeaderEpoch(rctx, req.OffsetForLeaderEpoch)
			cancel()
			f.HandleOffsetForLeaderEpoch(f.m.clock.Now(), req.OffsetForLeaderEpoch, resp, err)
		}
	}
}
