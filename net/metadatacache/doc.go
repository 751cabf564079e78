// Package metadatacache is what a broker's handlers read of the cluster (Kafka's
// MetadataCache, with ReplicaManager's partition lookups): the published image with
// its metadata offset (View, written by the node's publisher in net/broker, read by
// net/kafka's handlers), what answers tell clients about the cluster from it
// (Routing: a broker's endpoint on a listener, the coordinator of a group or a
// transactional id, the controller to name), and the partitions this node leads
// (Partitions: image → partition → this node's leader replica and its log, from the
// replica manager, which alone creates them). It only reads; safe from any goroutine.
package metadatacache
