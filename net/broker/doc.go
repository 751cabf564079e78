// Package broker assembles a node's broker: what Kafka's BrokerServer builds and its
// BrokerMetadataPublisher drives, around the protocol adapter (net/kafka, Kafka's
// KafkaApis). It owns
//
//   - the replica manager (replication.Manager: every partition and its log), with its
//     settings from the broker keys, its ISR changes sent to the active controller, its
//     hooks waking the adapter's parked fetches;
//   - the coordinators, each hosted on the leadership of its internal topic's
//     partitions (coordinator/host): the group coordinator (__consumer_offsets), the
//     transaction coordinator (__transaction_state) with its marker writer and the
//     markers it sends to other brokers, the share coordinator (__share_group_state)
//     and the share partitions this node leads (share.Manager) with the persister that
//     reads and writes their state at any node's share coordinator;
//   - the feature levels (KIP-584) the node acts on, followed from each image;
//   - the publisher: each image the metadata follower publishes is applied, in order,
//     to the replica manager, the feature levels and the coordinators' hosts, then
//     handed to the adapter, which answers from it;
//   - what the handlers only call: the creation of internal and auto-created topics
//     (Kafka's AutoTopicCreationManager), the metadata barrier after a forwarded write,
//     producer-id blocks (Kafka's ProducerIdManager), the verification of transactional
//     produces and offset commits at the transaction coordinator (Kafka's
//     AddPartitionsToTxnManager, beside its ReplicaManager), the open-file headroom of
//     new partitions; at start-up, the removal of logs the image does not place here;
//   - the goroutines of all of it, waited for at Close.
//
// net/node builds one Broker per broker role, over the node's engine, metadata
// follower, controller channel and peer client; net/kafka's tests build theirs here
// too (an external test file sets the package's test hook).
//
//	                   Deps.Metadata (the metadata follower)
//	                         │ MetadataChanged(offset, old, new), in offset order
//	                         ▼
//	publisher ─1─▶ replica manager (controller.ReplicaDelta: become leader, follower,
//	          │                    stop; logs created, deleted, reconfigured)
//	          ├─2─▶ feature levels ──▶ transaction coordinator (transaction.version),
//	          │                        adapter (what ApiVersions advertises, the
//	          │                        group types served)
//	          ├─3─▶ coordinators' hosts (load the partitions this node now leads,
//	          │                          unload the others)
//	          └─4─▶ kafka.View.Publish: the image handlers answer from; requests
//	                waiting for it wake
//
// # The seam
//
// The adapter is given what its handlers call, in kafka.Deps, and nothing else of the
// node: it builds no state of its own beyond its handlers' (the handler table, request
// metrics, the Metadata answer cache, fetch and share sessions, the purgatories of
// parked fetches, the per-transactional-id order of produce requests).
//
//	kafka.Deps        what                                 here
//	View              the image handlers answer from       moved by the publisher (step 4)
//	Engine            the logs (DescribeLogDirs, log-dir   deps.Engine
//	                  health, a share partition's HW)
//	Replicas          partition lookup, appends, follower  the replica manager
//	                  fetches
//	Controller        forwarded requests, and the barrier  controller.go
//	                  after a write (Sync)
//	Topics            internal and auto-created topics,    internal_topics.go
//	                  a streams group's internal topics
//	Coordinators      the group, transaction and share     groups.go, txns.go, shares.go,
//	                  coordinators as hosted now (nil:     group_deletion.go
//	                  none here); what deleting groups
//	                  does beyond the group coordinator
//	Markers           WriteTxnMarkers on this node         txns.go
//	Shares            the share partitions this node leads shares.go
//	ShareReader       their records read and acquired      share_reader.go
//	                  for a member (ShareFetch)
//	ShareStates       share-partition state at any node's  shares_state.go
//	                  share coordinator, for the admin
//	                  APIs (codes out)
//	TxnVerifier       a transaction's partitions checked   txn_verify.go
//	                  or added at its coordinator
//	ProducerIDs       an id from the node's block          producer_ids.go
//	Features          the levels at start (later ones:     features.go
//	                  Broker.SetFeatures)
//	FileHeadroom      can this node open more partitions   file_headroom.go
//	Async             a goroutine of the node's, ended and broker.go
//	                  waited for at Close
//
// The adapter wakes its parked fetches when the replica manager's hooks say a log
// changed (kafka.Broker.LogChanged) and its parked share fetches when a share
// partition has records to hand out (kafka.Broker.ShareAvailable).
//
// # Why a package of its own
//
// net/node wires a process: configuration, storage checks, the roles, listeners and
// their security, the admin listener. The broker assembly is a part of one role with
// an interface of its own (New, MetadataChanged, Close), and net/kafka's tests need it
// without the rest of a node. So it sits between them: net/node imports it, it imports
// net/kafka, and net/kafka imports neither (internal/lint).
//
// # Closing
//
// CloseDataPath expires the parked fetches and closes the replica manager (its
// fetchers and timers; waiting acks=all produces answer REQUEST_TIMED_OUT). Close then
// ends the goroutines' context (forwarded requests answer NOT_CONTROLLER), closes the
// transaction and share coordinators, waits for the goroutines, and closes the group
// coordinator (parked joins answer NOT_COORDINATOR). Call both after the transport
// has drained and before closing the engine.
package broker
