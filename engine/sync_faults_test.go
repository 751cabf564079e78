//go:build samsa_faults

package engine

import "testing"

// With the planted bug on, acknowledged appends are lost at a power loss:
// what the crash checkers must catch.
func TestPlantedSkipFdatasyncLosesAcknowledgedWrites(t *testing.T) {
	t.Setenv("SAMSA_FAULT_SKIP_FDATASYNC", "1")
	lost := plantedBugRun(t)
	if lost == 0 {
		t.Fatal("the flusher skipped fdatasync, yet nothing acknowledged was lost")
	}
}

const plantedBugBuild = true
