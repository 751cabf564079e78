// Package kafka is the broker's Kafka protocol adapter (Kafka's KafkaApis): it turns
// framed requests from a net/transport into calls of per-API handlers and encodes
// their answers. It holds the handler table, ApiVersions built from the table, the
// handlers of every API, and its secured listeners (SecureListener: the authentication of their connections
// is net/connauth's, the authorisation of their requests net/authz's). Storage is the engine's, partitions the replica manager's; cluster
// metadata is the published image of coordinator/metadata records, and every change of
// it goes to the active controller. What the handlers only call lives in packages of
// its own, as Kafka keeps it apart from KafkaApis: the node's assembly (net/broker: the
// replica manager, the coordinators and their hosting, the feature levels, the
// publishing of images, topic creation, producer ids), the authorisation of requests
// (net/authz; authz.go adapts its decisions), client quotas (net/quota), fetch
// sessions (net/fetchsession), share sessions (net/sharesession), the per-topic and
// cluster metrics (net/brokermetrics), a request between the transport and the
// handlers (net/request: parsing, answering, the request metrics), the parts of the
// wire format written by hand (net/wire: request and response headers, the Fetch
// response framed for sendfile, the error codes of an answer) and the authentication
// of connections (net/connauth: sessions, SaslHandshake, SaslAuthenticate); what
// handlers read of the cluster is net/metadatacache's (the published image, the
// routing of a cluster in answers: which broker leads what, which one coordinates a
// group, who the controller is; the partition lookups of the data path).
//
// # The broker in a cluster
//
//	                net/broker (the node's assembly)
//	                       │ builds the replica manager, the coordinators; publishes
//	                       ▼ each image (View.Publish) once they took it
//	client ──▶ handlers ──reads──▶ Deps.View ─── Deps.Replicas (partitions, appends,
//	             │                                 follower fetches),
//	             │                                 Deps.Coordinators (group, transaction,
//	             │                                 share), Deps.Shares, Deps.Topics, ...
//	             └─forward──▶ Deps.Controller (the node's controller channel, and the
//	                            barrier after a write)
//
// Admin requests (CreateTopics, DeleteTopics, CreatePartitions, AlterConfigs,
// IncrementalAlterConfigs, ElectLeaders, AlterPartitionReassignments,
// ListPartitionReassignments, DescribeQuorum), auto-created topics, __consumer_offsets
// and producer-id blocks are requests to the active controller (forward.go), sent from
// a goroutine of the node's (Deps.Async); a write is answered once the broker's image
// has caught up with the controller's commit (Controller.Sync), so the client that
// made a change sees it here at once. The image handlers read is the last one the
// node's publisher published, so the engine's logs and the coordinator's partitions
// always match it.
//
// New(cfg, Deps, log) builds a broker; net/broker builds its Deps, on a single node
// too (a raft quorum of one). The controller listener of a voter is net/controllerapi's
// (Kafka's ControllerApis), with its own handler table; it applies this package's
// authorisation rules (AuthzRule).
//
// # The kernel, for handler authors
//
// One file per API, named by key (00_produce.go, 18_api_versions.go, ...), starts with a
// header comment (versions served, behaviour, differences from Apache Kafka) and
// registers itself once:
//
//	func init() {
//		register(API{Key: 3, MinVersion: 0, MaxVersion: 13, Handle: handleMetadata, Authz: authz.Metadata})
//	}
//
// The registration is the API's one description in the protocol layer: versions,
// handler and authorisation rule (net/authz; none when the API's row of acl.APIs
// names only the cluster, TestAuthzEveryServedAPIHasARule). The dispatcher never
// grows a switch: the table alone decides what is served, and ApiVersions advertises
// exactly the table (versions capped at what kmsg knows).
//
// Request path, per connection, inline on the transport's read goroutine (the parsing
// and the answering are net/request's, the header codec net/wire's):
//
//	frame ─▶ request.Parse: wire.ParseFixedHeader ─▶ table lookup ─▶ version check
//	      ─▶ wire.ParseHeaderRest ─▶ kmsg decode (unless API.Raw) ─▶ API.Handle(b, *Request)
//
// On a SecureListener the connection's session admits the frame before it is parsed,
// and with an authorizer authz.Broker decides the decoded request under API.Authz
// before Handle runs (answered, closed, or run narrowed with an amendment:
// Request.AmendWith).
//
// Because Handle runs inline, requests of one connection reach their handler in order
// (appends from one connection happen in order; idempotent producers pipeline up to 5).
// Handle must not block: work that waits (fsync, acks=all, long-poll fetch) answers
// later from another goroutine. Answers leave in request order whatever order they
// are given in.
//
// Answering, exactly once per request, from any goroutine:
//
//	r.Respond(resp kmsg.Response)   encode header+body into a pooled buffer and answer
//	r.RespondRaw(transport.Response) a hand-framed answer (bytes + file ranges for
//	                                 sendfile, with a Releaser); begin it with
//	                                 wire.AppendResponseHeader(dst, &r.Header)
//	r.NoResponse()                  nothing on the wire (acks=0)
//	r.CloseConn()                   close once the earlier answers left
//
// r.Raw and anything aliasing the request frame are invalid once the request is
// answered; r.Body (kmsg-decoded, strings copied) may be kept, but byte slices inside
// it (Produce records) alias the frame too.
//
// Response header: v0 is the correlation id; v1 (flexible versions) adds an empty
// tagged-field section. ApiVersions always answers with v0:
//
//	v0: | correlation_id int32 |
//	v1: | correlation_id int32 | tagged_fields: 0x00 |
//
// # Helpers for handlers
//
// The Broker holds the handlers' shared state; what they call sits on small types of
// their own, each holding only what it reads:
//
//	b.parts.Lookup(topic, p)          image → partition → this node's leader replica
//	b.parts.LookupByID(id, p)         and its *engine.Log (the replica manager's: none
//	                                  is created here); Kafka errors: UNKNOWN_TOPIC_OR_
//	                                  PARTITION / UNKNOWN_TOPIC_ID, NOT_LEADER_OR_FOLLOWER
//	                                  (Partition.Image names the leader, KIP-951),
//	                                  KAFKA_STORAGE_ERROR (net/metadatacache)
//	b.route.LeaderEndpoint(l, id)     a broker's address on listener l (listenerOf(r);
//	                                  KIP-951 NodeEndpoints); b.route also finds
//	                                  coordinators and the controller clients are told
//	b.forward(r, forwarded{...})      answer r with the active controller's answer
//	b.topicMgr.AutoCreate(ctx, names) auto.create.topics.enable through the controller
//	b.keys.value(im, key)             a broker key: dynamic (node, cluster default),
//	                                  static (server.properties/env/flags), Kafka default
//	b.keys.topicLogConfig(im, topic)  a topic's engine.LogConfig from the same layers
//	                                  (keys.go)
//	b.features()                      the feature levels acted on (features_view.go)
//	b.produce, b.shares               Produce's and the share groups' own parts
//	                                  (00_produce.go, share_groups.go)
//	errf(kerr.X, fmt, ...)            a Kafka error with a message; errCode/errMsg map
//	                                  any error to the response's code and message
//
// Replica and log changes follow the image and nothing else: the node's publisher
// hands the replica manager (replication.Manager, the owner of every partition and its
// log) the image's ReplicaDelta before it publishes the image; a lookup only reads the
// replica the manager holds (Partition.Rep, and its log Partition.Log).
//
// Tests: startTestBroker(t) (testbroker_test.go) serves a single node of the
// cluster's real parts (singlenode_test.go), its broker assembled by net/broker
// (assembly_test.go), from t.TempDir() on 127.0.0.1:0; tb.client(t)/tb.admin(t) give
// kgo/kadm clients, tb.raw(t) a hand-driven kmsg connection, tb.restart() a restart
// on the same data.
//
// # Bad requests
//
// A request whose header is short or malformed, whose key is not served, whose version
// is outside the served range, or whose body kmsg cannot decode, closes its connection
// (after the answers to earlier requests left). That is what Apache Kafka does: the
// response schema of an unknown key or version is undefined, so no error can be
// encoded that the client could parse. The one exception is ApiVersions at an
// unsupported version, answered with UNSUPPORTED_VERSION in the v0 format plus the key
// list, so clients can negotiate down (KIP-511). A handler that panics (a bug) is
// recovered: its connection is closed and the panic logged.
package kafka
