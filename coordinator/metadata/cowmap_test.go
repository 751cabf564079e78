package metadata

import (
	"maps"
	"math/rand/v2"
	"testing"
)

// TestCowMapMatchesModel applies random batches to a cowMap and checks each published
// version against a plain map, and that later batches never change earlier versions.
func TestCowMapMatchesModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	type version struct {
		m     cowMap[int, int]
		model map[int]int
	}
	var versions []version
	var cur cowMap[int, int]
	model := map[int]int{}
	for batch := 0; batch < 300; batch++ {
		next := cur // copy: the batch works on its own shards
		var owned uint32
		model = maps.Clone(model)
		for op := 0; op < 1+rng.IntN(20); op++ {
			k := rng.IntN(200)
			if rng.IntN(3) == 0 {
				next.del(k, &owned)
				delete(model, k)
			} else {
				v := rng.Int()
				next.set(k, v, &owned)
				model[k] = v
			}
		}
		cur = next
		versions = append(versions, version{cur, model})
	}
	for i, v := range versions {
		if v.m.len() != len(v.model) {
			t.Fatalf("version %d: len %d, model %d", i, v.m.len(), len(v.model))
		}
		seen := 0
		for k, x := range v.m.all() {
			if v.model[k] != x {
				t.Fatalf("version %d: key %d = %d, model %d", i, k, x, v.model[k])
			}
			seen++
		}
		if seen != len(v.model) {
			t.Fatalf("version %d: iterated %d", i, seen)
		}
		for k, x := range v.model {
			if got, ok := v.m.get(k); !ok || got != x {
				t.Fatalf("version %d: get(%d) = %d, %v", i, k, got, ok)
			}
		}
	}
}
