package metadatacache

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/samsa-broker/samsa/coordinator/metadata"
)

// View is the image a broker answers from, with its metadata offset: the last one the
// node's publisher (net/broker) published, after the replica manager, the feature
// levels and the coordinators took it. Handlers read it; the publisher alone writes
// it, in offset order. Safe for concurrent use.
type View struct {
	p         atomic.Pointer[imageAt]
	published notifier // closed and renewed by Publish
}

type imageAt struct {
	offset uint64
	im     *metadata.Image
}

func (v *View) load() imageAt {
	if p := v.p.Load(); p != nil {
		return *p
	}
	return imageAt{}
}

// Publish makes im, at offset, the image handlers answer from, and wakes the requests
// waiting for it (Wait).
func (v *View) Publish(offset uint64, im *metadata.Image) {
	v.p.Store(&imageAt{offset, im})
	v.published.broadcast()
}

// Load returns the image and its offset (nil before the first Publish).
func (v *View) Load() (uint64, *metadata.Image) {
	at := v.load()
	return at.offset, at.im
}

// Image is the image handlers answer from.
func (v *View) Image() *metadata.Image { return v.p.Load().im }

// Offset is Image's metadata offset.
func (v *View) Offset() uint64 { return v.p.Load().offset }

// Changed returns a channel that closes at the next Publish.
func (v *View) Changed() <-chan struct{} { return v.published.wait() }

// Wait waits until the image is at offset or later, or ctx ends. It wakes on Publish.
func (v *View) Wait(ctx context.Context, offset uint64) error {
	for {
		ch := v.published.wait()
		if v.Offset() >= offset {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// notifier wakes waiters: wait returns a channel that closes at the next broadcast.
type notifier struct {
	mu sync.Mutex
	ch chan struct{}
}

func (n *notifier) wait() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ch == nil {
		n.ch = make(chan struct{})
	}
	return n.ch
}

func (n *notifier) broadcast() {
	n.mu.Lock()
	if n.ch != nil {
		close(n.ch)
		n.ch = nil
	}
	n.mu.Unlock()
}
