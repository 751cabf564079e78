package peer

import (
	"errors"
	"sync"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

func raftMsg(from, to int32, index uint64) *raftpb.Message {
	return &raftpb.Message{Type: raftpb.MsgApp.Enum(), From: proto.Uint64(uint64(from) + 1), To: proto.Uint64(uint64(to) + 1), Index: proto.Uint64(index),
		Entries: []*raftpb.Entry{{Index: proto.Uint64(index + 1), Term: proto.Uint64(2), Data: []byte("entry")}}}
}

func TestRaftTransportDelivers(t *testing.T) {
	var mu sync.Mutex
	var got []*raftpb.Message
	ts := startTestServer(t, func(s *served) {
		if s.key != SamsaRaftKey || s.version != 0 {
			s.tr.Ticket.CloseConn()
			return
		}
		m, err := DecodeSamsaRaft(s.req.(*SamsaRaftRequest).Message)
		if err != nil {
			t.Error(err)
		}
		mu.Lock()
		got = append(got, m)
		mu.Unlock()
		s.tr.Ticket.NoResponse()
	})
	c := newTestClient(t, Config{NodeID: 1, Voters: map[int32]string{1: "127.0.0.1:1", 2: ts.addr()}})
	tr := c.RaftTransport()
	var msgs []*raftpb.Message
	for i := range 100 {
		msgs = append(msgs, raftMsg(1, 2, uint64(i)))
	}
	msgs = append(msgs, raftMsg(1, 1, 0), raftMsg(1, 7, 0)) // to self, to a non-voter: dropped
	tr.Send(msgs)
	eventually(t, 5*time.Second, "100 messages", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) == 100
	})
	mu.Lock()
	defer mu.Unlock()
	for i, m := range got {
		if m.GetIndex() != uint64(i) || m.GetTo() != 3 || m.GetFrom() != 2 || string(m.GetEntries()[0].GetData()) != "entry" {
			t.Fatalf("message %d: %v", i, m)
		}
	}
	if st := tr.Stats(); st.Sent != 100 || st.Dropped != 2 {
		t.Fatalf("stats %+v", st)
	}
}

// A voter that stops reading fills its queue: Send keeps returning at once and drops.
func TestRaftTransportNeverBlocks(t *testing.T) {
	block := make(chan struct{})
	ts := startTestServer(t, func(s *served) {
		<-block // stop reading this connection
		s.tr.Ticket.NoResponse()
	})
	defer close(block)
	c := newTestClient(t, Config{NodeID: 1, Voters: map[int32]string{2: ts.addr()}, RaftQueue: 16, WriteTimeout: time.Hour})
	tr := c.RaftTransport()
	big := raftMsg(1, 2, 0)
	big.Entries[0].Data = make([]byte, 64<<10)
	start := time.Now()
	for range 2000 { // 128 MiB: far past the socket buffers and the queue
		tr.Send([]*raftpb.Message{big})
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Fatalf("Send blocked for %v", el)
	}
	if tr.Stats().Dropped == 0 {
		t.Fatal("nothing dropped")
	}
}

// An unreachable voter costs dropped messages, never a blocked Send.
func TestRaftTransportUnreachable(t *testing.T) {
	c := newTestClient(t, Config{NodeID: 1, Voters: map[int32]string{2: "127.0.0.1:1"}})
	tr := c.RaftTransport()
	for i := range 50 {
		tr.Send([]*raftpb.Message{raftMsg(1, 2, uint64(i))})
	}
	eventually(t, 5*time.Second, "drops", func() bool { return tr.Stats().Dropped == 50 })
}

func TestDecodeSamsaRaft(t *testing.T) {
	b, err := proto.Marshal(raftMsg(3, 4, 9))
	if err != nil {
		t.Fatal(err)
	}
	m, err := DecodeSamsaRaft(b)
	if err != nil || m.GetIndex() != 9 || m.GetFrom() != 4 {
		t.Fatalf("%v %v", m, err)
	}
	if _, err := DecodeSamsaRaft([]byte{0xff, 0xff, 0xff}); !errors.Is(err, ErrMalformedRaft) {
		t.Fatalf("garbage: %v", err)
	}
	if _, err := DecodeSamsaRaft(nil); !errors.Is(err, ErrMalformedRaft) {
		t.Fatalf("empty (no sender): %v", err)
	}
}
