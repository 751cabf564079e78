package controller

import (
	"context"
	"time"

	"github.com/samsa-broker/samsa/coordinator/metadata"
)

// Quorum is what the active controller needs of the metadata quorum's voter it runs
// beside (docs/CLUSTER.md, coordinator/controller/quorum). Every method is safe from
// any goroutine and never blocks.
type Quorum interface {
	// Propose appends recs as one entry. The channel (buffered) receives exactly one
	// result: the entry's offset once it has committed and this voter has applied it
	// (Committed shows it by then), or an error. After an error the entry may still
	// have committed (leadership lost) or not (not the leader, busy); the controller
	// treats every error alike: it stops trusting its pending image.
	Propose(recs []metadata.Record) <-chan ProposeResult
	// Committed returns the offset and image this voter has applied.
	Committed() (offset uint64, im *metadata.Image)
	// CurrentLeadership returns the leader and term as this voter knows them, whether
	// it leads, and whether it is ready for writes (it leads and has applied every
	// entry of earlier terms).
	CurrentLeadership() Leadership
	// Status is the voter's view of the quorum, for DescribeQuorum.
	Status() QuorumStatus
}

// ProposeResult is the outcome of a proposal.
type ProposeResult struct {
	Offset uint64 // the entry's offset, when known
	Err    error
}

// Leadership is a voter's view of the quorum's leadership.
type Leadership struct {
	Leader         int32 // -1: unknown
	Term           uint64
	IsLeader       bool
	ReadyForWrites bool
}

// QuorumStatus is a voter's view of the quorum (DescribeQuorum).
type QuorumStatus struct {
	NodeID      int32
	Leader      int32 // -1: unknown
	Term        uint64
	CommitIndex uint64 // the high watermark is CommitIndex+1
	LastIndex   uint64 // the last index of this voter's log
	// Voters, on the leader only, is every voter's replication state, by id;
	// Learners the same of the controllers being added to a dynamic quorum
	// (DescribeQuorum lists them as observers).
	Voters, Learners []VoterStatus
}

// VoterStatus is one voter's replication state as the leader sees it.
type VoterStatus struct {
	ID                        int32
	MatchIndex                uint64
	LastContact, LastCaughtUp time.Time
	// DirectoryID and Endpoints are what the metadata log records of the voter
	// (zero and none in a static quorum: controller.quorum.voters has them).
	DirectoryID metadata.UUID
	Endpoints   []metadata.VoterEndpoint
}

// CommittedLog is what a MetadataSource over a local voter reads (a combined node's
// broker reads its own voter; the controller listener serves brokers' metadata
// fetches from it).
type CommittedLog interface {
	// ReadCommitted returns committed entries from offset from on (about maxBytes of
	// them, at least one when there is one), or SnapshotNeeded when from is
	// compacted away.
	ReadCommitted(from uint64, maxBytes int) (LogRead, error)
	// Snapshot returns the newest snapshot: its offset, term and data
	// (metadata.EncodeSnapshot). The data is shared: do not modify it.
	Snapshot() (offset, term uint64, data []byte, err error)
	// WaitCommitted blocks until the applied offset passes after (returning it), or
	// ctx ends.
	WaitCommitted(ctx context.Context, after uint64) (uint64, error)
}

// LogRead answers CommittedLog.ReadCommitted.
type LogRead struct {
	Entries        []MetadataEntry // consecutive, from the offset asked for
	SnapshotNeeded bool
	SnapshotOffset uint64
	Committed      uint64 // the last committed offset the voter has applied
	Leader         int32
	Term           uint64
}

// MetadataEntry is one committed entry of the metadata log: its offset and its
// metadata.EncodeEntry frame (nil for an entry without records). Data is shared with
// its source: do not modify it.
type MetadataEntry struct {
	Offset uint64
	Data   []byte
}
