package kafka_test

import (
	"log/slog"

	"github.com/samsa-broker/samsa/net/broker"
	"github.com/samsa-broker/samsa/net/kafka"
)

// The broker assembly for the package's tests (assembly_test.go).
func init() {
	kafka.AssembleForTest = func(cfg kafka.Config, d kafka.TestNodeDeps, log *slog.Logger) (kafka.TestAssembly, error) {
		b, err := broker.New(cfg, broker.Deps{Engine: d.Engine, Metadata: d.Metadata, Controller: d.Controller,
			ControllerID: d.ControllerID, Fetch: d.Fetch, Peer: d.Peer}, log)
		if err != nil {
			return nil, err
		}
		return b, nil
	}
}
