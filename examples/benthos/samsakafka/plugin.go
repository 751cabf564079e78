// Package samsakafka is a Kafka input and output for Benthos
// (github.com/redpanda-data/benthos/v4), both named samsa_kafka, written on franz-go.
// Benthos' core no longer ships kafka_franz (it moved to Redpanda Connect, whose
// licence is not open source); these two plugins take its place for pipelines on
// Samsa or any Kafka-compatible broker, with config fields named as kafka_franz's.
//
//	topic A ──samsa_kafka input──▶ processors (Bloblang, …) ──samsa_kafka output──▶ topic B
//	 (consumer group; a partition's         (acks=all, idempotent; the batch is
//	  offset is committed only after         acknowledged upstream once the broker
//	  its records are acknowledged)          acknowledged every record)
//
// Delivery is at least once: after a crash, a rebalance or a failed write the records
// after the last commit are read and written again; none is skipped.
//
// Not done: kafka_franz's regexp_topics, rack_id, TLS and SASL fields, the output's
// partition and partitioner fields, and its timestamp field.
//
// Importing the package registers both plugins.
package samsakafka

import (
	"errors"
	"strings"

	"github.com/redpanda-data/benthos/v4/public/service"
)

func init() {
	if err := service.RegisterBatchInput("samsa_kafka", inputSpec(), newInput); err != nil {
		panic(err)
	}
	if err := service.RegisterBatchOutput("samsa_kafka", outputSpec(), newOutput); err != nil {
		panic(err)
	}
}

// seedBrokers reads seed_brokers, splitting entries at commas as kafka_franz does.
func seedBrokers(conf *service.ParsedConfig) ([]string, error) {
	list, err := conf.FieldStringList(fieldSeedBrokers)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range list {
		for _, b := range strings.Split(e, ",") {
			if b = strings.TrimSpace(b); b != "" {
				out = append(out, b)
			}
		}
	}
	if len(out) == 0 {
		return nil, errors.New("seed_brokers: at least one broker is needed")
	}
	return out, nil
}
