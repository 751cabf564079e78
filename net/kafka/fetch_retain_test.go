package kafka

import (
	"runtime"
	"testing"
	"unsafe"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestAnsweredParkedFetchesRetainNoPartitions measures the heap that answered long
// polls keep. A parked fetch stays in the fetch purgatory's watch lists of its other
// logs until they are swept (up to 1,000 completed fetches, and once fetches stop, for
// good); before it dropped its partitions and request, each kept one fetchPart per
// partition of its request and the request's frame: with 10,000 partitions that was
// most of the broker's heap under the partitions-10k workload (BENCHMARKS.md).
//
// Long polls over every partition of an empty topic, each answered by its timeout,
// then the heap after a GC against the heap before them, per partition and fetch.
func TestAnsweredParkedFetchesRetainNoPartitions(t *testing.T) {
	const partitions, fetches = 500, 40
	tb := startDataBroker(t)
	mustCreate(t, tb.admin(t), "linger", partitions, nil)
	id := topicID(t, tb, "linger")
	parts := make([]fetchPartReq, partitions)
	for i := range parts {
		parts[i] = fetchPartReq{topic: "linger", id: id, partition: int32(i), curEpoch: -1, lastEpoch: -1}
	}
	rc := tb.raw(t)
	fetch := func(maxWait int32) {
		t.Helper()
		resp := rc.roundTrip(fetchReq(12, maxWait, 1, 0, -1, parts, nil)).(*kmsg.FetchResponse)
		if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != partitions {
			t.Fatalf("fetch: error %d, %d topics", resp.ErrorCode, len(resp.Topics))
		}
		for _, p := range resp.Topics[0].Partitions {
			if p.ErrorCode != 0 || len(p.RecordBatches) != 0 {
				t.Fatalf("partition %d: error %d, %d record bytes", p.Partition, p.ErrorCode, len(p.RecordBatches))
			}
		}
	}
	fetch(0) // the first answer's allocations (caches, pools) before the baseline

	heap := func() int64 {
		runtime.GC()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return int64(ms.HeapAlloc)
	}
	before := heap()
	for range fetches {
		fetch(20) // parked (no data), answered when its 20 ms are up
	}
	watched := tb.b.data().waits.Watched()
	after := heap()
	if watched < (fetches-1)*partitions {
		t.Fatalf("%d watch entries after %d answered long polls over %d partitions: the fetches did not linger, the test measures nothing",
			watched, fetches, partitions)
	}
	perPartition := float64(after-before) / float64(fetches*partitions)
	t.Logf("heap %d → %d bytes after %d answered long polls over %d partitions (%d watch entries): %.1f bytes per partition per lingering fetch (a fetchPart is %d)",
		before, after, fetches, partitions, watched, perPartition, unsafe.Sizeof(fetchPart{}))
	if limit := float64(unsafe.Sizeof(fetchPart{})) / 4; perPartition > limit {
		t.Errorf("answered long polls keep %.1f bytes per partition each, want at most %.0f (a quarter of a fetchPart)", perPartition, limit)
	}
}
