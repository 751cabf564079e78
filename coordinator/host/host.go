// Package host hosts a coordinator of an internal topic's partitions on the node that
// leads them: the group coordinator over __consumer_offsets, the transaction
// coordinator over __transaction_state, the share coordinator over
// __share_group_state. It is Kafka's BrokerMetadataPublisher.updateCoordinator(topic,
// onElection, onResignation), written once for the three:
//
//	image published ─▶ Follow(im)
//	   topic gone, or another topic id, or another partition count (nothing loaded):
//	       unload everything; a new coordinator for the topic's partition count
//	   per partition p of the topic:
//	       this node leads p (at a leader epoch above the loaded one, with ByEpoch)
//	           ─▶ Load(c, p, epoch, done)    onElection
//	       this node no longer leads p
//	           ─▶ Unload(c, p)               onResignation
//	   done(err): p is forgotten, and after Retry the last image is followed again
//	   (this node may lead p before its replica manager made it leader; a read may fail)
//
// Invariants (under Host.mu):
//  1. loaded holds exactly the partitions a Load was started for and neither an Unload
//     nor a failed load has ended since, each at the leader epoch it was loaded at.
//  2. loaded refers to the coordinator c and the topic topicID: a new coordinator or
//     topic starts with loaded empty, every partition of the old one unloaded first.
//  3. After Close, Follow does nothing and Coordinator returns the zero C.
//
// Follow calls are serialized (followMu); Load, Unload and Close of the coordinator
// are called with no lock of the Host held, Load after the Unloads of the same Follow.
package host

import (
	"sync"
	"time"

	"github.com/samsa-broker/samsa/coordinator/metadata"
)

// Config is a Host's coordinator kind and the node it runs on. C is the coordinator's
// type (a pointer); the functions adapt it, so that callers keep its concrete type.
type Config[C comparable] struct {
	// Topic is the internal topic whose partitions the coordinator serves.
	Topic string
	// Self is this node's id.
	Self int32
	// New builds a coordinator for n partitions of the topic (im is the image that
	// asked for it; nil before any image).
	New func(im *metadata.Image, n int32) C
	// DefaultPartitions is the partition count of the coordinator built before the
	// topic exists (its key: offsets.topic.num.partitions, ...); Lazy builds none
	// until the topic exists (Coordinator returns the zero C meanwhile).
	DefaultPartitions int32
	Lazy              bool
	// NumPartitions, Load, Unload and Close drive the coordinator. Load starts loading
	// p at leader epoch epoch and calls done once it is loaded (nil) or failed.
	NumPartitions func(c C) int32
	Load          func(c C, p, epoch int32, done func(error))
	Unload        func(c C, p int32)
	Close         func(c C)
	// ByEpoch loads a partition again when this node leads it at a newer leader epoch
	// (the transaction coordinator's coordinator epoch); without it a partition is
	// loaded once for as long as this node leads it.
	ByEpoch bool
	// Retry is the wait before a partition whose load failed is followed again, and
	// After runs fn after d unless the node is closing (the broker's goroutines).
	Retry time.Duration
	After func(d time.Duration, fn func())
	// Failed, if set, hears of each failed load (logging).
	Failed func(p int32, err error)
	// Followed, if set, runs at the end of every Follow with the coordinator and
	// whether it was built by this Follow (the group coordinator takes the image's
	// topics there). Under followMu, with no other lock held.
	Followed func(c C, im *metadata.Image, rebuilt bool)
}

// Host is one coordinator kind's hosting on this node. Safe for concurrent use.
type Host[C comparable] struct {
	cfg Config[C]

	followMu sync.Mutex      // serializes Follow (the publisher's and load retries')
	last     *metadata.Image // the image Follow last followed (under followMu)

	mu struct {
		sync.Mutex
		c       C
		topicID metadata.UUID
		loaded  map[int32]int32 // partition → leader epoch loaded at
		closed  bool
	}
}

// New returns a Host of cfg's coordinator kind, with its first coordinator built
// (unless Lazy) for the topic's partition count in im (im may be nil), or
// DefaultPartitions before the topic exists. It follows nothing yet.
func New[C comparable](cfg Config[C], im *metadata.Image) *Host[C] {
	h := &Host[C]{cfg: cfg}
	h.mu.loaded = map[int32]int32{}
	if !cfg.Lazy {
		n := cfg.DefaultPartitions
		if im != nil {
			if t, ok := im.Topic(cfg.Topic); ok {
				n = int32(len(t.Partitions))
			}
		}
		h.mu.c = cfg.New(im, n)
	}
	return h
}

// Coordinator returns the current coordinator: the zero C after Close, or before the
// topic exists for a Lazy host.
func (h *Host[C]) Coordinator() C {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.mu.closed {
		var zero C
		return zero
	}
	return h.mu.c
}

// Loaded reports whether partition p is loaded or loading here.
func (h *Host[C]) Loaded(p int32) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	_, ok := h.mu.loaded[p]
	return ok
}

// Follow loads the partitions of the topic this node leads in im and unloads the
// others (see the package doc).
func (h *Host[C]) Follow(im *metadata.Image) {
	h.followMu.Lock()
	defer h.followMu.Unlock()
	h.last = im
	h.followLocked(im)
}

// refollow follows the last image again (a load retry).
func (h *Host[C]) refollow() {
	h.followMu.Lock()
	defer h.followMu.Unlock()
	if h.last != nil {
		h.followLocked(h.last)
	}
}

type load struct{ p, epoch int32 }

// followLocked is Follow's body. Caller holds followMu.
func (h *Host[C]) followLocked(im *metadata.Image) {
	var zero C
	self := h.cfg.Self
	h.mu.Lock()
	if h.mu.closed {
		h.mu.Unlock()
		return
	}
	c := h.mu.c
	var unload []int32
	var loads []load
	var old C // a coordinator replaced by this Follow, closed once its partitions are unloaded
	t, ok := im.Topic(h.cfg.Topic)
	if !ok || t.ID != h.mu.topicID {
		for p := range h.mu.loaded {
			unload = append(unload, p)
		}
		clear(h.mu.loaded)
	}
	rebuilt := false
	if ok {
		h.mu.topicID = t.ID
		n := int32(len(t.Partitions))
		if c == zero || (h.cfg.NumPartitions(c) != n && len(h.mu.loaded) == 0) {
			old = c
			c = h.cfg.New(im, n)
			h.mu.c, rebuilt = c, true
		}
		for i := range t.Partitions {
			p, pi := int32(i), &t.Partitions[i]
			epoch, loaded := h.mu.loaded[p]
			leads := pi.Leader == self
			switch {
			case leads && (!loaded || h.cfg.ByEpoch && epoch < pi.LeaderEpoch):
				h.mu.loaded[p] = pi.LeaderEpoch
				loads = append(loads, load{p, pi.LeaderEpoch})
			case !leads && loaded:
				delete(h.mu.loaded, p)
				unload = append(unload, p)
			}
		}
	} else if h.cfg.Lazy && c != zero {
		old, c = c, zero
		h.mu.c, h.mu.topicID = zero, metadata.UUID{}
	}
	h.mu.Unlock()
	// The partitions of a replaced coordinator are the old one's.
	unloadFrom := c
	if old != zero {
		unloadFrom = old
	}
	for _, p := range unload {
		h.cfg.Unload(unloadFrom, p)
	}
	if old != zero {
		h.cfg.Close(old)
	}
	if h.cfg.Followed != nil && c != zero {
		h.cfg.Followed(c, im, rebuilt)
	}
	for _, l := range loads {
		h.cfg.Load(c, l.p, l.epoch, func(err error) {
			if err != nil {
				h.loadFailed(c, l, err)
			}
		})
	}
}

// loadFailed forgets that l.p is loaded at l.epoch, so that it is loaded again after
// Retry if this node still leads it.
func (h *Host[C]) loadFailed(c C, l load, err error) {
	if h.cfg.Failed != nil {
		h.cfg.Failed(l.p, err)
	}
	h.mu.Lock()
	if h.mu.c == c {
		if e, ok := h.mu.loaded[l.p]; ok && e == l.epoch {
			delete(h.mu.loaded, l.p)
		}
	}
	closed := h.mu.closed
	h.mu.Unlock()
	if closed {
		return
	}
	h.cfg.After(h.cfg.Retry, h.refollow)
}

// Close closes the coordinator; Follow does nothing afterwards.
func (h *Host[C]) Close() {
	var zero C
	h.mu.Lock()
	if h.mu.closed {
		h.mu.Unlock()
		return
	}
	h.mu.closed = true
	c := h.mu.c
	h.mu.Unlock()
	if c != zero {
		h.cfg.Close(c)
	}
}
