package remote

import (
	"testing"
	"time"

	"github.com/samsa-broker/samsa/internal/s3test"
)

// gateway is a versitygw S3 gateway run as a child process over a
// temporary directory (internal/s3test).
type gateway struct {
	*s3test.Gateway
	root string
}

// startGateway starts versitygw and waits until it answers S3 requests;
// it is killed when the test ends.
func startGateway(tb testing.TB) *gateway {
	tb.Helper()
	g := s3test.Start(tb)
	return &gateway{Gateway: g, root: g.Root}
}

func (g *gateway) kill()                                 { g.Kill() }
func (g *gateway) pause(tb testing.TB)                   { g.Pause(tb) }
func (g *gateway) makeBucket(tb testing.TB, name string) { g.MakeBucket(tb, name) }

// config is a Config for the gateway and bucket, with short timeouts.
func (g *gateway) config(bucket string) Config {
	return Config{
		Bucket: bucket, Region: "us-east-1", Endpoint: g.Endpoint, PathStyle: true,
		AccessKeyID: g.Access, SecretAccessKey: g.Secret,
		PartSize: defaultPartSize, CallTimeout: 20 * time.Second, AttemptTimeout: 5 * time.Second, ChunkSize: 4 << 20,
	}
}
