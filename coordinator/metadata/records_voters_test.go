package metadata

import (
	"strings"
	"testing"
)

// TestVotersRecord: the recorded voter set replaces the last one, survives a
// snapshot, and is refused when a member is listed twice, has no raft id or a bad
// endpoint, or no member votes.
func TestVotersRecord(t *testing.T) {
	ep := []VoterEndpoint{{Name: "CONTROLLER", Host: "h", Port: 9093}}
	one := QuorumVoter{ID: 1, DirectoryID: UUID{1}, RaftID: 2, Endpoints: ep, KRaftVersion: VersionRange{0, 1}}
	two := QuorumVoter{ID: 2, DirectoryID: UUID{2}, RaftID: 3, Learner: true, Endpoints: ep}
	im := &Image{}
	if _, ok := im.QuorumVoters(); ok {
		t.Fatal("an empty image records voters")
	}
	im, err := im.Apply(&VotersRecord{Voters: []QuorumVoter{one, two}})
	if err != nil {
		t.Fatal(err)
	}
	im, err = im.Apply(&VotersRecord{Voters: []QuorumVoter{one}})
	if err != nil {
		t.Fatal(err)
	}
	if vs, ok := im.QuorumVoters(); !ok || len(vs) != 1 || vs[0].ID != 1 {
		t.Fatalf("voters %+v", vs)
	}
	back, err := DecodeSnapshot(mustSnapshot(t, im))
	if err != nil {
		t.Fatal(err)
	}
	if vs, ok := back.QuorumVoters(); !ok || len(vs) != 1 || vs[0].Endpoints[0] != ep[0] || vs[0].DirectoryID != one.DirectoryID {
		t.Fatalf("after a snapshot: %+v", vs)
	}
	// A voter without endpoints (a static voter recorded at the upgrade to
	// kraft.version 1), alone in its record, is the smallest encoding: 34 bytes.
	bare := &VotersRecord{Voters: []QuorumVoter{{ID: 1, RaftID: 2}}}
	recs, _, err := DecodeEntry(EncodeEntry(nil, bare))
	if err != nil || len(recs) != 1 || len(recs[0].(*VotersRecord).Voters) != 1 {
		t.Fatalf("a voter without endpoints: %v %v", recs, err)
	}
	if e := (VoterEndpoint{Name: "CONTROLLER", Host: "::1", Port: 9093}).String(); e != "CONTROLLER://[::1]:9093" {
		t.Fatalf("endpoint %s", e)
	}
	for _, bad := range []struct {
		voters []QuorumVoter
		why    string
	}{
		{[]QuorumVoter{one, one}, "listed twice"},
		{[]QuorumVoter{one, {ID: 1, DirectoryID: UUID{1}, RaftID: 9}}, "listed twice"},
		{[]QuorumVoter{{ID: 1, DirectoryID: UUID{1}}}, "raft id 0"},
		{[]QuorumVoter{two}, "no voter"},
		{nil, "no voter"},
		{[]QuorumVoter{{ID: 1, RaftID: 2, Endpoints: []VoterEndpoint{{Name: "C", Host: "h"}}}}, "endpoint"},
		{[]QuorumVoter{{ID: 1, RaftID: 2, Endpoints: []VoterEndpoint{{Name: "C", Host: "h", Port: 1}, {Name: "C", Host: "i", Port: 2}}}}, "listed twice"},
		{[]QuorumVoter{{ID: 1, RaftID: 2, KRaftVersion: VersionRange{Min: 2, Max: 1}}}, "range"},
	} {
		if _, err := im.Apply(&VotersRecord{Voters: bad.voters}); err == nil || !strings.Contains(err.Error(), bad.why) {
			t.Errorf("%+v: %v, want an error saying %q", bad.voters, err, bad.why)
		}
	}
}
