//go:build !samsa_faults

package replication

// faultSwitches are planted bugs for testing the tests. The default build has none:
// every switch is a constant false and the compiler drops the code behind it.
type faultSwitches struct{}

func (faultSwitches) ackBeforeISR() bool     { return false }
func (faultSwitches) fencedLeaderAcks() bool { return false }
func (faultSwitches) earlyISRJoin() bool     { return false }
func (faultSwitches) active() string         { return "" }
func loadFaultSwitches() faultSwitches       { return faultSwitches{} }
