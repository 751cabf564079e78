package kafka

import (
	"context"
	"errors"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/controller"
	"github.com/samsa-broker/samsa/coordinator/metadata"
	"github.com/samsa-broker/samsa/engine"
	"github.com/samsa-broker/samsa/replication"
)

// The tests of this package serve brokers assembled as a node assembles them: by
// net/broker, which imports this package. A package's own tests cannot import a
// package that imports it, so an external test file (assembly_ext_test.go, package
// kafka_test, compiled into the same test binary) sets AssembleForTest to
// net/broker's New, and the tests call assemble.

// TestAssembly is a broker assembled by net/broker (*broker.Broker), as the tests
// drive it: its adapter (Kafka), the images of its metadata follower, its closing.
type TestAssembly interface {
	Kafka() *Broker
	MetadataChanged(offset uint64, old, im *metadata.Image)
	StartDataPath()
	CloseDataPath()
	Close()
}

// TestNodeDeps are what a test node builds its broker over (net/broker's Deps).
type TestNodeDeps struct {
	Engine   *engine.Manager
	Metadata interface {
		Image() (uint64, *metadata.Image)
	}
	Controller   controller.ControllerChannel
	ControllerID func() int32
	Fetch        func(source int32, index int) replication.FetchClient
	Peer         func(ctx context.Context, broker int32, req kmsg.Request) (kmsg.Response, error)
}

// AssembleForTest is net/broker's New, set by assembly_ext_test.go.
var AssembleForTest func(cfg Config, d TestNodeDeps, log *slog.Logger) (TestAssembly, error)

// assemble builds a broker over d through net/broker.
func assemble(cfg Config, d TestNodeDeps, log *slog.Logger) (TestAssembly, error) {
	if AssembleForTest == nil {
		return nil, errors.New("kafka tests: no assembly (assembly_ext_test.go sets AssembleForTest)")
	}
	return AssembleForTest(cfg, d, log)
}
