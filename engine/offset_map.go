package engine

import (
	"hash/maphash"
)

// offsetMap is the cleaner's key → last offset map (Kafka's
// SkimpyOffsetMap): a fixed-size open-addressing table of 128-bit key
// hashes and offsets, so that its memory is bounded whatever the keys. A
// slot is 24 bytes (two 64-bit hashes, one offset); the number of slots is
// the largest prime that fits the memory given, and the map counts as full
// at loadFactor of them. Two different keys whose 128-bit hashes collide
// would be taken for one (as in Kafka, with MD5): with 2^24 keys the
// chance is about 2^-81.
//
// It is used by one goroutine at a time (its cleaner thread).
type offsetMap struct {
	seeds  [2]maphash.Seed
	hashes []uint64 // 2 per slot
	offs   []int64  // -1: empty
	slots  uint64
	n      int
	maxN   int
	latest int64 // the last offset the map covers (Kafka's latestOffset); -1 when empty
	// lookups and probes count the work of the last build, for the stats.
	lookups, probes int64
}

// offsetMapSlotSize is the memory of one slot.
const offsetMapSlotSize = 24

// newOffsetMap returns a map that takes at most memory bytes.
func newOffsetMap(memory int64, loadFactor float64) *offsetMap {
	slots := uint64(max(memory/offsetMapSlotSize, 2))
	slots = prevPrime(slots)
	m := &offsetMap{
		hashes: make([]uint64, 2*slots),
		offs:   make([]int64, slots),
		slots:  slots,
		maxN:   max(int(float64(slots)*loadFactor), 1),
	}
	m.clear()
	return m
}

// clear empties the map (and draws new hash seeds).
func (m *offsetMap) clear() {
	m.seeds = [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}
	for i := range m.offs {
		m.offs[i] = -1
	}
	m.n, m.latest, m.lookups, m.probes = 0, -1, 0, 0
}

// free is how many more keys the map takes before it counts as full.
func (m *offsetMap) free() int { return m.maxN - m.n }

// utilization is the fraction of the slots in use.
func (m *offsetMap) utilization() float64 { return float64(m.n) / float64(m.slots) }

func (m *offsetMap) hash(key []byte) (uint64, uint64) {
	return maphash.Bytes(m.seeds[0], key), maphash.Bytes(m.seeds[1], key)
}

// slot finds the slot of (h1, h2): its own, or the empty one where it goes.
// The probe sequence is double hashing; the table size is prime, so that it
// visits every slot.
func (m *offsetMap) slot(h1, h2 uint64) uint64 {
	i := h1 % m.slots
	step := 1 + h2%(m.slots-1)
	m.lookups++
	for {
		m.probes++
		if m.offs[i] < 0 || m.hashes[2*i] == h1 && m.hashes[2*i+1] == h2 {
			return i
		}
		i += step
		if i >= m.slots {
			i -= m.slots
		}
	}
}

// put records offset for key (a later put of the same key replaces it).
// The caller keeps the map below full (free() > 0).
func (m *offsetMap) put(key []byte, offset int64) {
	h1, h2 := m.hash(key)
	i := m.slot(h1, h2)
	if m.offs[i] < 0 {
		m.n++
		m.hashes[2*i], m.hashes[2*i+1] = h1, h2
	}
	m.offs[i] = offset
}

// get returns the offset recorded for key, -1 if none.
func (m *offsetMap) get(key []byte) int64 {
	h1, h2 := m.hash(key)
	return m.offs[m.slot(h1, h2)]
}

// prevPrime returns the largest prime <= n (n >= 2).
func prevPrime(n uint64) uint64 {
	for ; n > 2; n-- {
		if isPrime(n) {
			return n
		}
	}
	return 2
}

func isPrime(n uint64) bool {
	if n < 2 {
		return false
	}
	if n%2 == 0 {
		return n == 2
	}
	for d := uint64(3); d*d <= n; d += 2 {
		if n%d == 0 {
			return false
		}
	}
	return true
}
