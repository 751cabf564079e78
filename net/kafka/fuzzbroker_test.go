package kafka

import (
	"testing"
	"time"

	"github.com/samsa-broker/samsa/engine"
)

func newFuzzBroker(tb testing.TB) *Broker {
	node := startSingleNode(tb, tb.TempDir(), Config{NodeID: 1, ClusterID: "fuzz", Host: "127.0.0.1", Port: 9092},
		singleNodeOptions{Sync: engine.SyncNone, MaxPartitionsPerOp: 8}) // keep the fuzzer's disk use small
	tb.Cleanup(func() { node.close() })
	return node.b
}

// waitAnswered polls until the fake connection's request 0 is answered.
func waitAnswered(t *testing.T, c *fakeConn) {
	deadline := time.Now().Add(5 * time.Second)
	for {
		c.mu.Lock()
		_, ok := c.answers[0]
		c.mu.Unlock()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("request never answered")
		}
		time.Sleep(time.Millisecond)
	}
}
