// Package peer owns the node-to-node Kafka client: how a node reaches another node by
// id on a named listener and speaks Kafka's framing to it. It implements the paths of
// docs/CLUSTER.md ("The paths between nodes"): coordinator/controller's
// ControllerChannel (requests to the active controller, found among the voters) and
// MetadataSource (Fetch and FetchSnapshot of __cluster_metadata), the raft Transport
// of coordinator/controller/quorum (the private API SamsaRaft), and replication's
// FetchClient (Fetcher) and ISRClient. It also holds the two
// wire forms those paths add to Kafka's: the SamsaRaft request body and the framing of
// metadata entries inside a Fetch response, shared with the server side (net/kafka).
//
// # Connections
//
// A Client keeps at most one connection per (target, purpose): a target is a voter
// (reached on its CONTROLLER listener, addresses from controller.quorum.voters) or a
// broker (its inter-broker listener, address from the published image). Purposes keep
// slow traffic off fast traffic: a metadata long poll does not delay a heartbeat, a
// raft snapshot does not delay a vote, a forwarded CreateTopics does not delay a
// heartbeat (the broker lifecycle has the heartbeat purpose to itself, so the close of
// that connection tells the active controller the broker is gone). Each role's
// listener is reached with its Security (security.go): TLS at the dial, SASL after
// ApiVersions, re-authentication before the session expires (KIP-368).
//
// # Finding the voters and the active controller
//
// The voters are controller.quorum.voters; a broker-only node given
// controller.quorum.bootstrap.servers instead asks them for the voters (DescribeCluster
// with EndpointType 2, KIP-919) before its first request to the voters, and keeps the
// first answer of its cluster. With CheckVoterSet, every new connection to a voter asks
// it for its voters the same way and is refused (ErrVoterSetMismatch, logged with both
// lists) when their ids differ from this node's. In a dynamic quorum (KIP-853) the node
// sets the voters from the metadata log as they change (SetVoters), or asks the
// bootstrap servers once more for a controller waiting to be added (LearnVoters), and
// the voter lists are not compared.
//
// Requests to the active controller go to the leader hint first (the voter that last
// answered as active, or the leader a metadata fetch or the local voter reported for
// the newest term), then the others by id. A voter that leaves a request unanswered —
// the caller's deadline passed, VoterTimeout passed (heartbeats, registrations,
// metadata fetches, which may be sent again: a voter that accepts connections but
// answers nothing, such as a SIGSTOPped process, costs them at most VoterTimeout), or
// its connection failed — is dropped from the hint and asked last, until it answers
// again or a later term names it leader.
//
//	Request ─▶ slot(target, purpose) ─▶ connected? ─no─▶ in backoff? ─yes─▶ ErrBackoff
//	                                     │ yes             │ no
//	                                     ▼                 ▼
//	                                   send  ◀── dial (+ TLS) + ApiVersions (+ SASL)
//	                                     │       (failure: backoff 50 ms doubling to 1 s, ±20%)
//	                                     ▼
//	     correlation id n, queued in order ─▶ written ─▶ reader matches response n
//
// Requests on one connection are pipelined (up to MaxInFlight unanswered). Kafka
// answers a connection's requests in order, so the reader matches each response with
// the oldest unanswered request; a response whose correlation id is not that one is a
// broken peer, and the connection closes. Requests without a response (SamsaRaft) take
// a correlation id but no place in the queue.
//
// Invariants:
//  1. Correlation ids on a connection are written in increasing order, one per request,
//     and the unanswered queue is in the same order.
//  2. A response frame larger than MaxResponseBytes, or malformed, closes the connection
//     before anything is allocated for it; every request still waiting on the
//     connection fails. No response is ever attributed to the wrong request.
//  3. A request waits at most RequestTimeout (plus the long-poll wait it asks for, for
//     Fetch); past it the connection is closed, as Kafka's NetworkClient does, since a
//     peer that answers nothing holds up every request behind it. A caller whose ctx
//     ends first abandons its request only: the connection stays, the late response is
//     dropped — and if it never comes, the abandoned request's timeout still closes
//     the connection.
//  4. Versions: a request is sent at the highest version both kmsg and the peer (its
//     ApiVersions) support, and its Version field is set to it; a replica fetcher
//     sends at the version its caller chose, if the peer serves it. A response is
//     decoded at the version its request was sent at.
//
// # Lost brokers and voters
//
// A broker (or voter) whose side closed a connection of this node (end of stream,
// reset: in the TCP state already before the reader sees it, on Linux) or refused a
// dial is lost in that role until a dial to it in that role succeeds; a probe, a
// connection of its own with the handshake, follows each such close (reach.go).
// Unreachable reports lost brokers: the broker's Metadata answers wait for the fence
// of a lost leader (net/kafka). VoterLost (RaftTransport.VoterLost) reports lost
// voters: the controller quorum's followers of a lost leader start the election
// early (coordinator/controller/quorum, Config.LeaderLost).
//
// # SamsaRaft (private key 10000, version 0)
//
//	request header v1 (api key 10000, version 0, correlation id, client id)
//	body: one raftpb.Message, marshaled with proto.Marshal; no response
//
// # Metadata entries in a Fetch response (Records of partition 0 of __cluster_metadata)
//
//	+------------+------------+---------------------------------------+
//	| offset u64 | length u32 | entry frame (length bytes; 0: none)   |
//	+------------+------------+---------------------------------------+  ... repeated
//	offsets are consecutive raft indexes from the fetch offset on; an entry without
//	records (raft's empty entry, a conf change) has length 0; length <= metadata.MaxEntrySize
//
// # Goroutines
//
// A Client, a ControllerChannel, a MetadataSource, a RaftTransport, a Fetcher and an
// ISRClient are safe for concurrent use. Each connection has one reader goroutine;
// writes happen on the caller's goroutine under the connection's write lock. Each voter
// a RaftTransport sends to has one sender goroutine draining a bounded queue.
package peer
