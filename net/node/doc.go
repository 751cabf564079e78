// Package node wires one Samsa node from its configuration: the storage checks
// (meta.properties), the controller role (the raft voter and the active controller),
// the broker role (engine, metadata follower, broker lifecycle, the broker net/broker
// assembles, its protocol adapter on the listeners), the admin HTTP listener; start-up
// and shutdown in order. `samsa serve` runs one Node; in-process multi-node tests run
// several.
//
//	keys (server.properties, env, flags) ──FromKeys──▶ *Config ──Start──▶ *Node ──Shutdown
//
//	combined node (process.roles=broker,controller)
//	┌──────────────────────────────────────────────────────────────────────────┐
//	│ controllerRole: quorum.Quorum (raft, DiskStorage in metadata.log.dir) ◀──┼── SamsaRaft
//	│                 controller.Controller over it (voter: the seam adapter)  │   (other voters)
//	│ CONTROLLER listener: controllerapi.Handler (raft, brokers' requests,     │◀─ brokers
//	│                      metadata fetches)                                   │
//	│      ▲ LocalChannel (sole voter) or         │ LogSource (its own voter's  │
//	│      │ net/peer ControllerChannel           │ committed log)              │
//	│ brokerRole:  BrokerLifecycle ─────────────  MetadataFollower ─▶ published │
//	│              (register, heartbeat,          images, in offset order, to   │
//	│               controlled shutdown)          broker.Broker + the lifecycle │
//	│              broker.Broker (net/broker: replica manager, coordinators;    │
//	│              engine: log.dirs; its replica fetchers reach other brokers   │
//	│              through net/peer), its kafka.Broker on the broker listeners  │
//	└──────────────────────────────────────────────────────────────────────────┘
//
// # Configuration
//
// Kafka's KRaft keys (docs/CLUSTER.md, "Configuration"): process.roles, node.id,
// controller.quorum.voters (or controller.quorum.bootstrap.servers: on a broker-only
// node the voters are asked of them; on a controller they make a dynamic quorum,
// quorum_dynamic.go), listeners, advertised.listeners, controller.listener.names,
// inter.broker.listener.name, listener.security.protocol.map (security.go, internode.go),
// log.dirs, metadata.log.dir, broker.heartbeat.interval.ms,
// broker.session.timeout.ms, broker.rack, the replica.* keys and sync. FromKeys
// refuses, naming the key to fix: a controller whose node.id is not a voter; a
// broker-only node that is a voter; a controller without its controller listener; a
// voter list that names this node at another port (or address) than its controller
// listener binds; a node id listed twice; a heartbeat interval not below the session
// timeout.
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
//	<metadata.log.dir>/broker.incarnation  a cluster node's last broker incarnation id
//
// # The roles
//
// A combined node that is the only voter runs without the network: its broker
// registers with its own controller through a LocalChannel and follows the committed
// log through a LogSource. A data directory of the single-node layout before the raft
// log is imported into it at the first start (quorum.ImportLegacyStore); the new
// controller gives the imported broker registration a session, which that first
// start waits out (one broker.session.timeout.ms). A sole voter re-registers with its
// previous incarnation id, so a restart after a crash does not wait for the old
// session: no other process can hold its directories, which are locked.
//
// A node of a cluster reaches the others through one net/peer client: its voter
// sends raft messages with it (SamsaRaft on the CONTROLLER listener), its broker
// sends the lifecycle's and the forwarded admin requests to the active controller
// with it (ControllerChannel), a broker-only node fetches the committed log with it
// (MetadataSource; a combined node reads its own voter's), and the replica fetchers
// copy from other brokers with it (FetchClient). A controller serves its CONTROLLER
// listener with net/controllerapi's Handler, and checks the inter-broker listener
// of a broker whose heartbeat connection closed (coordinator/controller's liveness
// rules: one that refuses is gone, and fenced at once). The broker lifecycle has a
// connection of its own to the active controller (peer's HeartbeatChannel); every
// connection to a voter checks that the voter lists the same voter ids as this node
// (a node with another list says so in an error, names both lists, and neither
// registers nor exchanges raft messages with those voters). A broker-only node given
// controller.quorum.bootstrap.servers learns the voters from them. In a dynamic quorum
// (KIP-853, quorum_dynamic.go) the voters are the members the metadata log records:
// net/peer follows them (a controller from its voter's configuration, a broker from
// its image) and checks no voter list; a voter reports its own directory id and
// endpoint to the leader (UpdateRaftVoter) when the log records others; a combined
// node whose voter was removed reads the log from the voters.
//
// A cluster node's broker records its incarnation id in broker.incarnation and names
// the previous one as its predecessor when it registers: it holds the node's log dirs
// (locked), so the previous process has ended, and a restart after a crash registers
// at once instead of waiting for that process's session to expire (Kafka's
// DUPLICATE_BROKER_REGISTRATION rule still refuses another process with the same
// node.id on other directories).
//
// # Shutdown
//
// Shutdown: the broker's controlled shutdown (its leaderships move away before it
// stops; bounded by broker.session.timeout.ms, and by two election timeouts and half
// a second without an answer from an active controller), the transport drains (no new
// connections, requests already read are answered), the broker's background state,
// the follower and the lifecycle stop; the admin listener; the controller drains (its
// proposals in flight commit while the CONTROLLER listener still carries raft
// messages), then the listener, then the controller and its raft voter, whose log
// closes; the logs close with their clean-shutdown marker.
package node
