// DescribeQuorum (key 55), versions 0-2.
//
// On a broker listener: forwarded to the active controller, as Kafka's brokers do (so
// kafka-metadata-quorum --bootstrap-server works). On the controller listener: the
// voter answers from its raft state when it leads the quorum, NOT_CONTROLLER
// otherwise (the caller then asks the others): topic __cluster_metadata partition 0,
// the leader and its epoch (the raft term), the high watermark (the last committed
// offset + 1), and each voter's log end offset (its match index + 1) and, v1+, the
// times the leader last heard from it and last saw it caught up. v2 adds the voters'
// controller endpoints (Nodes). Observers (brokers fetching the log) are not listed.
//
// Differences from Apache Kafka: no observers; ReplicaDirectoryID is zero.

package kafka

func init() {
	register(API{Key: 55, MinVersion: 0, MaxVersion: 2, Handle: handleDescribeQuorum})
}

func handleDescribeQuorum(b *Broker, r *Request) {
	b.forward(r, forwarded{})
}
