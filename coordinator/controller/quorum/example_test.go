package quorum_test

import (
	"context"
	"fmt"
	"os"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/samsa-broker/samsa/coordinator/controller/quorum"
	"github.com/samsa-broker/samsa/coordinator/metadata"
)

// noPeers is the Transport of a quorum of one: there is nobody to send to. A real
// transport sends each message to quorum.NodeOf(m.GetTo()), whose network side
// calls Step on its Quorum.
type noPeers struct{}

func (noPeers) Send([]*raftpb.Message) {}

// A combined node's quorum of one voter on disk: it leads at once, commits a
// proposal, and serves the committed log as a broker's metadata fetch reads it.
func Example() {
	dir, _ := os.MkdirTemp("", "quorum-example")
	defer os.RemoveAll(dir)

	st, err := quorum.OpenDiskStorage(dir, quorum.DiskOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer st.Close()
	q, err := quorum.New(quorum.Config{NodeID: 1, Voters: []int32{1}}, st, noPeers{})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- q.Run(ctx) }()
	defer func() { cancel(); <-done }()

	// The voter is ready once its term's first entry (offset 2) is applied.
	if _, err := q.WaitCommitted(ctx, 1); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("ready for writes:", q.ReadyForWrites())

	id := metadata.UUID{0: 0x80, 15: 7}
	r := <-q.Propose([]metadata.Record{&metadata.TopicRecord{Name: "orders", ID: id}})
	fmt.Println("committed at offset", r.Offset, "error", r.Err)

	// A broker starting from nothing reads the bootstrap snapshot, then the log.
	res, _ := q.ReadCommitted(1, 1<<20)
	fmt.Println("snapshot needed:", res.SnapshotNeeded, "at offset", res.SnapshotOffset)
	res, _ = q.ReadCommitted(res.SnapshotOffset+1, 1<<20)
	for _, e := range res.Entries {
		fmt.Println("offset", e.Offset, "has records:", e.Data != nil)
	}
	// Output:
	// ready for writes: true
	// committed at offset 3 error <nil>
	// snapshot needed: true at offset 1
	// offset 2 has records: false
	// offset 3 has records: true
}
