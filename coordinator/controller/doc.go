// Package controller owns the cluster's control logic, KRaft's way: the active
// controller that turns Kafka's control requests into metadata records proposed to
// the quorum (coordinator/controller/quorum, behind the Quorum interface), and the
// broker's side of it: its registration and heartbeats (BrokerLifecycle), its copy
// of the committed metadata (MetadataFollower) and what each metadata change asks of
// its replicas (ReplicaDelta, for the replication package). Placement, leader
// election, fencing, ISR validation, controlled shutdown, the preferred-leader
// rebalance and reassignment are pure functions over a metadata.Image
// (placement.go, partition_change.go, partition_ops.go). It knows no sockets:
// net/kafka's CONTROLLER listener calls Controller.Handle, net/peer implements
// ControllerChannel and MetadataSource over the wire (docs/CLUSTER.md); LocalChannel,
// LogSource and MemLog are the in-process versions for a combined node, tests and
// simulations.
//
// # Request flow
//
//	broker / admin client           Controller (one per voter)              quorum
//	─────────────────────  Submit   ┌────────────────────────────────┐
//	BrokerRegistration  ──────────▶ │ refresh leadership             │
//	BrokerHeartbeat                 │ not active? ─▶ NOT_CONTROLLER  │
//	AlterPartition                  │ validate against pending image │
//	CreateTopics, ...               │ records? ── no ─▶ answer after │
//	                                │   │    the proposal it read    │
//	                                │   yes: pending = pending+recs  │ Propose
//	                                │        ─────────────────────────────────▶ raft
//	                                │ Poll / Run: result observed    │ ◀── committed
//	 ◀──────────── response ─────── │ answer (or NOT_CONTROLLER)     │     and applied
//	                                └────────────────────────────────┘
//
// Handle is Submit plus waiting (REQUEST_TIMED_OUT when ctx ends first). A request's
// records form one entry: they commit all or none.
//
// # The pending image
//
// While active, the controller keeps pending = the committed image with every
// proposal of its term still in flight applied, and validates each request against
// it, so that pipelined requests see each other (two CreateTopics of one name: the
// second is TOPIC_ALREADY_EXISTS). A request that makes no records but read pending
// state is answered only once the newest proposal in flight has committed (or with
// NOT_CONTROLLER if it failed). The pending image is dropped when the voter stops
// leading or its term changes, and rebuilt from the committed image when it is ready
// for writes in a new term. If a proposal of the current term fails after it was
// accepted (the quorum rejected it), pending cannot be trusted: requests wait until
// every proposal of the term has resolved, then pending restarts from the committed
// image. A proposal refused at once (not the leader, busy) is undone exactly.
//
// # Timers
//
// Every TickInterval (Clock.AfterFunc) the controller follows the quorum's
// leadership, fences every unfenced broker whose session (broker.session.timeout.ms
// since its last heartbeat) expired or that the liveness rules below find gone,
// moving its leaderships, and every leader.imbalance.check.interval.seconds, with
// auto.leader.rebalance.enable, moves leadership back to preferred replicas (at most
// 1,000 partitions at a time, brokers above leader.imbalance.per.broker.percentage;
// a preferred replica leads only from the ISR, and not within that interval of its
// unfencing by this controller: the next check comes when it is past it). The
// leaderships a lost broker's fence moves go, where the ISR allows, to replicas
// whose broker did not return from a restart within that interval, else to the one
// back the longest (FenceBrokerRecordsReturned): clients reconnect to a restarted
// broker only as their reconnect backoff allows.
// A controller that becomes active gives every registered broker a fresh session.
// The broker side: heartbeats every broker.heartbeat.interval.ms (every
// ShutdownPoll while in controlled shutdown, and at once when the image shows
// another broker entering one); a request older than its timeout counts as failed.
//
// # Liveness: fencing before the session expires
//
// A broker is fenced for a lost session when one of these holds, and never
// otherwise (fencing a live broker costs availability, never safety: it registers
// again):
//
//  1. No heartbeat for broker.session.timeout.ms (Kafka's rule; it is the only one
//     for a broker stopped by SIGSTOP, cut off by a partition or on a dead host:
//     its connection stays open, or closes without the rest holding).
//  2. Gone: it is detached — the CONTROLLER-listener connection its last heartbeat
//     came on closed (ConnClosed; a killed process's connections are closed by its
//     kernel at once), or it has not heartbeated to this controller since it became
//     active — and a connection to its endpoint (CheckListenerName) is refused
//     (ListenerRefuses), where this controller's first check of that registration
//     had been accepted. A live process, even a stopped one, accepts (the kernel
//     completes the handshake), so only a process that is gone is fenced this way;
//     an endpoint the controller cannot reach (a timeout, an address only clients
//     can use, one that refused from the start) is no evidence. The check is made at
//     once, then 10 ms doubling to 1 s while the broker stays detached (a killed
//     process's heartbeat connection can close while its listener still accepts:
//     the checks soon after find it refusing). Every voter's controller makes the
//     first checks of the committed image's unfenced registrations, so that a new
//     active controller can trust its own checks at once: the broker of a killed
//     combined node that was also the active controller is fenced as its
//     successor becomes active.
//  3. Its heartbeat connection closed and no heartbeat came on another within
//     CloseGrace(broker.heartbeat.interval.ms) = one interval + max(interval/2,
//     1 s): a broker heartbeating normally sends its next heartbeat within one
//     interval, on a new connection.
//
// A registration of another incarnation of a registered broker id is refused
// (DUPLICATE_BROKER_REGISTRATION) while the registered one's session is live:
// unexpired, unfenced and attached — or detached since this controller became active
// for less than CloseGrace. Not live: fenced (after a controlled shutdown, too), its
// heartbeat connection known closed, expired. A registration naming the registered
// incarnation as its predecessor (PredecessorTag: a restart on the same directories)
// is never refused. So a node restarted after a SIGKILL registers at once.
//
// # Eligible leader replicas
//
// At eligible.leader.replicas.version 1 (the default of a cluster formatted at 4.1 or
// later) partitionChange keeps each partition's ELR and last known leader, a
// registration that does not name the registered epoch as its PreviousBrokerEpoch
// (no clean shutdown) takes the broker out of the ELRs, and min.insync.replicas is
// one cluster-level value (or a topic's): controller_elr.go.
//
// # Feature levels
//
// A broker registers the ranges of feature levels its build supports, kept in its
// registration record; a registration that does not support a finalized level is
// UNSUPPORTED_VERSION. UpdateFeatures (controller_features.go) changes a level only
// when this controller and every unfenced registered broker support it, downgrades
// metadata.version only where no level in between changed the metadata, and keeps
// every level's dependencies. A log formatted before feature levels holds none: it is
// read at configs.LegacyFeatureLevels of this controller's keys until the first
// UpdateFeatures writes them all.
//
// # Invariants
//
//  1. A controller proposes only while its voter leads and is ready for writes, and
//     only records that apply to its pending image; a committed entry the state
//     machine rejects is a bug (logged).
//  2. A response reports success only for records that committed.
//  3. Broker epochs grow: a registration takes max(MaxBrokerEpoch, committed offset)
//     + 1, and every registration registers the broker fenced; a broker is unfenced
//     only once its reported metadata offset reaches its registration's (or, for
//     brokers registered before this controller became active, the activation's
//     committed offset), and never again in an epoch whose session this controller
//     declared lost.
//  4. A fenced broker leads nothing and is in no ISR but, at
//     eligible.leader.replicas.version 0, as a partition's last member (the ISR never
//     empties: Kafka's classic rule); a leader is always in its ISR; a leader is
//     elected from the ISR, the preferred replica first, then, at level 1 with an
//     empty ISR, from the eligible leader replicas (KIP-966: replicas that left an ISR
//     below min.insync.replicas, so hold every committed record; an unclean restart
//     takes a broker out of them), and outside them only as the topic's recovery
//     strategy allows (the last known leader, any live replica; then RECOVERING, ISR
//     of one). See partitionChange and controller_elr.go.
//  5. A broker in controlled shutdown leads nothing; it is told to shut down only
//     once every active broker has applied the records that moved its leaderships
//     (at once when it led nothing and was in no ISR: it is fenced in the same
//     answer).
//  6. The MetadataFollower publishes only images of prefixes of the committed log, in
//     offset order (see its type). ReplicaDelta is a pure function of two images.
//
// # Not done
//
// The voter list is not checked at registration (BrokerRegistration carries none):
// net/peer checks it on every connection to a voter instead (docs/CLUSTER.md).
// Unclean elections happen when a broker
// is fenced or unfenced, and by ElectLeaders, not on a timer for partitions left
// leaderless. UnregisterBroker is never proposed (a broker stays registered, fenced,
// until it registers again).
package controller
