package tiered_test

import (
	"context"
	"testing"
	"time"

	"github.com/samsa-broker/samsa/engine"
	"github.com/samsa-broker/samsa/internal/s3test"
	"github.com/samsa-broker/samsa/replication/tiered"
)

// remote.log.manager.fetch.max.bytes.per.second: a consumer's fetch below the
// local log start reads from remote storage while the reads before it are
// within the rate; past it, a fetch reads nothing and is Throttled, without
// an error (Kafka answers the partition empty), until the bytes read are
// back within the rate.
func TestRemoteFetchQuota(t *testing.T) {
	g := s3test.Start(t)
	sm := storage(t, g)
	const rate = 16 << 10
	n := openNode(t, t.TempDir(), 0, sm, dataConfig(), func(c *tiered.Config) { c.FetchBytesPerSecond, c.FetchMaxWait = rate, 10*time.Second })
	defer n.close()
	n.produce(t, 0, 600)
	if err := n.rlm.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	r, err := n.data.FetchRemote(0, 8<<10, false)
	if err != nil || r.Throttled || r.Records.Len() == 0 {
		t.Fatalf("the first fetch: %d bytes, throttled %v, %v", r.Records.Len(), r.Throttled, err)
	}
	read := time.Now()
	next := engine.BatchesEnd(r.Records.Bytes())
	r2, err := n.data.FetchRemote(next, 8<<10, false)
	if err != nil || !r2.Throttled || r2.Records.Len() != 0 {
		t.Fatalf("a fetch right after %d bytes at %d bytes/s: %d bytes, throttled %v, %v", r.Records.Len(), rate, r2.Records.Len(), r2.Throttled, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		r2, err = n.data.FetchRemote(next, 8<<10, false)
		if err != nil {
			t.Fatal(err)
		}
		if !r2.Throttled {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("still throttled after 10 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	waited := time.Since(read)
	want := time.Duration(r.Records.Len()) * time.Second / rate
	t.Logf("%d bytes read at %d bytes/s: the next read %v later (at the rate: %v)", r.Records.Len(), rate, waited, want)
	if waited < want*8/10 || r2.Records.Len() == 0 || engine.BatchesEnd(r2.Records.Bytes()) <= next {
		t.Fatalf("the next read after %v (want %v): %d bytes", waited, want, r2.Records.Len())
	}
	if ts, _ := n.rlm.Stats(); len(ts) != 1 || ts[0].FetchThrottled < 1 {
		t.Fatalf("stats %+v", ts)
	}
}
