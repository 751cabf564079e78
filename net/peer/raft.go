package peer

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/samsa-broker/samsa/coordinator/controller/quorum"
)

// SamsaRaftKey is the private API key of SamsaRaft: one raft message from a voter to
// another, no response. Kafka's keys are far below it.
const SamsaRaftKey int16 = 10000

// ErrMalformedRaft: a SamsaRaft body that is not a raft message.
var ErrMalformedRaft = errors.New("peer: malformed SamsaRaft body")

// SamsaRaftRequest is a SamsaRaft request (version 0): its body is one raftpb.Message
// as proto.Marshal writes it. It implements kmsg.Request so that it travels the same
// framing as Kafka's requests; it has no response (ResponseKind is nil).
type SamsaRaftRequest struct {
	Version int16
	// Message is the marshaled raftpb.Message. ReadFrom aliases its input.
	Message []byte
}

var _ kmsg.Request = (*SamsaRaftRequest)(nil)

func (*SamsaRaftRequest) Key() int16                 { return SamsaRaftKey }
func (*SamsaRaftRequest) MaxVersion() int16          { return 0 }
func (r *SamsaRaftRequest) SetVersion(v int16)       { r.Version = v }
func (r *SamsaRaftRequest) GetVersion() int16        { return r.Version }
func (*SamsaRaftRequest) IsFlexible() bool           { return false }
func (r *SamsaRaftRequest) AppendTo(b []byte) []byte { return append(b, r.Message...) }
func (r *SamsaRaftRequest) ReadFrom(b []byte) error  { r.Message = b; return nil }

// ResponseKind is nil: SamsaRaft has no response.
func (*SamsaRaftRequest) ResponseKind() kmsg.Response { return nil }

// DecodeSamsaRaft decodes a SamsaRaft body into a raft message. The message owns its
// memory (nothing aliases b). A body that is not a raft message, or names no sender or
// receiver, is ErrMalformedRaft.
func DecodeSamsaRaft(b []byte) (*raftpb.Message, error) {
	m := new(raftpb.Message)
	if err := proto.Unmarshal(b, m); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformedRaft, err)
	}
	if m.GetTo() == 0 || m.GetFrom() == 0 {
		return nil, fmt.Errorf("%w: message from %d to %d", ErrMalformedRaft, m.GetFrom(), m.GetTo())
	}
	return m, nil
}

var _ quorum.Transport = (*RaftTransport)(nil)

// RaftTransport carries raft messages to the other voters (the quorum's Transport):
// Send never blocks; each voter has a queue of at most RaftQueue messages drained by
// one sender goroutine onto the (voter, raft) connection. A full queue, a connection in
// backoff or a failed write drops messages: raft retransmits.
type RaftTransport struct {
	c *Client
}

// RaftTransport returns the client's raft transport.
func (c *Client) RaftTransport() *RaftTransport { return &RaftTransport{c: c} }

// raftState is a Client's raft senders.
type raftState struct {
	mu      sync.Mutex
	peers   map[int32]chan *raftpb.Message
	wg      sync.WaitGroup
	sent    atomic.Uint64
	dropped atomic.Uint64
}

func (rs *raftState) wait() { rs.wg.Wait() }

// Send queues msgs for their receivers. Messages are not modified; they are marshaled
// later on the sender goroutines. Messages to this node or to a node that is not a
// voter are dropped.
func (t *RaftTransport) Send(msgs []*raftpb.Message) {
	c := t.c
	for _, m := range msgs {
		to := quorum.NodeOf(m.GetTo())
		q := c.raftQueue(to)
		if q == nil {
			c.raft.dropped.Add(1)
			continue
		}
		select {
		case q <- m:
		default:
			c.raft.dropped.Add(1)
		}
	}
}

// VoterLost reports whether this node has lost voter id (Client.VoterLost): the
// quorum's Config.LeaderLost.
func (t *RaftTransport) VoterLost(id int32) (since time.Time, ok bool) { return t.c.VoterLost(id) }

// RaftStats counts raft messages written to connections and dropped.
type RaftStats struct{ Sent, Dropped uint64 }

// Stats returns the transport's counts since the client started.
func (t *RaftTransport) Stats() RaftStats {
	return RaftStats{Sent: t.c.raft.sent.Load(), Dropped: t.c.raft.dropped.Load()}
}

// raftQueue returns voter to's queue, starting its sender on first use; nil for
// this node, non-voters and a closed client.
func (c *Client) raftQueue(to int32) chan *raftpb.Message {
	if to == c.cfg.NodeID {
		return nil
	}
	if !c.isVoter(to) {
		return nil
	}
	rs := &c.raft
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if q := rs.peers[to]; q != nil {
		return q
	}
	if c.ctx.Err() != nil {
		return nil
	}
	if rs.peers == nil {
		rs.peers = map[int32]chan *raftpb.Message{}
	}
	q := make(chan *raftpb.Message, c.cfg.RaftQueue)
	rs.peers[to] = q
	rs.wg.Add(1)
	go c.raftSender(to, q)
	return q
}

// raftSender writes voter to's queued messages until the client closes.
func (c *Client) raftSender(to int32, q chan *raftpb.Message) {
	defer c.raft.wg.Done()
	var buf []byte
	for {
		var m *raftpb.Message
		select {
		case m = <-q:
		case <-c.ctx.Done():
			return
		}
		var err error
		if buf, err = (proto.MarshalOptions{}).MarshalAppend(buf[:0], m); err != nil {
			c.raft.dropped.Add(1)
			c.log.Error("marshaling a raft message", "to", to, "type", m.GetType().String(), "err", err)
			continue
		}
		if err := c.sendRaft(to, buf); err != nil {
			c.raft.dropped.Add(1)
			c.log.Debug("dropping raft message", "to", to, "type", m.GetType().String(), "err", err)
			continue
		}
		c.raft.sent.Add(1)
		if cap(buf) > 1<<20 {
			buf = nil // do not keep a snapshot-sized buffer
		}
	}
}

func (c *Client) sendRaft(to int32, body []byte) error {
	cn, err := c.conn(c.ctx, Voter(to), PurposeRaft)
	if err != nil {
		return err
	}
	v, err := cn.version(SamsaRaftKey, 0)
	if err != nil {
		return err
	}
	_, err = cn.send(c.ctx, &SamsaRaftRequest{Version: v, Message: body}, false)
	return err
}
