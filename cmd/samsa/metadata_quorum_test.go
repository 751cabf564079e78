package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestMetadataQuorumArgs: the argument checks of samsa metadata-quorum, before
// anything is sent (exit status 2).
func TestMetadataQuorumArgs(t *testing.T) {
	for _, args := range [][]string{
		{"describe"},
		{"describe", "--status", "--replication"},
		{"--bootstrap-server", "h:1", "--bootstrap-controller", "h:2", "describe", "--status"},
		{"add-controller"},
		{"remove-controller", "--controller-id", "3"},
		{"remove-controller", "--controller-id", "3", "--controller-directory-id", "not-a-uuid"},
		{"promote-controller"},
	} {
		if code := metadataQuorumMain(args, &bytes.Buffer{}); code != 2 {
			t.Errorf("%q: exit %d, want 2", args, code)
		}
	}
}

// TestQuorumStatusOutput: describe --status and --replication print
// DescribeQuorum's answer as kafka-metadata-quorum.sh does.
func TestQuorumStatusOutput(t *testing.T) {
	p := kmsg.NewDescribeQuorumResponseTopicPartition()
	p.LeaderID, p.LeaderEpoch, p.HighWatermark = 1, 3, 100
	voter := func(id int32, dir byte, leo, caught int64) kmsg.DescribeQuorumResponseTopicPartitionReplicaState {
		r := kmsg.NewDescribeQuorumResponseTopicPartitionReplicaState()
		r.ReplicaID, r.LogEndOffset, r.LastFetchTimestamp, r.LastCaughtUpTimestamp = id, leo, 1000, caught
		r.ReplicaDirectoryID[0] = dir
		return r
	}
	p.CurrentVoters = append(p.CurrentVoters, voter(1, 1, 100, 1000), voter(2, 2, 90, 400))
	obs := voter(4, 0, 95, -1)
	p.Observers = append(p.Observers, obs)
	node := kmsg.NewDescribeQuorumResponseNode()
	node.NodeID = 1
	node.Listeners = append(node.Listeners, kmsg.DescribeQuorumResponseNodeListener{Name: "CONTROLLER", Host: "127.0.0.1", Port: 9593})
	var b strings.Builder
	if err := printQuorumStatus(&b, "cid", p, []kmsg.DescribeQuorumResponseNode{node}); err != nil {
		t.Fatal(err)
	}
	want := `ClusterId:              cid
LeaderId:               1
LeaderEpoch:            3
HighWatermark:          100
MaxFollowerLag:         10
MaxFollowerLagTimeMs:   600
CurrentVoters:          [{"id":1,"directoryId":"AQAAAAAAAAAAAAAAAAAAAA","endpoints":["CONTROLLER://127.0.0.1:9593"]},{"id":2,"directoryId":"AgAAAAAAAAAAAAAAAAAAAA"}]
CurrentObservers:       [{"id":4,"directoryId":"AAAAAAAAAAAAAAAAAAAAAA"}]
`
	if b.String() != want {
		t.Fatalf("describe --status:\n%s\nwant:\n%s", b.String(), want)
	}
	b.Reset()
	if err := printQuorumReplication(&b, p, true, time.UnixMilli(1500)); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "NodeId") || !strings.HasSuffix(lines[1], "Leader") ||
		!strings.Contains(lines[2], "500 ms ago") || !strings.HasSuffix(lines[3], "Observer") || !strings.Contains(lines[3], " -1 ") {
		t.Fatalf("describe --replication:\n%s", b.String())
	}
}
