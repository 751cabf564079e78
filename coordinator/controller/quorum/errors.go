package quorum

import "errors"

// Sentinel errors; check with errors.Is. Errors returned with detail wrap one of them.
var (
	// ErrNotLeader: a proposal reached a voter that does not lead the quorum (or could
	// not append it). Nothing was appended.
	ErrNotLeader = errors.New("quorum: not the leader")
	// ErrLost: this voter lost leadership, or the proposal's entry was replaced by
	// another leader's. The proposal may still have committed: read the log to know.
	ErrLost = errors.New("quorum: proposal lost (leadership lost or entry replaced)")
	// ErrRejected: the entry committed, but metadata.Image.Apply refused its records;
	// every voter skipped it (a bug in the proposer's validation). The result's
	// Offset is the entry's index.
	ErrRejected = errors.New("quorum: committed entry rejected by the state machine")
	// ErrInvalidProposal: the records cannot be proposed (none, nil, or too large).
	ErrInvalidProposal = errors.New("quorum: invalid proposal")
	// ErrBusy: too many proposals are queued; try again later.
	ErrBusy = errors.New("quorum: too many queued proposals")
	// ErrStopped: the quorum stopped (Run returned, Close, or a fatal storage error).
	ErrStopped = errors.New("quorum: stopped")
	// ErrInvalidConfig: the Config is unusable (voters, node id, ticks).
	ErrInvalidConfig = errors.New("quorum: invalid config")
	// ErrVotersChanged: the storage was bootstrapped with another voter set than
	// Config.Voters (a static quorum), or the log's voter of this node id has
	// another metadata directory.
	ErrVotersChanged = errors.New("quorum: voter set differs from the stored one")

	// Changes of the voter set (voterops.go), and Kafka's errors for them.
	//
	// ErrStaticQuorum: the log records no voter set (kraft.version 0): UNSUPPORTED_VERSION.
	ErrStaticQuorum = errors.New("quorum: the voter set is static (kraft.version 0)")
	// ErrVoterChangePending: another change is in progress: REQUEST_TIMED_OUT.
	ErrVoterChangePending = errors.New("quorum: a change of the voter set is in progress")
	// ErrDuplicateVoter: the node id is a voter already: DUPLICATE_VOTER.
	ErrDuplicateVoter = errors.New("quorum: duplicate voter")
	// ErrVoterNotFound: no member has the node id and directory id: VOTER_NOT_FOUND.
	ErrVoterNotFound = errors.New("quorum: voter not found")
	// ErrInvalidVoter: the change cannot be made (the last voter, endpoints that
	// are not valid): INVALID_REQUEST.
	ErrInvalidVoter = errors.New("quorum: invalid change of the voter set")
	// ErrTimeout: the change's deadline passed; it may still complete: REQUEST_TIMED_OUT.
	ErrTimeout = errors.New("quorum: timed out")

	// ErrCorrupt: stored data fails its checksum, does not parse, or is inconsistent
	// (a gap, a lost committed entry). It is never repaired silently: an operator
	// must look. A torn tail left by a crash is not corruption (it is truncated).
	ErrCorrupt = errors.New("quorum: corrupt raft storage")
	// ErrStorageFailed: a write or sync failed; what reached the disk is unknown, so
	// the storage refuses every later write. Reopen it to recover.
	ErrStorageFailed = errors.New("quorum: raft storage failed")
	// ErrLocked: another process (or storage in this one) has the directory open.
	ErrLocked = errors.New("quorum: raft storage directory in use")
	// ErrLegacyStore: a fresh raft directory holds a single-node metadata store
	// (coordinator/metadata.Store) that was not imported: see ImportLegacyStore.
	ErrLegacyStore = errors.New("quorum: the directory holds a single-node metadata store that was not imported")
	// ErrNotEmpty: Bootstrap on a storage that already holds a log.
	ErrNotEmpty = errors.New("quorum: raft storage is not empty")
)
