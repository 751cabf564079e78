package metadata_test

import (
	"errors"
	"fmt"
	"os"

	"github.com/samsa-broker/samsa/coordinator/metadata"
)

// A CreateTopics request on one node: assign replicas, append the topic's records as one
// entry, read the result from the image.
func Example() {
	dir, _ := os.MkdirTemp("", "metadata-example")
	defer os.RemoveAll(dir)

	store, err := metadata.OpenStore(dir, metadata.StoreOptions{})
	if err != nil {
		panic(err)
	}
	defer store.Close()
	_ = store.Append(&metadata.RegisterBrokerRecord{ID: 0, Endpoints: []metadata.Endpoint{{Name: "PLAINTEXT", Host: "localhost", Port: 9092}}})

	brokers := []int32{0}
	assignment, err := metadata.AssignReplicas(brokers, 0, 3, 1)
	if err != nil {
		panic(err)
	}
	recs := metadata.CreateTopicRecords("orders", metadata.NewUUID(), assignment,
		map[string]string{"retention.ms": "86400000"})
	if err := store.Append(recs...); err != nil {
		panic(err)
	}
	// The same name again is refused, and nothing is written.
	again := metadata.CreateTopicRecords("orders", metadata.NewUUID(), assignment, nil)
	fmt.Println(errors.Is(store.Append(again...), metadata.ErrTopicExists))

	im := store.Image()
	t, _ := im.Topic("orders")
	fmt.Println(t.Name, len(t.Partitions), im.Configs(metadata.ResourceTopic, "orders")["retention.ms"])

	first, _ := store.AllocateProducerIDs(0, 1000)
	fmt.Println(first, store.Image().NextProducerID())
	// Output:
	// true
	// orders 3 86400000
	// 0 1000
}
