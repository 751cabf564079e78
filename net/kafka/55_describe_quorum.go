// DescribeQuorum (key 55), versions 0-2.
//
// On a broker listener: forwarded to the active controller, as Kafka's brokers do (so
// kafka-metadata-quorum --bootstrap-server works). On the controller listener: the
// voter answers from its raft state when it leads the quorum, NOT_CONTROLLER
// otherwise (the caller then asks the others): topic __cluster_metadata partition 0,
// the leader and its epoch (the raft term), the high watermark (the last committed
// offset + 1), and each voter's log end offset (its match index + 1), v1+ the times
// the leader last heard from it and last saw it caught up, v2 its directory id (zero
// in a static quorum, kraft.version 0). Observers are the controllers being added
// (raft learners, with their directory ids) and the brokers (the metadata offset of
// their last heartbeat). v2 adds the members' controller endpoints (Nodes): those
// the log records in a dynamic quorum, controller.quorum.voters' in a static one.
//
// Differences from Apache Kafka: a broker's LastFetchTimestamp is its last heartbeat.

package kafka

func init() {
	register(API{Key: 55, MinVersion: 0, MaxVersion: 2, Handle: handleDescribeQuorum})
}

func handleDescribeQuorum(b *Broker, r *Request) {
	b.forward(r, forwarded{})
}
