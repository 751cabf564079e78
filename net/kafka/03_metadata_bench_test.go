package kafka

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/metadata"
	"github.com/samsa-broker/samsa/net/transport"
)

// sizeConn answers tickets by noting the response's size and releasing it.
type sizeConn struct {
	fakeConn
	last int64
}

func (c *sizeConn) Complete(_ uint64, _ transport.Outcome, resp transport.Response) {
	c.last = resp.Size()
	if resp.Release != nil {
		resp.Release.Release()
	}
}

// withManyPartitions moves tb's image to one with topics × partitions more partitions,
// all led by a second broker (this node has no replica to create), as a controller
// would publish them.
func withManyPartitions(b *testing.B, tb *testBroker, topics, partitions int) {
	b.Helper()
	off, im := tb.b.Image()
	recs := []metadata.Record{&metadata.RegisterBrokerRecord{ID: 2, Epoch: im.MaxBrokerEpoch() + 1,
		Endpoints: []metadata.Endpoint{{Name: "PLAINTEXT", Host: "127.0.0.2", Port: 19092, SecurityProtocol: metadata.ProtocolPlaintext}}}}
	for i := range topics {
		var id metadata.UUID
		binary.BigEndian.PutUint64(id[:], uint64(i+1))
		id[15] = 0xaa
		recs = append(recs, &metadata.TopicRecord{Name: fmt.Sprintf("many-%03d", i), ID: id})
		for p := range partitions {
			recs = append(recs, &metadata.PartitionRecord{TopicID: id, Partition: int32(p), Replicas: []int32{2}, ISR: []int32{2}, Leader: 2})
		}
	}
	next, err := im.Apply(recs...)
	if err != nil {
		b.Fatal(err)
	}
	tb.a.MetadataChanged(off+1, im, next)
}

// BenchmarkMetadataAllTopics is a Metadata request for every topic of a broker with
// 10,000 partitions (10 topics × 1,000), through the dispatch (header, decode,
// handler, encoding) on a fake connection: uncached (built from the image and
// encoded per request, the path before the cache) and cached (03_metadata_cache.go).
func BenchmarkMetadataAllTopics(b *testing.B) {
	tb := startTestBroker(b)
	withManyPartitions(b, tb, 10, 1000)
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("bench"))
	for _, v := range []int16{12} {
		frame := f.AppendRequest(nil, allTopicsRequest(v), 1)[4:]
		for _, mode := range []string{"uncached", "cached"} {
			b.Run(fmt.Sprintf("v%d/10x1000/%s", v, mode), func(b *testing.B) {
				tb.b.mdCache.disabled.Store(mode == "uncached")
				defer tb.b.mdCache.disabled.Store(false)
				conn := &sizeConn{}
				b.ReportAllocs()
				for b.Loop() {
					tb.b.Serve(transport.Request{Conn: conn, Ticket: transport.NewTicket(conn, 0), Frame: frame})
				}
				if conn.last < 10000*20 {
					b.Fatalf("answer of %d bytes for 10,000 partitions", conn.last)
				}
				b.SetBytes(conn.last)
				b.ReportMetric(float64(conn.last), "resp-B")
			})
		}
	}
}
