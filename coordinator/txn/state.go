package txn

// State is a transactional id's state (Kafka's TransactionState; the
// values are the ids stored in TransactionLogValue.TransactionStatus).
type State int8

// The states.
const (
	Empty             State = 0 // no transaction: after InitProducerId or a completed one
	Ongoing           State = 1 // partitions or offsets added
	PrepareCommit     State = 2 // EndTxn(commit) logged: markers being written
	PrepareAbort      State = 3 // EndTxn(abort) or a fence logged: markers being written
	CompleteCommit    State = 4 // every partition has its COMMIT marker
	CompleteAbort     State = 5 // every partition has its ABORT marker
	Dead              State = 6 // expired, its tombstone being written
	PrepareEpochFence State = 7 // an epoch bump fencing the producer (never logged as a state reached)
)

var stateNames = [...]string{"Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Dead", "PrepareEpochFence"}

// String is Kafka's name of the state (DescribeTransactions,
// ListTransactions).
func (s State) String() string {
	if s >= 0 && int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "Unknown"
}

// ParseState returns the state named name (Kafka's names).
func ParseState(name string) (State, bool) {
	for i, n := range stateNames {
		if n == name {
			return State(i), true
		}
	}
	return 0, false
}

// validPrevious lists, for each state, the states it may be entered from
// (Kafka's validPreviousStates; PrepareAbort also from Empty and the
// complete states, for the empty abort that bumps the epoch under
// transaction version 2).
var validPrevious = [...][]State{
	Empty:             {Empty, CompleteCommit, CompleteAbort},
	Ongoing:           {Ongoing, Empty, CompleteCommit, CompleteAbort},
	PrepareCommit:     {Ongoing},
	PrepareAbort:      {Ongoing, PrepareEpochFence, Empty, CompleteCommit, CompleteAbort},
	CompleteCommit:    {PrepareCommit},
	CompleteAbort:     {PrepareAbort},
	Dead:              {Empty, CompleteAbort, CompleteCommit},
	PrepareEpochFence: {Ongoing},
}

// canFollow reports whether s may be entered from prev.
func (s State) canFollow(prev State) bool {
	if s < 0 || int(s) >= len(validPrevious) {
		return false
	}
	for _, p := range validPrevious[s] {
		if p == prev {
			return true
		}
	}
	return false
}

// expirable reports whether a transactional id in s may expire
// (transactional.id.expiration.ms).
func (s State) expirable() bool {
	return s == Empty || s == CompleteCommit || s == CompleteAbort
}

// noState marks a metadata without a pending transition.
const noState State = -1
