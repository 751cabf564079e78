// Command samsa-benthos is Benthos with its core components (Bloblang, the pure
// processors, stdin/stdout and files) and the samsa_kafka input and output:
//
//	go build -o samsa-benthos ./cmd/samsa-benthos
//	SAMSA_BROKERS=127.0.0.1:9092 ./samsa-benthos -c pipeline.yaml
package main

import (
	"context"

	_ "github.com/redpanda-data/benthos/v4/public/components/io"
	_ "github.com/redpanda-data/benthos/v4/public/components/pure"
	"github.com/redpanda-data/benthos/v4/public/service"

	_ "github.com/samsa-broker/samsa/examples/benthos/samsakafka"
)

func main() {
	service.RunCLI(context.Background())
}
