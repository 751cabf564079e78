//go:build race

package engine

// raceEnabled: sync.Pool drops items at random under the race detector, so that
// the zero-allocation tests of pooled paths skip.
const raceEnabled = true
