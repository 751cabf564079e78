package kafka

import (
	"testing"
	"time"

	"github.com/samsa-broker/samsa/engine"
)

func newFuzzBroker(tb testing.TB) *Broker {
	eng, meta := openStores(tb, tb.TempDir(), testBrokerOptions{Sync: engine.SyncNone})
	tb.Cleanup(func() { meta.Close(); eng.Close() })
	b, err := New(Config{NodeID: 1, ClusterID: "fuzz", Host: "127.0.0.1", Port: 9092}, eng, meta, testLogger(tb))
	if err != nil {
		tb.Fatal(err)
	}
	b.maxPartitionsPerOp = 8 // keep the fuzzer's disk use small
	return b
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
