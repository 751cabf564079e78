package metadata

import (
	"hash/maphash"
	"iter"
)

// cowShards is the number of sub-maps of a cowMap (at most 32: owned sets are uint32).
const cowShards = 32

// cowSeed hashes keys to shards. It is random per process; that is harmless because
// shard placement never shows: lookups are exact and listings are sorted.
var cowSeed = maphash.MakeSeed()

// cowMap is a copy-on-write map for images: copying the struct is cheap (an array of
// cowShards map pointers), and a batch that changes a key copies only that key's shard.
// A cowMap reachable from a published Image is never modified; a builder modifies only
// the shards it has copied, which it tracks in an owned bit set.
type cowMap[K comparable, V any] struct {
	shards [cowShards]map[K]V
	n      int
}

func cowShard[K comparable](k K) int { return int(maphash.Comparable(cowSeed, k) % cowShards) }

func (m *cowMap[K, V]) get(k K) (V, bool) {
	v, ok := m.shards[cowShard(k)][k]
	return v, ok
}

func (m *cowMap[K, V]) len() int { return m.n }

// all yields every entry, in no particular order.
func (m *cowMap[K, V]) all() iter.Seq2[K, V] {
	return func(yield func(K, V) bool) {
		for _, s := range m.shards {
			for k, v := range s {
				if !yield(k, v) {
					return
				}
			}
		}
	}
}

// own makes shard i private to the caller's batch.
func (m *cowMap[K, V]) own(i int, owned *uint32) map[K]V {
	if *owned&(1<<i) == 0 {
		c := make(map[K]V, len(m.shards[i])+1)
		for k, v := range m.shards[i] {
			c[k] = v
		}
		m.shards[i] = c
		*owned |= 1 << i
	}
	return m.shards[i]
}

func (m *cowMap[K, V]) set(k K, v V, owned *uint32) {
	s := m.own(cowShard(k), owned)
	if _, ok := s[k]; !ok {
		m.n++
	}
	s[k] = v
}

func (m *cowMap[K, V]) del(k K, owned *uint32) {
	i := cowShard(k)
	if _, ok := m.shards[i][k]; !ok {
		return
	}
	delete(m.own(i, owned), k)
	m.n--
}
