package metadata

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// The controller quorum's voter set (KIP-853), as the log keeps it at kraft.version 1:
// a VotersRecord, Kafka's control record of the same name, holds every member of the
// raft configuration with its directory id and controller endpoints. It replaces the
// set the image held. It is written at format time for a dynamic quorum (--standalone,
// --initial-controllers), in the context of every raft configuration change that adds
// or removes a member (coordinator/controller/quorum applies the two at the same
// offset), by UpdateRaftVoter, and with the upgrade of kraft.version from 0 to 1. A log
// at kraft.version 0 holds none: its voters are controller.quorum.voters.
//
//	typ 134 (Kafka's control record type 6, KRaftVoters, plus 128: this log's types
//	of control records), version 1:
//	voter count uvarint, per voter: id int32, directory id [16]byte, raft id u64,
//	flags byte (1: a learner), endpoint count uvarint, per endpoint: name string,
//	host string, port u16; kraft.version min int16, max int16

const typeVoters recordType = 128 + 6

// VotersRecord is the quorum's members: its voters and the learners being added.
type VotersRecord struct {
	Voters []QuorumVoter
}

func (*VotersRecord) recordType() recordType { return typeVoters }

// QuorumVoter is one member of the controller quorum.
type QuorumVoter struct {
	ID int32
	// DirectoryID is the directory.id of the controller's metadata.log.dir (zero for
	// a voter of a quorum formatted with controller.quorum.voters that has not
	// reported it yet: Kafka's voter without a directory id).
	DirectoryID UUID
	// RaftID is the member's id inside raft: node id + 1 for a voter of a static
	// quorum, with a hash of the directory id in the high 32 bits for a controller
	// that joined a dynamic one (coordinator/controller/quorum.DynamicRaftID), so
	// that a controller whose directory was replaced is another member.
	RaftID uint64
	// Learner: the controller is being added and catches up as a raft learner; it
	// does not vote.
	Learner   bool
	Endpoints []VoterEndpoint
	// KRaftVersion is the range of kraft.version the controller supports.
	KRaftVersion VersionRange
}

// VoterEndpoint is one listener of a controller (Kafka's VotersRecord.Endpoint).
type VoterEndpoint struct {
	Name string
	Host string
	Port uint16
}

// String is Kafka's RaftVoterEndpoint form, "CONTROLLER://localhost:9093" (an IPv6
// host in brackets).
func (e VoterEndpoint) String() string {
	host := e.Host
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	return e.Name + "://" + host + ":" + strconv.Itoa(int(e.Port))
}

// Endpoint returns the voter's endpoint of listener name.
func (v QuorumVoter) Endpoint(name string) (VoterEndpoint, bool) {
	for _, e := range v.Endpoints {
		if e.Name == name {
			return e, true
		}
	}
	return VoterEndpoint{}, false
}

// QuorumVoters returns the members the log records (voters and learners, in the
// record's order) and whether it records any: false for a log at kraft.version 0.
// The slice is shared: do not modify it.
func (im *Image) QuorumVoters() ([]QuorumVoter, bool) { return im.voters, im.voters != nil }

func appendVoters(dst []byte, r *VotersRecord) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(r.Voters)))
	for _, v := range r.Voters {
		dst = binary.BigEndian.AppendUint32(dst, uint32(v.ID))
		dst = append(dst, v.DirectoryID[:]...)
		dst = binary.BigEndian.AppendUint64(dst, v.RaftID)
		var flags byte
		if v.Learner {
			flags |= 1
		}
		dst = append(dst, flags)
		dst = binary.AppendUvarint(dst, uint64(len(v.Endpoints)))
		for _, e := range v.Endpoints {
			dst = appendString(dst, e.Name)
			dst = appendString(dst, e.Host)
			dst = binary.BigEndian.AppendUint16(dst, e.Port)
		}
		dst = binary.BigEndian.AppendUint16(dst, uint16(v.KRaftVersion.Min))
		dst = binary.BigEndian.AppendUint16(dst, uint16(v.KRaftVersion.Max))
	}
	return dst
}

func decodeVoters(d *decoder) Record {
	n := d.uvarint("voter count")
	// A voter takes at least 34 bytes (id 4, directory 16, raft id 8, flags 1, no
	// endpoint 1, kraft.version 4): bound the count before sizing by it.
	if n > uint64(len(d.b)/34) {
		d.fail("voters")
		return nil
	}
	r := &VotersRecord{Voters: make([]QuorumVoter, 0, n)}
	for i := uint64(0); i < n && d.err == nil; i++ {
		v := QuorumVoter{ID: d.int32(), DirectoryID: d.uuid(), RaftID: uint64(d.int64())}
		flags := d.int8()
		if flags&^1 != 0 {
			d.fail("voter flags")
		}
		v.Learner = flags&1 != 0
		ne := d.uvarint("endpoint count")
		if ne > uint64(len(d.b)/4) {
			d.fail("voter endpoints")
			return nil
		}
		for j := uint64(0); j < ne && d.err == nil; j++ {
			e := VoterEndpoint{Name: d.string(), Host: d.string()}
			e.Port = uint16(d.int16())
			v.Endpoints = append(v.Endpoints, e)
		}
		v.KRaftVersion = VersionRange{Min: d.int16(), Max: d.int16()}
		r.Voters = append(r.Voters, v)
	}
	return r
}

// applyVoters applies a VotersRecord: it replaces the recorded set. The rules: at
// least one voter that is not a learner; ids at or above 0; raft ids not zero and
// unique; no two members with one id and one directory id; endpoints named once
// each, with a host and a port; a kraft.version range at or above 0.
func (b *builder) applyVoters(r *VotersRecord) error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: voters: %s", ErrInvalidRecord, fmt.Sprintf(format, a...))
	}
	voting := 0
	for i, v := range r.Voters {
		if v.ID < 0 || v.RaftID == 0 {
			return bad("voter %d with raft id %d", v.ID, v.RaftID)
		}
		if !v.Learner {
			voting++
		}
		for _, o := range r.Voters[:i] {
			if o.RaftID == v.RaftID || (o.ID == v.ID && o.DirectoryID == v.DirectoryID) {
				return bad("voter %d (directory %s, raft id %d) listed twice", v.ID, v.DirectoryID, v.RaftID)
			}
		}
		for j, e := range v.Endpoints {
			if e.Name == "" || e.Host == "" || e.Port == 0 {
				return bad("voter %d endpoint %q at %q:%d", v.ID, e.Name, e.Host, e.Port)
			}
			for _, o := range v.Endpoints[:j] {
				if o.Name == e.Name {
					return bad("voter %d endpoint %q listed twice", v.ID, e.Name)
				}
			}
		}
		if v.KRaftVersion.Min < 0 || v.KRaftVersion.Max < v.KRaftVersion.Min {
			return bad("voter %d kraft.version range %d-%d", v.ID, v.KRaftVersion.Min, v.KRaftVersion.Max)
		}
	}
	if voting == 0 {
		return bad("no voter")
	}
	b.im.voters = cloneVoters(r.Voters)
	return nil
}

// cloneVoters copies vs deeply (a record's slices stay the caller's).
func cloneVoters(vs []QuorumVoter) []QuorumVoter {
	out := make([]QuorumVoter, len(vs))
	for i, v := range vs {
		v.Endpoints = slices.Clone(v.Endpoints)
		out[i] = v
	}
	return out
}

// votersRecords returns the record that rebuilds the recorded voter set (none at
// kraft.version 0).
func (im *Image) votersRecords() []Record {
	if im.voters == nil {
		return nil
	}
	return []Record{&VotersRecord{Voters: im.voters}}
}
