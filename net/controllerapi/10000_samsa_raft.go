// SamsaRaft (private key 10000) on the controller listener, version 0: one raft
// message from another voter (docs/CLUSTER.md; net/peer's package doc draws the
// body). There is no response. The body is decoded by the table entry's own decoder
// (kmsg does not know the key) and stepped into this node's voter, inline: Step only
// queues (and drops what is not addressed to this voter, not from a voter, or beyond
// its bounded queue; raft retransmits). A body that is not a raft message closes the
// connection, like any malformed request.
//
// Differences from Apache Kafka: KRaft's voters speak Vote, BeginQuorumEpoch,
// EndQuorumEpoch and Fetch; Samsa's quorum is etcd raft and carries its messages
// whole.

package controllerapi

import (
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/samsa-broker/samsa/net/peer"
	"github.com/samsa-broker/samsa/net/request"
)

func init() {
	register(request.Spec{Key: peer.SamsaRaftKey, MinVersion: 0, MaxVersion: 0, Decode: decodeSamsaRaft}, handleSamsaRaft)
}

// samsaRaftRequest is a decoded SamsaRaft request: the message, owning its memory.
type samsaRaftRequest struct {
	peer.SamsaRaftRequest
	msg *raftpb.Message
}

func decodeSamsaRaft(version int16, body []byte) (kmsg.Request, error) {
	m, err := peer.DecodeSamsaRaft(body)
	if err != nil {
		return nil, err
	}
	return &samsaRaftRequest{SamsaRaftRequest: peer.SamsaRaftRequest{Version: version}, msg: m}, nil
}

func handleSamsaRaft(h *Handler, r *request.Request) {
	h.voter.Step(r.Body.(*samsaRaftRequest).msg)
	r.NoResponse()
}
