package quorum

import (
	"fmt"
	"hash/fnv"
	"slices"

	"go.etcd.io/raft/v3/confchange"
	"go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"

	"github.com/samsa-broker/samsa/coordinator/metadata"
)

// Membership (KIP-853 on etcd raft). A quorum formatted with controller.quorum.voters
// is static (kraft.version 0): its members are those voters, whose raft ids are node
// id + 1, and the log records no voter set. A quorum formatted with --standalone or
// --initial-controllers is dynamic (kraft.version 1): the log records its members in
// a metadata.VotersRecord (node id, directory id, raft id, endpoints), and they change
// only through raft's configuration changes (ConfChangeV2), each carrying in its
// context the VotersRecord of the members after it, applied at the same offset:
//
//	add a controller     AddLearnerNode (it catches up as a learner), then, once its
//	                     match index reaches the commit index the leader had when it
//	                     became a learner, AddNode in a joint configuration that raft
//	                     leaves by itself (ConfChangeTransitionJointImplicit)
//	remove a voter       RemoveNode in a joint configuration left by itself
//	remove a learner     RemoveNode
//	update endpoints     a normal entry holding the new VotersRecord
//
// A controller that joins a dynamic quorum takes the raft id DynamicRaftID(node id,
// directory id): a controller whose metadata directory was replaced is another
// member, so a voter that lost its log never votes as the one that had it.

// RaftID returns the raft id of a node id in a static quorum (node id + 1).
func RaftID(node int32) uint64 { return uint64(node) + 1 }

// DynamicRaftID returns the raft id of controller node with metadata directory dir
// in a dynamic quorum: node id + 1 in the low 32 bits, a hash of the directory id in
// the high 32 (never zero), so two directories of one node are two members.
func DynamicRaftID(node int32, dir metadata.UUID) uint64 {
	h := fnv.New32a()
	h.Write(dir[:])
	hi := h.Sum32()
	if hi == 0 {
		hi = 1
	}
	return uint64(hi)<<32 | RaftID(node)
}

// NodeOf returns the node id of a raft id (-1 for raft's "none", 0).
func NodeOf(raftID uint64) int32 {
	low := raftID & 0xffffffff
	if low == 0 || low > 1<<31 {
		return -1
	}
	return int32(low - 1)
}

// Member is one member of the quorum's raft configuration.
type Member struct {
	ID          int32
	DirectoryID metadata.UUID // zero: unknown (a static quorum's voter)
	RaftID      uint64
	// Voter: in the voter configuration (the incoming or, while a change is in
	// progress, the outgoing one); else a learner.
	Voter bool
	// Endpoints are the controller's listeners as the log records them (none in a
	// static quorum: controller.quorum.voters has them).
	Endpoints []metadata.VoterEndpoint
}

// confStateIDs returns every raft id of cs: voters (incoming and outgoing) and
// learners (current and next), sorted, once each.
func confStateIDs(cs *raftpb.ConfState) []uint64 {
	var out []uint64
	for _, l := range [][]uint64{cs.GetVoters(), cs.GetVotersOutgoing(), cs.GetLearners(), cs.GetLearnersNext()} {
		out = append(out, l...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func isVoterIn(cs *raftpb.ConfState, id uint64) bool {
	return slices.Contains(cs.GetVoters(), id) || slices.Contains(cs.GetVotersOutgoing(), id)
}

// joint reports whether cs is a joint configuration (a change in progress).
func joint(cs *raftpb.ConfState) bool { return len(cs.GetVotersOutgoing()) > 0 }

// members returns the members of cs, with the directory ids and endpoints im records.
func members(cs *raftpb.ConfState, im *metadata.Image) []Member {
	recorded, _ := im.QuorumVoters()
	var out []Member
	for _, id := range confStateIDs(cs) {
		m := Member{ID: NodeOf(id), RaftID: id, Voter: isVoterIn(cs, id)}
		for _, v := range recorded {
			if v.RaftID == id {
				m.DirectoryID, m.Endpoints = v.DirectoryID, v.Endpoints
			}
		}
		out = append(out, m)
	}
	return out
}

// memberSet is the members of a voter's applied configuration. A voter of a static
// quorum takes messages from them only (a node whose controller.quorum.voters lists
// another set is not heard). A voter of a dynamic quorum, or one that is no member
// (a controller formatted with --no-initial-controllers, not yet added), takes them
// from anyone: its applied configuration may be older than the sender's (it missed
// changes while cut off, or it was removed and is added again), and it learns the
// current one from the leader. A sender that is no member cannot disturb the
// members: with PreVote its campaign needs votes that its stale log does not get,
// and its messages of an older term are ignored.
type memberSet struct {
	ids  []uint64 // sorted
	open bool     // messages from anyone
}

func (s *memberSet) accepts(from uint64) bool {
	if s == nil || s.open {
		return true
	}
	_, ok := slices.BinarySearch(s.ids, from)
	return ok
}

// raftIDsOf returns the raft ids of node in s.
func (s *memberSet) raftIDsOf(node int32) []uint64 {
	if s == nil {
		return nil
	}
	var out []uint64
	for _, id := range s.ids {
		if NodeOf(id) == node {
			out = append(out, id)
		}
	}
	return out
}

// checkConfChange returns why raft would refuse to apply cc to configuration cs (raft
// panics on such a change, so the quorum checks first with raft's own rules).
func checkConfChange(cs *raftpb.ConfState, cc *raftpb.ConfChangeV2) error {
	trk := tracker.MakeProgressTracker(1, 0)
	cfg, prs, err := confchange.Restore(confchange.Changer{Tracker: trk, LastIndex: 1}, cs)
	if err != nil {
		return fmt.Errorf("the configuration %v does not restore: %w", cs, err)
	}
	trk.Config, trk.Progress = cfg, prs
	chg := confchange.Changer{Tracker: trk, LastIndex: 1}
	switch autoLeave, enter := cc.EnterJoint(); {
	case cc.LeaveJoint():
		_, _, err = chg.LeaveJoint()
	case enter:
		_, _, err = chg.EnterJoint(autoLeave, cc.GetChanges()...)
	default:
		_, _, err = chg.Simple(cc.GetChanges()...)
	}
	return err
}

// selfRaftID is the raft id this voter runs under: the one the log records for its
// node id and directory; else node id + 1 where the configuration holds it (a static
// quorum, or one upgraded to kraft.version 1 whose voter has not reported its
// directory); else DynamicRaftID (a controller not yet added). A recorded member with
// this node id + 1 and another directory is refused: this is not its directory.
func selfRaftID(cfg Config, cs *raftpb.ConfState, im *metadata.Image) (uint64, error) {
	recorded, dynamic := im.QuorumVoters()
	static := RaftID(cfg.NodeID)
	for _, v := range recorded {
		if v.ID == cfg.NodeID && v.DirectoryID == cfg.DirectoryID && cfg.DirectoryID != metadata.ZeroUUID {
			return v.RaftID, nil
		}
	}
	for _, v := range recorded {
		// The log of this directory records this node id under another directory:
		// the log was copied, or meta.properties rewritten. (A controller whose
		// directory was replaced starts from an empty log.)
		if v.ID == cfg.NodeID && v.DirectoryID != metadata.ZeroUUID && v.DirectoryID != cfg.DirectoryID {
			return 0, fmt.Errorf("%w: the raft log in this directory records voter %d with metadata directory %s, and its meta.properties says directory.id %s: this is not that voter's directory (a replaced directory starts empty and joins as a new controller: remove the old voter, then add this one)",
				ErrVotersChanged, cfg.NodeID, v.DirectoryID, cfg.DirectoryID)
		}
	}
	if slices.Contains(confStateIDs(cs), static) || (len(cfg.Voters) > 0 && !dynamic) {
		return static, nil
	}
	return DynamicRaftID(cfg.NodeID, cfg.DirectoryID), nil
}
