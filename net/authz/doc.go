// Package authz owns the authorisation of Kafka requests: what KafkaApis and
// ControllerApis ask their Authorizer before a handler runs (Kafka's AuthHelper), and
// how a refusal is answered. It applies coordinator/acl's per-API table (acl.APIs, the
// operation each API needs on which resource) with coordinator/acl's Authorizer, and
// fills KIP-430's authorized-operations fields. It knows no connection and no
// handler: the protocol layer (net/kafka) hands it a request and gets a decision.
//
// # The seam
//
//	net/kafka                                     net/authz
//	─────────                                     ─────────
//	SecureListener.Serve, controllerapi.Handler
//	  Request{Key, Version, Body | Raw} ────────▶ Broker(caller, req, rule)
//	  Caller{Authorizer, Principal, Image}        Controller(caller, req, rule, node)
//	  rule: the registration's API.Authz                │ the API's row (acl.Lookup),
//	                                                    │ its rule, the ACLs
//	  Decision ◀────────────────────────────────────────┘
//	    Run         handler runs; Body narrowed in place, or Raw replaced;
//	                Amend edits its answer before it is encoded
//	    Answered    Response is the answer; the handler does not run
//	    Unanswered  nothing on the wire (Produce, acks=0)
//	    Closed      the connection is closed (fail closed); Reason is logged
//
// Each API is described once: its registration in net/kafka names its Rule (Produce,
// Fetch, ..., one exported function per API, in key order in rules.go, rules_more.go,
// rules_share.go and rules_streams.go), and its row in acl.APIs says what it needs. An
// API whose row names only the cluster (or no check) has no rule: the row decides it
// (RowAlone). net/kafka's TestAuthzEveryServedAPIHasARule holds the two together.
//
// # Decisions
//
// A super user may do everything. Otherwise a request is
//
//   - passed as it is when the principal may do all it asks;
//   - answered without its handler when it may do none of it, or when the refusal is
//     of the whole request (a cluster action, the request's group or transactional
//     id): the answer carries Kafka's code on every item (TOPIC_AUTHORIZATION_FAILED,
//     GROUP_AUTHORIZATION_FAILED, CLUSTER_AUTHORIZATION_FAILED,
//     TRANSACTIONAL_ID_AUTHORIZATION_FAILED), in the controller's error shape for the
//     APIs the controller serves, else in the response's top-level error code;
//   - for a change or an expensive read of several items (Produce, Fetch, CreateTopics,
//     DeleteTopics, ...), split: the refused items are taken out of the request (a raw
//     body is re-encoded), the handler serves the rest, and Amend puts the refused
//     items back into the answer with their error;
//   - for other reads of several items (ListOffsets, OffsetFetch, DescribeGroups, ...),
//     served whole and amended: refused items get their error and lose their data,
//     items the principal may not see (Metadata of all topics, ListGroups, ...) are
//     removed (Kafka's filtering of unauthorised topics).
//
// An API without a row, or whose row names more than the cluster and which has no
// rule, has its connection closed. On the controller listener, CLUSTER_ACTION on the
// cluster (the nodes) allows everything, the APIs only nodes send are refused with
// CLUSTER_AUTHORIZATION_FAILED otherwise, and the others follow the broker listener's
// rules. KIP-430's authorized-operations fields of Metadata, DescribeCluster and
// DescribeGroups (and StreamsGroupDescribe's, in its rule) are filled from the ACLs
// when asked for (operations.go); refused items keep OperationsUnknown.
//
// Not done yet: CreateTopics does not hide the configs of a created topic the
// principal may not DescribeConfigs (KIP-525); ConsumerGroupHeartbeat and
// ShareGroupHeartbeat do not check DESCRIBE on their subscribed topic names.
//
// # Goroutines
//
// Broker, Controller and CreateDenied run on the request's read goroutine; they
// bring the authorizer up to the image's ACLs first (acl.Authorizer.Update, a pointer
// comparison unless the ACLs changed). An Amend runs once, on whichever goroutine
// answers the request, before the answer leaves: what it holds of the request (names
// decoded from a raw body alias the frame) is still valid then. The authorizer is
// safe for concurrent use; an Amend asks it again (the ACLs it decides by may be newer
// than the request's).
package authz
