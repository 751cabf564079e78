//go:build samsa_faults

package replication

import (
	"os"
	"strings"
)

// faultSwitches are planted bugs, compiled only with the build tag samsa_faults and
// set by environment variables when a Manager is created, so that the simulation and
// the fault harness can show they catch them:
//
//	SAMSA_FAULT_ACK_BEFORE_ISR=1      acks=all is answered after the leader's local
//	                                  append (and its durability), before the ISR holds it
//	SAMSA_FAULT_FENCED_LEADER_ACKS=1  a leader that learns of a newer leader epoch (it
//	                                  becomes follower or stops) acknowledges the acks=all
//	                                  produces still waiting instead of failing them
//	SAMSA_FAULT_EARLY_ISR_JOIN=1      a follower outside the ISR is proposed in at a
//	                                  fetch whatever its fetch offset: the check that it
//	                                  has reached the HW and the leader epoch's start is
//	                                  skipped, so a replica behind the HW is counted in the
//	                                  ISR (the fault harness's isr-behind-hw catches it)
type faultSwitches struct {
	ackISR, fencedAcks, earlyJoin bool
}

func loadFaultSwitches() faultSwitches {
	return faultSwitches{
		ackISR:     os.Getenv("SAMSA_FAULT_ACK_BEFORE_ISR") == "1",
		fencedAcks: os.Getenv("SAMSA_FAULT_FENCED_LEADER_ACKS") == "1",
		earlyJoin:  os.Getenv("SAMSA_FAULT_EARLY_ISR_JOIN") == "1",
	}
}

func (f faultSwitches) ackBeforeISR() bool     { return f.ackISR }
func (f faultSwitches) fencedLeaderAcks() bool { return f.fencedAcks }
func (f faultSwitches) earlyISRJoin() bool     { return f.earlyJoin }

// active names the switches that are on, comma-separated ("" when none).
func (f faultSwitches) active() string {
	var on []string
	if f.ackISR {
		on = append(on, "SAMSA_FAULT_ACK_BEFORE_ISR")
	}
	if f.fencedAcks {
		on = append(on, "SAMSA_FAULT_FENCED_LEADER_ACKS")
	}
	if f.earlyJoin {
		on = append(on, "SAMSA_FAULT_EARLY_ISR_JOIN")
	}
	return strings.Join(on, ",")
}
