//go:build invariants

package invariants

// Enabled is true: built with the invariants tag.
const Enabled = true
