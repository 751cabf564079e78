package kafka

// The cache of encoded all-topics Metadata answers. A client refreshes the metadata of
// every topic every metadata.max.age.ms, and many clients at once after a leader
// change; with 10,000 partitions one answer is ~250 KiB built from the image and
// encoded. As long as the image does not move, every such answer of the same shape is
// the same bytes, so the body is encoded once and kept:
//
//	wire:   [ size ][ response header ][ throttle_time_ms ][ rest of the body ... ]
//	chunks:         └─ per request (a pooled 16 bytes) ──┘ └─ shared, read-only ──┘
//
// The response header (the correlation id, the flexible versions' tag byte) and, from
// v3, throttle_time_ms (the body's first field, the request quota's throttle) are
// written per request in front of the cached rest of the body; the transport writes
// both chunks, nothing is copied.
//
// Invariants:
//
//  1. An entry answers only requests of its key: the request version, the listener
//     whose endpoints are advertised (endpointFor), the advertised controller
//     (advertisedController, read per request: the active controller can move
//     without a new image), and the two include_*_authorized_operations flags (the
//     handler ignores them today; keyed so that a change there cannot mix answers).
//  2. Every entry was encoded from the image the cache holds (metadataCache.im, at
//     its offset); the first request that reads a newer image drops them all, one
//     that read an older one is not cached. Entries are at most maxMetadataEntries,
//     the oldest dropped first.
//  3. Only a request whose answer is the handler's alone is cached: no amend
//     (net/authz's Decision.Amend) is set. Under an authorizer every principal but a
//     super user has its topics filtered by amend, and KIP-430's authorized
//     operations are filled per principal by amend, so those requests take the
//     uncached path; a super user's
//     answer, and every answer on a listener without an authorizer, is the same for
//     every principal. While a log directory is offline (metadatacache.DirHealth) nothing is cached
//     either: the answer then depends on the engine, not only on the image.
//  4. At most one encoding per key and image: requests that arrive while it runs
//     wait for it (singleflight); if it fails (a panic) they fall back to encoding
//     their own answer.
//
// Error codes of the answer (samsa_request_errors_total) are tallied once at the
// encoding and added again for every answer served from the entry.

import (
	"encoding/binary"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/metadata"
	"github.com/samsa-broker/samsa/net/transport"
	"github.com/samsa-broker/samsa/net/wire"
)

// maxMetadataEntries bounds the cache: versions × listeners × flags in use at once are
// a handful (a client library sends one version).
const maxMetadataEntries = 8

// metadataKey is what an all-topics answer depends on besides the image (invariant 1).
type metadataKey struct {
	version    int16
	listener   string // the SecureListener's name, "" for the broker's own listener
	controller int32
	clusterOps bool
	topicOps   bool
}

// metadataEntry is one cached answer. body and errs are written once, before done is
// closed, and read-only afterwards.
type metadataEntry struct {
	key  metadataKey
	done chan struct{}
	ok   bool   // body is valid (false: the encoding failed)
	body []byte // the encoded body, throttle_time_ms 0
	errs []codeCount
}

// codeCount is one error code of an answer and how often it occurs.
type codeCount struct {
	code int16
	n    int
}

// errorTally collects an answer's error codes (a wire.ErrorSink).
type errorTally struct{ counts []codeCount }

func (t *errorTally) CountError(code int16) {
	if code == 0 {
		return
	}
	for i := range t.counts {
		if t.counts[i].code == code {
			t.counts[i].n++
			return
		}
	}
	t.counts = append(t.counts, codeCount{code, 1})
}

// metadataCache holds the encoded all-topics answers of one image. Safe for concurrent
// use by every connection's read goroutine.
type metadataCache struct {
	disabled atomic.Bool // every request takes the uncached path (benchmarks, tests)
	mu       struct {
		sync.Mutex
		off     uint64 // im's offset
		im      *metadata.Image
		entries []*metadataEntry // oldest first
	}
}

func newMetadataCache() *metadataCache { return &metadataCache{} }

// entry returns the entry of key for image im at offset off, and whether the caller is
// to fill it (it was just created, its done still open); nil when the cache already
// holds a newer image (a request that read the image just before it moved).
func (c *metadataCache) entry(off uint64, im *metadata.Image, key metadataKey) (e *metadataEntry, fill bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.mu.im != nil && off < c.mu.off:
		return nil, false
	case c.mu.im != im:
		c.mu.off, c.mu.im, c.mu.entries = off, im, nil
	}
	for _, e := range c.mu.entries {
		if e.key == key {
			return e, false
		}
	}
	e = &metadataEntry{key: key, done: make(chan struct{})}
	if len(c.mu.entries) == maxMetadataEntries {
		c.mu.entries = append(c.mu.entries[:0], c.mu.entries[1:]...)
	}
	c.mu.entries = append(c.mu.entries, e)
	return e, true
}

// drop removes e (an entry whose encoding failed).
func (c *metadataCache) drop(e *metadataEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.entries = slices.DeleteFunc(c.mu.entries, func(x *metadataEntry) bool { return x == e })
}

// size is the number of entries (tests).
func (c *metadataCache) size() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.mu.entries)
}

// respondCachedMetadata answers r, an all-topics Metadata request, from the cache and
// reports true, or reports false when the request is not one to cache (invariant 3):
// the caller then answers it itself.
func (b *Broker) respondCachedMetadata(r *Request, req *kmsg.MetadataRequest) bool {
	c := b.mdCache
	if c == nil || c.disabled.Load() || r.Amended() || len(b.dirs.Offline()) > 0 {
		return false
	}
	off, im := b.Image()
	key := metadataKey{
		version:    r.Header.Version,
		controller: b.route.AdvertisedController(im),
		clusterOps: req.IncludeClusterAuthorizedOperations,
		topicOps:   req.IncludeTopicAuthorizedOperations,
	}
	if cs := secOf(r); cs != nil {
		key.listener = cs.Listener()
	}
	e, fill := c.entry(off, im, key)
	switch {
	case e == nil:
		return false
	case fill:
		b.fillMetadataEntry(c, e, im, r, req)
	default:
		<-e.done
	}
	if !e.ok {
		return false
	}
	for _, cc := range e.errs {
		r.CountError(cc.code, cc.n)
	}
	r.RespondEncoded(cachedMetadataResponse(&r.Header, e.body, r.Throttle()))
	return true
}

// fillMetadataEntry encodes the answer of e's key from im and closes e.done, also when
// the encoding panics (e.ok stays false, the entry leaves the cache; the panic goes on
// to request.Recover).
func (b *Broker) fillMetadataEntry(c *metadataCache, e *metadataEntry, im *metadata.Image, r *Request, req *kmsg.MetadataRequest) {
	defer func() {
		if !e.ok {
			c.drop(e)
		}
		close(e.done)
	}()
	resp := b.metadataResponseFrom(im, r, req, true, nil)
	resp.ControllerID = e.key.controller // the key's, should the controller move meanwhile
	resp.SetVersion(r.Header.Version)
	var tally errorTally
	wire.ErrorCodes(resp, &tally)
	e.body, e.errs, e.ok = resp.AppendTo(nil), tally.counts, true
}

// metadataThrottleVersion is the first version whose body begins with throttle_time_ms.
const metadataThrottleVersion = 3

// cachedMetadataResponse frames a cached body for header h: the header and, from v3,
// the throttle time in a pooled chunk, the rest of body shared.
func cachedMetadataResponse(h *Header, body []byte, throttle int32) transport.Response {
	cr := cachedResps.Get().(*cachedResp)
	head := wire.AppendResponseHeader(cr.head[:0], h)
	rest := body
	if h.Version >= metadataThrottleVersion && len(body) >= 4 {
		head = binary.BigEndian.AppendUint32(head, uint32(max(throttle, 0)))
		rest = body[4:]
	}
	cr.chunks[0] = transport.Chunk{Bytes: head}
	cr.chunks[1] = transport.Chunk{Bytes: rest}
	return transport.Response{Chunks: cr.chunks[:], Release: cr}
}

// cachedResp is the per-request part of a cached answer; it releases itself.
type cachedResp struct {
	head   [16]byte // a response header is at most 5 bytes, the throttle time 4
	chunks [2]transport.Chunk
}

var cachedResps = sync.Pool{New: func() any { return new(cachedResp) }}

// Release implements transport.Releaser.
func (cr *cachedResp) Release() {
	cr.chunks = [2]transport.Chunk{}
	cachedResps.Put(cr)
}
