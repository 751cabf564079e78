package kafka

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/net/transport"
)

// discardConn answers tickets by releasing the response.
type discardConn struct{ fakeConn }

func (c *discardConn) Complete(_ uint64, _ transport.Outcome, resp transport.Response) {
	if resp.Release != nil {
		resp.Release.Release()
	}
}

// BenchmarkDispatch measures the kernel alone (header parse, table lookup, kmsg
// decode, handler, pooled response encoding) on a fake connection.
func BenchmarkDispatch(b *testing.B) {
	tb := startTestBroker(b)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := tb.admin(b).CreateTopic(ctx, 8, 1, nil, "bench"); err != nil {
		b.Fatal(err)
	}
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("bench"))
	name := "bench"
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 12
	md.Topics = []kmsg.MetadataRequestTopic{{Topic: &name}}
	av := kmsg.NewPtrApiVersionsRequest()
	av.Version, av.ClientSoftwareName, av.ClientSoftwareVersion = 3, "bench", "1"
	for _, c := range []struct {
		name string
		req  kmsg.Request
	}{{"ApiVersions/v3", av}, {"Metadata/v12/8partitions", md}} {
		b.Run(c.name, func(b *testing.B) {
			frame := f.AppendRequest(nil, c.req, 1)[4:]
			conn := &discardConn{}
			b.SetBytes(int64(len(frame)))
			b.ReportAllocs()
			for b.Loop() {
				tb.b.Serve(transport.Request{Conn: conn, Ticket: transport.NewTicket(conn, 0), Frame: frame})
			}
		})
	}
}

// BenchmarkMetadataRoundTrip is a Metadata request from kgo over loopback TCP.
func BenchmarkMetadataRoundTrip(b *testing.B) {
	tb := startTestBroker(b)
	cl, err := kgo.NewClient(kgo.SeedBrokers(tb.addr))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 8, 1, nil, "bench"); err != nil {
		b.Fatal(err)
	}
	name := "bench"
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = []kmsg.MetadataRequestTopic{{Topic: &name}}
	b.ReportAllocs()
	start := time.Now()
	for b.Loop() {
		if _, err := req.RequestWith(ctx, cl); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "req/s")
}
