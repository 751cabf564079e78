// Package brokermetrics owns the broker's Prometheus metrics that are not about
// requests: the data path per topic (Topics, Kafka's BrokerTopicStats) and the state
// of the cluster as this broker sees it (RegisterCluster: the gauges of Kafka's
// ReplicaManager, KafkaController and metadata loader, and the committed offsets and
// lag of the groups this node coordinates), computed at scrape time from what Sources
// name. The request and connection metrics of a listener stay with its dispatcher
// (net/kafka's metrics.go), which times each request.
//
// Names, labels and values are the Grafana dashboard's (deploy/grafana/samsa.json,
// checked by net/node's TestMetrics); Kafka's JMX names are in brackets in each help
// text.
package brokermetrics
