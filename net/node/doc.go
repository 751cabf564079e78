// Package node wires one Samsa node from its configuration: the storage checks
// (meta.properties), the engine, the metadata, the Kafka broker on its listeners, the
// admin HTTP listener; start-up and shutdown in order. `samsa serve` runs one Node;
// in-process multi-node tests run several.
//
//	keys (server.properties, env, flags) ──FromKeys──▶ *Config ──Start──▶ *Node ──Shutdown
//
// # Configuration
//
// Kafka's KRaft keys (docs/CLUSTER.md, "Configuration"): process.roles, node.id,
// controller.quorum.voters (or controller.quorum.bootstrap.servers on a broker-only
// node), listeners, advertised.listeners, controller.listener.names,
// inter.broker.listener.name, listener.security.protocol.map (PLAINTEXT only),
// log.dirs, metadata.log.dir, broker.heartbeat.interval.ms,
// broker.session.timeout.ms, broker.rack, the replica.* keys and sync. FromKeys
// refuses, naming the key to fix: a controller whose node.id is not a voter; a
// broker-only node that is a voter; a controller without its controller listener; a
// voter list that names this node at another port (or address) than its controller
// listener binds; a node id listed twice; a listener on SSL or SASL; a heartbeat
// interval not below the session timeout.
//
// process.roles unset is a combined single node: broker and controller, the only
// voter, which formats its directories itself (today's `samsa serve`, `make run`).
//
// # Storage
//
// Every log dir and the metadata dir hold meta.properties (Kafka's version 1: version,
// cluster.id, node.id, directory.id), written by Format (`samsa storage format`).
// Start refuses an unformatted directory, one of another cluster or node, and a
// controller whose metadata dir lost its meta.properties while its log dirs kept
// theirs. It formats a fresh combined sole voter, formats a log dir added empty to a
// formatted node, and adopts the single-node directories of earlier versions
// (<data.dir>/meta.properties; metadata in <data.dir>/meta).
//
// Layout with the defaults:
//
//	<data.dir>/logs/meta.properties       log.dirs
//	<data.dir>/logs/<topic>-<partition>/   partition logs
//	<data.dir>/meta/meta.properties       metadata.log.dir
//	<data.dir>/meta/*.log, *.snapshot      the single-node metadata store
//
// # What is wired
//
// This build runs a combined node that is the only voter: its metadata is the
// single-node store (coordinator/metadata.Store) and the Kafka broker serves its
// listeners as before. Start refuses, with ErrNotSupported and the missing part
// named, a node of a quorum of several voters, a broker-only node and a
// controller-only node: the raft quorum (coordinator/controller/quorum), the
// Controller, BrokerLifecycle and MetadataFollower (coordinator/controller), the
// replica manager (replication), the node-to-node client (net/peer) and the
// controller listener's handler (net/kafka) are wired here as they land.
//
// # Shutdown
//
// Shutdown drains the transport (no new connections, requests already read are
// answered), stops the admin listener and the handlers' background state, then
// closes the metadata and the logs with their clean-shutdown marker.
package node
