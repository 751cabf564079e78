package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/samsa-broker/samsa/coordinator/metadata"
)

// FollowerConfig configures a MetadataFollower.
type FollowerConfig struct {
	// MaxBytes bounds one fetch (0: 1 MiB).
	MaxBytes int
	// Wait is the long poll of one fetch (0: 500 ms).
	Wait time.Duration
	// Backoff after a failed fetch (0: 500 ms).
	Backoff time.Duration
	Clock   Clock
	Logger  *slog.Logger
}

// MetadataFollower keeps a broker's published metadata image: it applies committed
// entries in offset order (from a MetadataSource in Run, or given to Apply and
// InstallSnapshot by a simulation) and publishes (offset, old, new image) to its
// subscribers.
//
// Invariants:
//
//  1. The published image is the image of a prefix of the committed log: the empty
//     image (or a snapshot) with every entry up to its offset applied in order, each
//     all or none (an entry the state machine rejects is skipped, as on every voter).
//  2. Offsets only grow; entries are applied exactly once; a batch that does not
//     start right after the offset (a gap) is refused whole (ErrOutOfOrder); entries
//     at or below it (a retried batch) are skipped.
//  3. Subscribers see publications one at a time, in offset order, each with the
//     image the previous one ended at as old.
//
// Safe for concurrent use.
type MetadataFollower struct {
	cfg FollowerConfig
	log *slog.Logger

	mu     sync.Mutex // guards the fields below
	offset uint64
	image  *metadata.Image
	leader int32
	term   uint64
	hw     uint64
	moved  chan struct{} // closed when offset moves

	pubMu sync.Mutex // held while publishing: publications are serialized
	subs  []func(offset uint64, old, new *metadata.Image)
}

// NewMetadataFollower returns a follower at offset 0 with the empty image.
func NewMetadataFollower(cfg FollowerConfig) *MetadataFollower {
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = 1 << 20
	}
	if cfg.Wait <= 0 {
		cfg.Wait = 500 * time.Millisecond
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = 500 * time.Millisecond
	}
	if cfg.Clock == nil {
		cfg.Clock = SystemClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &MetadataFollower{cfg: cfg, log: cfg.Logger, image: &metadata.Image{}, leader: -1, moved: make(chan struct{})}
}

// Subscribe registers fn, called with every publication from now on, in offset
// order, on the goroutine that applied it. fn must not call Apply or
// InstallSnapshot.
func (f *MetadataFollower) Subscribe(fn func(offset uint64, old, new *metadata.Image)) {
	f.pubMu.Lock()
	f.subs = append(f.subs, fn)
	f.pubMu.Unlock()
}

// Image returns the published offset and image.
func (f *MetadataFollower) Image() (uint64, *metadata.Image) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.offset, f.image
}

// Leader returns the quorum's leader and term as the last fetch reported them
// (-1: unknown): the controller id a broker reports.
func (f *MetadataFollower) Leader() (int32, uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.leader, f.term
}

// HighWatermark returns the last committed offset + 1 as the last fetch reported it.
func (f *MetadataFollower) HighWatermark() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.hw
}

// Apply applies a batch of committed entries (see the invariants) and publishes the
// image after the last entry it applied. A corrupt entry stops the batch there
// (what came before it is published) and returns an error wrapping
// metadata.ErrCorrupt.
func (f *MetadataFollower) Apply(b MetadataBatch) error {
	f.pubMu.Lock()
	defer f.pubMu.Unlock()
	f.mu.Lock()
	if b.Term > f.term || (b.Term == f.term && b.Leader != -1) {
		f.leader, f.term = b.Leader, b.Term
	}
	f.hw = max(f.hw, b.HighWatermark)
	start, old := f.offset, f.image
	f.mu.Unlock()

	off, im := start, old
	var err error
	for _, e := range b.Entries {
		if e.Offset <= off {
			continue
		}
		if e.Offset != off+1 {
			err = fmt.Errorf("%w: entry %d after offset %d", ErrOutOfOrder, e.Offset, off)
			break
		}
		if e.Data != nil {
			recs, _, derr := metadata.DecodeEntry(e.Data)
			if derr != nil {
				err = fmt.Errorf("metadata entry %d: %w", e.Offset, derr)
				break
			}
			next, aerr := im.Apply(recs...)
			if aerr != nil {
				f.log.Error("metadata follower: committed entry rejected by the state machine; skipped", "offset", e.Offset, "err", aerr)
			} else {
				im = next
			}
		}
		off = e.Offset
	}
	if off != start {
		f.publishLocked(off, old, im)
	}
	return err
}

// InstallSnapshot replaces the image with a snapshot's (metadata.EncodeSnapshot at
// offset) and publishes it. A snapshot at or below the current offset is ignored.
func (f *MetadataFollower) InstallSnapshot(offset uint64, data []byte) error {
	f.pubMu.Lock()
	defer f.pubMu.Unlock()
	f.mu.Lock()
	cur, old := f.offset, f.image
	f.mu.Unlock()
	if offset <= cur {
		return nil
	}
	im, err := metadata.DecodeSnapshot(data)
	if err != nil {
		return fmt.Errorf("metadata snapshot at %d: %w", offset, err)
	}
	f.log.Info("metadata follower: installed a snapshot", "offset", offset, "from", cur)
	f.publishLocked(offset, old, im)
	return nil
}

// publishLocked makes (offset, im) current and calls the subscribers. pubMu held.
func (f *MetadataFollower) publishLocked(offset uint64, old, im *metadata.Image) {
	f.mu.Lock()
	f.offset, f.image = offset, im
	close(f.moved)
	f.moved = make(chan struct{})
	f.mu.Unlock()
	for _, fn := range f.subs {
		fn(offset, old, im)
	}
}

// WaitFor blocks until the published offset reaches offset, or ctx ends.
func (f *MetadataFollower) WaitFor(ctx context.Context, offset uint64) error {
	for {
		f.mu.Lock()
		cur, ch := f.offset, f.moved
		f.mu.Unlock()
		if cur >= offset {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		}
	}
}

// Run fetches from src and applies what it returns until ctx ends (it returns nil
// then). A compacted offset is read from src's snapshot; failures are logged (at
// most every 10 s while they last) and retried after Backoff.
func (f *MetadataFollower) Run(ctx context.Context, src MetadataSource) error {
	var failingSince, lastLog time.Time
	for ctx.Err() == nil {
		off, _ := f.Image()
		b, err := src.Fetch(ctx, off+1, f.cfg.MaxBytes, f.cfg.Wait)
		switch {
		case errors.Is(err, ErrSnapshotNeeded):
			var soff uint64
			var data []byte
			if soff, data, err = src.Snapshot(ctx); err == nil {
				err = f.InstallSnapshot(soff, data)
			}
		case err == nil:
			err = f.Apply(b)
		}
		if err == nil {
			if !failingSince.IsZero() {
				f.log.Info("metadata follower: fetching again", "offset", off, "after", f.cfg.Clock.Now().Sub(failingSince))
				failingSince = time.Time{}
			}
			continue
		}
		if ctx.Err() != nil {
			return nil
		}
		now := f.cfg.Clock.Now()
		if failingSince.IsZero() {
			failingSince = now
		}
		if lastLog.IsZero() || now.Sub(lastLog) >= 10*time.Second {
			f.log.Warn("metadata follower: cannot fetch the metadata log; retrying", "offset", off+1,
				"failing for", now.Sub(failingSince), "err", err)
			lastLog = now
		}
		sleep(ctx, f.cfg.Clock, f.cfg.Backoff)
	}
	return nil
}

// sleep waits d on clock, or until ctx ends.
func sleep(ctx context.Context, clock Clock, d time.Duration) {
	ch := make(chan struct{})
	t := clock.AfterFunc(d, func() { close(ch) })
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-ch:
	}
}
