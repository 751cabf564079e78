package bench

import (
	"fmt"
	"math/rand"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
)

// payloads pre-generates the workload's payload pool: randomBytesRatio of each payload
// is random, the rest zeros. seed makes runs repeatable.
func payloads(w *Workload, seed int64) [][]byte {
	rng := rand.New(rand.NewSource(seed))
	out := make([][]byte, w.RandomizedPayloadPoolSize)
	nrand := int(float64(w.MessageSize) * w.RandomBytesRatio)
	for i := range out {
		p := make([]byte, w.MessageSize)
		rng.Read(p[:nrand])
		out[i] = p
	}
	return out
}

// keyTable pre-formats the key space so that picking a key allocates nothing.
func keyTable(w *Workload) [][]byte {
	if w.KeyDistributor == KeyNone {
		return nil
	}
	keys := make([][]byte, w.KeySpace)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "key-%08d", i)
	}
	return keys
}

// keyPicker chooses keys; one per producer goroutine (not safe for concurrent use).
type keyPicker struct {
	mode string
	keys [][]byte
	next int
	rng  *rand.Rand
	zipf *rand.Zipf
}

func newKeyPicker(w *Workload, keys [][]byte, seed int64) *keyPicker {
	kp := &keyPicker{mode: w.KeyDistributor, keys: keys, rng: rand.New(rand.NewSource(seed))}
	if kp.mode == KeyZipf {
		kp.zipf = rand.NewZipf(kp.rng, w.ZipfExponent, 1, uint64(len(keys)-1))
	}
	return kp
}

func (kp *keyPicker) pick() []byte {
	switch kp.mode {
	case KeyRoundRobin:
		k := kp.keys[kp.next]
		kp.next++
		if kp.next == len(kp.keys) {
			kp.next = 0
		}
		return k
	case KeyRandom:
		return kp.keys[kp.rng.Intn(len(kp.keys))]
	case KeyZipf:
		return kp.keys[kp.zipf.Uint64()]
	}
	return nil
}

// recPool recycles produced records: a record goes back once its promise has run, so
// the steady state allocates no record and no value buffer. Each record owns its value
// buffer, filled once from the payload pool; only the 16 timestamp bytes change.
type recPool struct {
	mu struct {
		sync.Mutex
		free []*kgo.Record
	}
	topic    string
	payloads [][]byte
	made     int
}

func (p *recPool) get() *kgo.Record {
	p.mu.Lock()
	if n := len(p.mu.free); n > 0 {
		r := p.mu.free[n-1]
		p.mu.free = p.mu.free[:n-1]
		p.mu.Unlock()
		return r
	}
	p.made++
	src := p.payloads[p.made%len(p.payloads)]
	p.mu.Unlock()
	v := make([]byte, len(src))
	copy(v, src)
	return &kgo.Record{Topic: p.topic, Value: v}
}

func (p *recPool) put(r *kgo.Record) {
	v, t := r.Value, r.Topic
	*r = kgo.Record{Topic: t, Value: v}
	p.mu.Lock()
	p.mu.free = append(p.mu.free, r)
	p.mu.Unlock()
}
