// Package node wires one Samsa node from its configuration: the storage checks
// (meta.properties), the controller role (the raft voter and the active controller),
// the broker role (engine, metadata follower, broker lifecycle, Kafka broker on its
// listeners), the admin HTTP listener; start-up and shutdown in order. `samsa serve`
// runs one Node; in-process multi-node tests run several.
//
//	keys (server.properties, env, flags) ──FromKeys──▶ *Config ──Start──▶ *Node ──Shutdown
//
//	combined node (process.roles=broker,controller)
//	┌──────────────────────────────────────────────────────────────────────────┐
//	│ controllerRole: quorum.Quorum (raft, DiskStorage in metadata.log.dir)     │
//	│                 controller.Controller over it (voter: the seam adapter)   │
//	│      ▲ LocalChannel                         │ LogSource (committed log)   │
//	│ brokerRole:  BrokerLifecycle ─────────────  MetadataFollower ─▶ published │
//	│              (register, heartbeat,          images, in offset order, to   │
//	│               controlled shutdown)          kafka.Broker + the lifecycle  │
//	│              kafka.Broker on the broker listeners (engine: log.dirs)      │
//	└──────────────────────────────────────────────────────────────────────────┘
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
// A combined node that is the only voter runs on the cluster's code: its metadata is
// the raft log of a quorum of one, its broker registers with its own controller
// through a LocalChannel, follows the committed log through a LogSource, and serves
// once unfenced. A data directory of the single-node layout before the raft log is
// imported into it at the first start (quorum.ImportLegacyStore); the new controller
// gives the imported broker registration a session, which that first start waits out
// (one broker.session.timeout.ms). A sole voter re-registers with its previous
// incarnation id, so a restart after a crash does not wait for the old session: no
// other process can hold its directories, which are locked.
//
// Start refuses, with ErrNotSupported naming the missing part (Missing), a node of a
// quorum of several voters, a broker-only node and a controller-only node: they need
// the controller listener's handler (net/kafka: raft messages between voters, the
// brokers' registrations, heartbeats and metadata fetches), and replicated
// partitions need the replica manager (replication). net/peer (the node-to-node
// client) has landed and is wired with them.
//
// # Shutdown
//
// Shutdown: the broker's controlled shutdown (its leaderships move away before it
// stops; bounded by broker.session.timeout.ms), the transport drains (no new
// connections, requests already read are answered), the broker's background state,
// the follower and the lifecycle stop; the admin listener; the controller and its
// raft voter, whose log closes; the logs close with their clean-shutdown marker.
package node
