package kafka

import (
	"testing"
	"time"

	"github.com/samsa-broker/samsa/coordinator/metadata"
	"github.com/samsa-broker/samsa/engine"
)

func newFuzzBroker(tb testing.TB) *Broker {
	eng, meta := openStores(tb, tb.TempDir(), testBrokerOptions{Sync: engine.SyncNone})
	tb.Cleanup(func() { meta.Close(); eng.Close() })
	cfg := Config{NodeID: 1, ClusterID: "fuzz", Host: "127.0.0.1", Port: 9092}
	lc, err := NewLocalController(meta, metadata.BrokerImage{ID: 1, Host: cfg.Host, Port: cfg.Port}, nil, testLogger(tb))
	if err != nil {
		tb.Fatal(err)
	}
	lc.maxPartitionsPerOp = 8 // keep the fuzzer's disk use small
	b, err := NewBroker(cfg, Deps{Engine: eng, Metadata: lc, Controller: lc}, testLogger(tb))
	if err != nil {
		tb.Fatal(err)
	}
	lc.Subscribe(b.MetadataChanged)
	tb.Cleanup(b.Close)
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
