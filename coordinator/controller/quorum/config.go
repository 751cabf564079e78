package quorum

import (
	"fmt"
	"log/slog"
	"slices"
	"time"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/samsa-broker/samsa/coordinator/metadata"
)

// Defaults for the zero fields of Config. With them a leader that dies is replaced
// after one to two seconds (ElectionTicks × TickInterval, randomised up to twice
// that by raft), as Kafka's controller.quorum.election.timeout.ms=1000.
const (
	DefaultTickInterval    = 100 * time.Millisecond
	DefaultElectionTicks   = 10
	DefaultHeartbeatTicks  = 1
	DefaultSnapshotEntries = 10000

	// FastTickDivisor: while the leader this voter followed is lost
	// (Config.LeaderLost), Run ticks this many times as often, so that the election
	// starts about a tenth of the election timeout after the leader's process died
	// rather than one to two timeouts.
	FastTickDivisor = 10
	// fastElectionTerms bounds the elections (terms) run at the fast ticks after
	// a lost leader's term: the first, and two more after split votes.
	fastElectionTerms = 3

	// maxSizePerMsg bounds the entries of one MsgApp (raft sends at least one).
	maxSizePerMsg = 1 << 20
	// maxInflightMsgs bounds the MsgApps in flight to one follower.
	maxInflightMsgs = 256
	// maxUncommittedBytes bounds the leader's uncommitted entries; proposals beyond
	// it fail with ErrNotLeader (raft drops them) until the log commits.
	maxUncommittedBytes = 256 << 20
	// maxQueuedProposals and maxQueuedMessages bound the inbox between the callers
	// of Propose and Step and the quorum's goroutine.
	maxQueuedProposals = 4096
	maxQueuedMessages  = 8192
	maxQueuedBytes     = 256 << 20 // entry and snapshot data of the queued messages
)

// Config configures one voter.
type Config struct {
	// NodeID is this node's id (node.id). Inside raft the id is NodeID+1 in a
	// static quorum (raft reserves 0), DynamicRaftID in a dynamic one (membership.go).
	NodeID int32
	// DirectoryID is the directory.id of metadata.log.dir (meta.properties): with
	// the node id, the controller's identity in a dynamic quorum.
	DirectoryID metadata.UUID
	// Voters is controller.quorum.voters' ids: a static quorum (kraft.version 0).
	// It must contain NodeID and is the same on every voter. It is stored at the
	// first start (bootstrap) and a later start with another set fails with
	// ErrVotersChanged, while the log records no voter set (once it does,
	// kraft.version 1, the log's set is the quorum's). Empty: a dynamic quorum,
	// whose first voters are the VotersRecord of the bootstrap records (`samsa
	// storage format --standalone` or `--initial-controllers`); without one
	// (`--no-initial-controllers`) the voter starts as no member and waits for the
	// leader to add it.
	Voters []int32
	// ElectionTicks and HeartbeatTicks are raft's election timeout and heartbeat
	// interval in ticks (0: DefaultElectionTicks, DefaultHeartbeatTicks).
	ElectionTicks, HeartbeatTicks int
	// TickInterval is the duration of a tick in Run (0: DefaultTickInterval).
	TickInterval time.Duration
	// LeaderLost reports whether voter node's process is known gone: this node's
	// connections to it were closed by its side and a dial is refused (net/peer's
	// VoterLost). While the leader this voter last followed is lost and none other
	// leads, NextTick is TickInterval/FastTickDivisor: the followers of a killed
	// leader reach the election timeout in a tenth of it. It is no evidence against
	// a live leader (a stopped or cut-off process is not reported lost), and a
	// wrong answer costs no safety: a follower whose election timeout passed early
	// campaigns with PreVote, and the voters that still hear the leader refuse it
	// (CheckQuorum's lease). Called on the core's goroutine once a tick; it must
	// not block. nil: no voter is ever lost.
	LeaderLost func(node int32) bool
	// SnapshotEntries: a snapshot of the image is taken every this many applied
	// entries, and the log is compacted behind the previous one (0:
	// DefaultSnapshotEntries).
	SnapshotEntries uint64
	// Clock gives Run its ticks and Status its times (nil: SystemClock).
	Clock Clock
	// Logger receives raft's and the quorum's events (nil: discard).
	Logger *slog.Logger
	// BootstrapRecords are applied to the empty image to make the image at offset 1
	// when the storage is fresh (ImportLegacyStore's records); ignored when the
	// storage already holds a log. Only a quorum of one voter may import records:
	// with several voters each would bootstrap its own, differing, offset 1.
	BootstrapRecords []metadata.Record
	// FormatRecords are applied after BootstrapRecords, with any number of voters:
	// records the operator gives every voter alike when formatting it (`samsa
	// storage format --add-scram`, whose arguments make the same records on every
	// voter). Ignored, like BootstrapRecords, when the storage holds a log.
	FormatRecords []metadata.Record
}

// Clock is the quorum's source of time.
type Clock interface {
	Now() time.Time
	// NewTicker returns a ticker firing every d (Run only).
	NewTicker(d time.Duration) Ticker
}

// Ticker is a running ticker.
type Ticker interface {
	C() <-chan time.Time
	Stop()
}

// SystemClock is the wall clock.
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }

// NewTicker wraps time.NewTicker.
func (SystemClock) NewTicker(d time.Duration) Ticker { return sysTicker{time.NewTicker(d)} }

type sysTicker struct{ t *time.Ticker }

func (t sysTicker) C() <-chan time.Time { return t.t.C }
func (t sysTicker) Stop()               { t.t.Stop() }

// Transport carries raft messages to other voters.
//
// Send must not block and may drop messages (raft retransmits). It is called from
// the quorum's goroutine after the entries and hard state the messages depend on are
// durable. The messages are never modified after Send: the transport may keep them
// and marshal them later (proto.Marshal), and must not modify them itself. A
// message's To is a raft id: NodeOf(m.GetTo()) is the node id to send it to. The
// receiving side hands each message to that node's Quorum.Step.
type Transport interface {
	Send(msgs []*raftpb.Message)
}

// withDefaults validates c and returns it with defaults filled in and Voters sorted.
func (c Config) withDefaults() (Config, error) {
	if c.NodeID < 0 {
		return c, fmt.Errorf("%w: node id %d", ErrInvalidConfig, c.NodeID)
	}
	c.Voters = slices.Clone(c.Voters)
	slices.Sort(c.Voters)
	for i, v := range c.Voters {
		if v < 0 {
			return c, fmt.Errorf("%w: voter id %d", ErrInvalidConfig, v)
		}
		if i > 0 && c.Voters[i-1] == v {
			return c, fmt.Errorf("%w: voter %d listed twice in controller.quorum.voters", ErrInvalidConfig, v)
		}
	}
	if len(c.Voters) > 0 && !slices.Contains(c.Voters, c.NodeID) {
		return c, fmt.Errorf("%w: node id %d is not among controller.quorum.voters %v", ErrInvalidConfig, c.NodeID, c.Voters)
	}
	if c.ElectionTicks == 0 {
		c.ElectionTicks = DefaultElectionTicks
	}
	if c.HeartbeatTicks == 0 {
		c.HeartbeatTicks = DefaultHeartbeatTicks
	}
	if c.HeartbeatTicks < 0 || c.ElectionTicks <= c.HeartbeatTicks {
		return c, fmt.Errorf("%w: election ticks %d must exceed heartbeat ticks %d", ErrInvalidConfig, c.ElectionTicks, c.HeartbeatTicks)
	}
	if c.TickInterval == 0 {
		c.TickInterval = DefaultTickInterval
	}
	if c.TickInterval < 0 {
		return c, fmt.Errorf("%w: tick interval %v", ErrInvalidConfig, c.TickInterval)
	}
	if c.SnapshotEntries == 0 {
		c.SnapshotEntries = DefaultSnapshotEntries
	}
	if c.Clock == nil {
		c.Clock = SystemClock{}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if len(c.BootstrapRecords) > 0 && (len(c.Voters) != 1 || c.Voters[0] != c.NodeID) {
		return c, fmt.Errorf("%w: bootstrap records (an imported single-node store) need a static quorum of one voter, have %v", ErrInvalidConfig, c.Voters)
	}
	return c, nil
}

// raftVoters returns the voters as sorted raft ids.
func raftVoters(voters []int32) []uint64 {
	out := make([]uint64, len(voters))
	for i, v := range voters {
		out[i] = RaftID(v)
	}
	slices.Sort(out)
	return out
}
