//go:build !invariants

// Package invariants says whether this build checks the invariants whose
// checks cost on a hot path (as pebble's internal/invariants). Code guards
// such a check with
//
//	if invariants.Enabled {
//		...
//	}
//
// which the compiler drops from the ordinary build. Build or test with
// -tags invariants to keep the checks; a broken invariant panics, with a
// message naming it. The package is a leaf of constants: it imports nothing,
// so that the engine, a leaf itself, may import it.
package invariants

// Enabled is false: built without the invariants tag.
const Enabled = false
