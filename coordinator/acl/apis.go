package acl

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/metadata"
)

// The per-API table: for each Kafka API, which operation on which resource it needs,
// as Kafka's KafkaApis/ControllerApis check it (the "Operations and Resources on
// Protocols" table of Kafka's security documentation, corrected where the code checks
// something else; each correction is in the row's Note). The protocol layer consults it
// (Lookup) and applies the requirements of its handler in order; an API without a row
// must be refused (fail closed).
//
// Reading a row: requirements apply in order, each only When its condition holds for
// the request. Scope says which names of the request are checked. OnDenied says what a
// refusal does: Refuse answers the item (or, for a cluster or single-name scope, the
// whole request) with Error; Omit drops the item from the answer without an error;
// TryNext makes the following requirement an alternative (the pair passes if either
// does).

// Scope is which resources of a request a requirement checks.
type Scope uint8

// The scopes.
const (
	ScopeCluster          Scope = iota // the cluster (ClusterName)
	ScopeTopics                        // each topic the request names
	ScopeAnyTopic                      // some topic: Authorizer.AuthorizeByResourceType
	ScopeGroup                         // the request's group id
	ScopeGroups                        // each group the request names or the answer lists
	ScopeTransactionalID               // the request's transactional id
	ScopeTransactionalIDs              // each transactional id the request names or the answer lists
	ScopeDelegationTokens              // each token the answer lists (its owner's User resource, or the token)
	ScopeUsers                         // each token owner named (User resource)
)

// Condition is when a requirement applies.
type Condition uint8

// The conditions.
const (
	Always                 Condition = iota
	IfTransactional                  // Produce with transactional batches; InitProducerId with a transactional id
	IfNotTransactional               // InitProducerId without a transactional id (idempotent producer)
	IfReplica                        // Fetch with a replica id (a follower)
	IfConsumer                       // Fetch without a replica id
	IfNamedTopics                    // the request names its topics
	IfAllTopics                      // the request asks for every topic (null topics)
	IfAutoCreate                     // Metadata of missing topics with allow_auto_topic_creation and auto.create.topics.enable
	IfGroupKey                       // FindCoordinator of key type 0 (group)
	IfTransactionKey                 // FindCoordinator of key type 1 (transaction)
	IfShareKey                       // FindCoordinator of key type 2 (share group)
	IfBrokerResource                 // a BROKER or BROKER_LOGGER resource (and CLIENT_METRICS)
	IfTopicResource                  // a TOPIC resource
	IfGroupResource                  // a GROUP resource (group configs)
	IfClientBatch                    // AddPartitionsToTxn v0-3, or a v4+ batch from a client
	IfBrokerBatch                    // AddPartitionsToTxn v4+ verify-only batch from a broker
	IfSubscribedTopicNames           // a group heartbeat that lists subscribed topic names
	IfOtherOwner                     // CreateDelegationToken for an owner other than the requester
	IfTopology                       // a StreamsGroupHeartbeat that carries a topology (a join)
	IfMissingInternal                // a streams group misses internal topics the broker is to create
)

// OnDenied is what a refused requirement does.
type OnDenied uint8

// The outcomes.
const (
	Refuse  OnDenied = iota // answer the item (or request) with Requirement.Error
	Omit                    // leave the item out of the answer, no error
	TryNext                 // the next requirement is an alternative
)

// Requirement is one check of an API.
type Requirement struct {
	Operation metadata.ACLOperation
	Resource  metadata.ACLResourceType
	Scope     Scope
	When      Condition
	OnDenied  OnDenied
	// Error is the Kafka error code of a refusal (0 for Omit and TryNext).
	Error int16
	Note  string
}

// API is the authorisation row of one Kafka API.
type API struct {
	Key  int16
	Name string
	// None: no authorisation applies (the authentication handshake, telemetry).
	None         bool
	Requirements []Requirement
	Note         string
}

var (
	errTopic   = kerr.TopicAuthorizationFailed.Code
	errGroup   = kerr.GroupAuthorizationFailed.Code
	errCluster = kerr.ClusterAuthorizationFailed.Code
	errTxn     = kerr.TransactionalIDAuthorizationFailed.Code
	errToken   = kerr.DelegationTokenAuthorizationFailed.Code
)

const (
	opRead            = metadata.ACLOpRead
	opWrite           = metadata.ACLOpWrite
	opCreate          = metadata.ACLOpCreate
	opDelete          = metadata.ACLOpDelete
	opAlter           = metadata.ACLOpAlter
	opDescribe        = metadata.ACLOpDescribe
	opClusterAction   = metadata.ACLOpClusterAction
	opDescribeConfigs = metadata.ACLOpDescribeConfigs
	opAlterConfigs    = metadata.ACLOpAlterConfigs
	opIdempotentWrite = metadata.ACLOpIdempotentWrite
	opCreateTokens    = metadata.ACLOpCreateTokens
	opDescribeTokens  = metadata.ACLOpDescribeTokens

	rTopic   = metadata.ACLResourceTopic
	rGroup   = metadata.ACLResourceGroup
	rCluster = metadata.ACLResourceCluster
	rTxn     = metadata.ACLResourceTransactionalID
	rToken   = metadata.ACLResourceDelegationToken
	rUser    = metadata.ACLResourceUser
)

func onCluster(op metadata.ACLOperation) Requirement {
	return Requirement{Operation: op, Resource: rCluster, Scope: ScopeCluster, Error: errCluster}
}

func eachTopic(op metadata.ACLOperation) Requirement {
	return Requirement{Operation: op, Resource: rTopic, Scope: ScopeTopics, Error: errTopic}
}

func oneGroup(op metadata.ACLOperation) Requirement {
	return Requirement{Operation: op, Resource: rGroup, Scope: ScopeGroup, Error: errGroup}
}

func eachGroup(op metadata.ACLOperation) Requirement {
	return Requirement{Operation: op, Resource: rGroup, Scope: ScopeGroups, Error: errGroup}
}

func oneTxnID(op metadata.ACLOperation) Requirement {
	return Requirement{Operation: op, Resource: rTxn, Scope: ScopeTransactionalID, Error: errTxn}
}

func (r Requirement) when(c Condition) Requirement { r.When = c; return r }
func (r Requirement) note(n string) Requirement    { r.Note = n; return r }
func (r Requirement) tryNext() Requirement         { r.OnDenied, r.Error = TryNext, 0; return r }
func (r Requirement) omit() Requirement            { r.OnDenied, r.Error = Omit, 0; return r }

func api(k kmsg.Key, reqs ...Requirement) API {
	return API{Key: int16(k), Name: k.Name(), Requirements: reqs}
}

func (a API) note(n string) API { a.Note = n; return a }

func noAuth(k kmsg.Key, note string) API {
	return API{Key: int16(k), Name: k.Name(), None: true, Note: note}
}

func clusterOnly(k kmsg.Key, op metadata.ACLOperation) API { return api(k, onCluster(op)) }

// SamsaRaftKey is the private API of the CONTROLLER listener (docs/CLUSTER.md).
const SamsaRaftKey int16 = 10000

// APIs is the table, sorted by key.
var APIs = []API{
	api(kmsg.Produce,
		oneTxnID(opWrite).when(IfTransactional).note("the whole request is refused"),
		eachTopic(opWrite).note("per partition")).
		note("Kafka 3.0+ (KIP-679) checks IdempotentWrite at InitProducerId, not here; the documentation's table still lists IdempotentWrite on the cluster for Produce"),
	api(kmsg.Fetch,
		Requirement{Operation: opClusterAction, Resource: rCluster, Scope: ScopeCluster, When: IfReplica, Error: errTopic,
			Note: "every partition gets TOPIC_AUTHORIZATION_FAILED, as Kafka answers an unauthorized follower"},
		eachTopic(opRead).when(IfConsumer).note("per partition")),
	api(kmsg.ListOffsets, eachTopic(opDescribe)),
	api(kmsg.Metadata,
		eachTopic(opDescribe).when(IfNamedTopics),
		eachTopic(opDescribe).when(IfAllTopics).omit(),
		onCluster(opCreate).when(IfAutoCreate).tryNext(),
		eachTopic(opCreate).when(IfAutoCreate).note("a topic not authorised for creation is answered TOPIC_AUTHORIZATION_FAILED")).
		note("cluster_authorized_operations and topic_authorized_operations (KIP-430) come from Authorizer.AuthorizedOperations when asked for"),
	clusterOnly(kmsg.LeaderAndISR, opClusterAction),
	clusterOnly(kmsg.StopReplica, opClusterAction),
	clusterOnly(kmsg.UpdateMetadata, opClusterAction),
	clusterOnly(kmsg.ControlledShutdown, opClusterAction),
	api(kmsg.OffsetCommit, oneGroup(opRead).note("every partition gets GROUP_AUTHORIZATION_FAILED; the group is checked first"), eachTopic(opRead)),
	api(kmsg.OffsetFetch,
		oneGroup(opDescribe),
		eachTopic(opDescribe).when(IfNamedTopics),
		eachTopic(opDescribe).when(IfAllTopics).omit()),
	api(kmsg.FindCoordinator,
		oneGroup(opDescribe).when(IfGroupKey),
		oneTxnID(opDescribe).when(IfTransactionKey),
		oneGroup(opRead).when(IfShareKey).note("share groups (KIP-932)")),
	api(kmsg.JoinGroup, oneGroup(opRead)),
	api(kmsg.Heartbeat, oneGroup(opRead)),
	api(kmsg.LeaveGroup, oneGroup(opRead)),
	api(kmsg.SyncGroup, oneGroup(opRead)),
	api(kmsg.DescribeGroups, eachGroup(opDescribe).note("per group; authorized_operations (KIP-430) on request")),
	api(kmsg.ListGroups,
		onCluster(opDescribe).tryNext().note("DESCRIBE on the cluster lists every group"),
		eachGroup(opDescribe).omit().note("otherwise only the groups the principal may describe; never an error")),
	noAuth(kmsg.SASLHandshake, "part of authentication; served before it"),
	noAuth(kmsg.ApiVersions, "served before authentication"),
	api(kmsg.CreateTopics,
		onCluster(opCreate).tryNext(),
		eachTopic(opCreate),
		Requirement{Operation: opDescribeConfigs, Resource: rTopic, Scope: ScopeTopics, OnDenied: Omit,
			Note: "the created topic's configs are left out of the answer and its topic_config_error_code is TOPIC_AUTHORIZATION_FAILED (KIP-525)"}),
	api(kmsg.DeleteTopics, eachTopic(opDelete).note("a topic the principal may not describe is also TOPIC_AUTHORIZATION_FAILED, never UNKNOWN_TOPIC_OR_PARTITION")),
	api(kmsg.DeleteRecords, eachTopic(opDelete)),
	api(kmsg.InitProducerID,
		oneTxnID(opWrite).when(IfTransactional),
		onCluster(opIdempotentWrite).when(IfNotTransactional).tryNext(),
		Requirement{Operation: opWrite, Resource: rTopic, Scope: ScopeAnyTopic, When: IfNotTransactional, Error: errCluster,
			Note: "WRITE on any topic (KIP-679); refused with CLUSTER_AUTHORIZATION_FAILED"}),
	api(kmsg.OffsetForLeaderEpoch,
		onCluster(opClusterAction).tryNext().note("followers"),
		eachTopic(opDescribe)),
	api(kmsg.AddPartitionsToTxn,
		oneTxnID(opWrite).when(IfClientBatch),
		eachTopic(opWrite).when(IfClientBatch).note("the other partitions of a refused request get OPERATION_NOT_ATTEMPTED"),
		onCluster(opClusterAction).when(IfBrokerBatch).note("KIP-890 verification from brokers")),
	api(kmsg.AddOffsetsToTxn, oneTxnID(opWrite), oneGroup(opRead)),
	api(kmsg.EndTxn, oneTxnID(opWrite)),
	api(kmsg.WriteTxnMarkers, onCluster(opAlter).tryNext(), onCluster(opClusterAction)),
	api(kmsg.TxnOffsetCommit, oneTxnID(opWrite), oneGroup(opRead), eachTopic(opRead)),
	api(kmsg.DescribeACLs, onCluster(opDescribe)).note("SECURITY_DISABLED when no authorizer is configured"),
	api(kmsg.CreateACLs, onCluster(opAlter)).note("SECURITY_DISABLED when no authorizer is configured"),
	api(kmsg.DeleteACLs, onCluster(opAlter)).note("SECURITY_DISABLED when no authorizer is configured"),
	api(kmsg.DescribeConfigs,
		onCluster(opDescribeConfigs).when(IfBrokerResource).note("per resource"),
		Requirement{Operation: opDescribeConfigs, Resource: rTopic, Scope: ScopeTopics, When: IfTopicResource, Error: errTopic},
		Requirement{Operation: opDescribeConfigs, Resource: rGroup, Scope: ScopeGroups, When: IfGroupResource, Error: errGroup}),
	api(kmsg.AlterConfigs,
		onCluster(opAlterConfigs).when(IfBrokerResource).note("per resource"),
		Requirement{Operation: opAlterConfigs, Resource: rTopic, Scope: ScopeTopics, When: IfTopicResource, Error: errTopic},
		Requirement{Operation: opAlterConfigs, Resource: rGroup, Scope: ScopeGroups, When: IfGroupResource, Error: errGroup}),
	api(kmsg.AlterReplicaLogDirs, onCluster(opAlter).note("every partition gets CLUSTER_AUTHORIZATION_FAILED")),
	api(kmsg.DescribeLogDirs, onCluster(opDescribe).note("v3+: top-level CLUSTER_AUTHORIZATION_FAILED and no results; older versions: an empty answer")),
	noAuth(kmsg.SASLAuthenticate, "part of authentication; served before it"),
	api(kmsg.CreatePartitions, eachTopic(opAlter)),
	api(kmsg.CreateDelegationToken,
		Requirement{Operation: opCreateTokens, Resource: rUser, Scope: ScopeUsers, When: IfOtherOwner, Error: errToken}).
		note("not served by Samsa; tokens cannot be created over a connection authenticated with a token"),
	api(kmsg.RenewDelegationToken).note("not served by Samsa; only the token's owner or renewers may renew"),
	api(kmsg.ExpireDelegationToken).note("not served by Samsa; only the token's owner or renewers may expire"),
	api(kmsg.DescribeDelegationToken,
		Requirement{Operation: opDescribe, Resource: rToken, Scope: ScopeDelegationTokens, OnDenied: Omit},
		Requirement{Operation: opDescribeTokens, Resource: rUser, Scope: ScopeUsers, OnDenied: Omit}).
		note("not served by Samsa; a token is listed if the principal owns or renews it, or either check passes"),
	api(kmsg.DeleteGroups, eachGroup(opDelete)),
	api(kmsg.ElectLeaders, onCluster(opAlter)).
		note("ALTER as KafkaApis checks it (KIP-460); the documentation's table says ClusterAction"),
	api(kmsg.IncrementalAlterConfigs,
		onCluster(opAlterConfigs).when(IfBrokerResource).note("per resource"),
		Requirement{Operation: opAlterConfigs, Resource: rTopic, Scope: ScopeTopics, When: IfTopicResource, Error: errTopic},
		Requirement{Operation: opAlterConfigs, Resource: rGroup, Scope: ScopeGroups, When: IfGroupResource, Error: errGroup}),
	clusterOnly(kmsg.AlterPartitionAssignments, opAlter),
	clusterOnly(kmsg.ListPartitionReassignments, opDescribe),
	api(kmsg.OffsetDelete, oneGroup(opDelete), eachTopic(opRead)),
	clusterOnly(kmsg.DescribeClientQuotas, opDescribeConfigs),
	clusterOnly(kmsg.AlterClientQuotas, opAlterConfigs),
	clusterOnly(kmsg.DescribeUserSCRAMCredentials, opDescribe),
	clusterOnly(kmsg.AlterUserSCRAMCredentials, opAlter),
	clusterOnly(kmsg.Vote, opClusterAction),
	clusterOnly(kmsg.BeginQuorumEpoch, opClusterAction),
	clusterOnly(kmsg.EndQuorumEpoch, opClusterAction),
	clusterOnly(kmsg.DescribeQuorum, opDescribe),
	clusterOnly(kmsg.AlterPartition, opClusterAction),
	clusterOnly(kmsg.UpdateFeatures, opAlter),
	clusterOnly(kmsg.Envelope, opClusterAction),
	clusterOnly(kmsg.FetchSnapshot, opClusterAction),
	clusterOnly(kmsg.DescribeCluster, opDescribe),
	api(kmsg.DescribeProducers, eachTopic(opRead)),
	clusterOnly(kmsg.BrokerRegistration, opClusterAction),
	clusterOnly(kmsg.BrokerHeartbeat, opClusterAction),
	clusterOnly(kmsg.UnregisterBroker, opAlter),
	api(kmsg.DescribeTransactions,
		Requirement{Operation: opDescribe, Resource: rTxn, Scope: ScopeTransactionalIDs, Error: errTxn},
		eachTopic(opDescribe).omit().note("partitions of topics the principal may not describe are left out")),
	api(kmsg.ListTransactions, Requirement{Operation: opDescribe, Resource: rTxn, Scope: ScopeTransactionalIDs, OnDenied: Omit}),
	clusterOnly(kmsg.AllocateProducerIDs, opClusterAction),
	api(kmsg.ConsumerGroupHeartbeat, oneGroup(opRead),
		eachTopic(opDescribe).when(IfSubscribedTopicNames).note("any undescribable subscribed topic fails the heartbeat with TOPIC_AUTHORIZATION_FAILED")),
	api(kmsg.ConsumerGroupDescribe, eachGroup(opDescribe)).
		note("DESCRIBE as KafkaApis checks it; the documentation's table says Read"),
	clusterOnly(kmsg.ControllerRegistration, opClusterAction),
	noAuth(kmsg.GetTelemetrySubscriptions, "no authorisation check (KIP-714)"),
	noAuth(kmsg.PushTelemetry, "no authorisation check (KIP-714)"),
	clusterOnly(kmsg.AssignReplicasToDirs, opClusterAction),
	clusterOnly(kmsg.ListConfigResources, opDescribeConfigs),
	api(kmsg.DescribeTopicPartitions, eachTopic(opDescribe).when(IfNamedTopics), eachTopic(opDescribe).when(IfAllTopics).omit()),
	api(kmsg.ShareGroupHeartbeat, oneGroup(opRead), eachTopic(opDescribe).when(IfSubscribedTopicNames)),
	api(kmsg.ShareGroupDescribe, eachGroup(opDescribe)),
	api(kmsg.ShareFetch, oneGroup(opRead), eachTopic(opRead)),
	api(kmsg.ShareAcknowledge, oneGroup(opRead), eachTopic(opRead)),
	clusterOnly(kmsg.AddRaftVoter, opAlter),
	clusterOnly(kmsg.RemoveRaftVoter, opAlter),
	clusterOnly(kmsg.UpdateRaftVoter, opClusterAction),
	clusterOnly(kmsg.InitializeShareGroupState, opClusterAction),
	clusterOnly(kmsg.ReadShareGroupState, opClusterAction),
	clusterOnly(kmsg.WriteShareGroupState, opClusterAction),
	clusterOnly(kmsg.DeleteShareGroupState, opClusterAction),
	clusterOnly(kmsg.ReadShareGroupStateSummary, opClusterAction),
	api(kmsg.StreamsGroupHeartbeat, oneGroup(opRead),
		eachTopic(opDescribe).when(IfTopology).note("every topic of the topology (source, repartition, changelog); any refused one fails the heartbeat with TOPIC_AUTHORIZATION_FAILED"),
		onCluster(opCreate).when(IfMissingInternal).tryNext(),
		eachTopic(opCreate).when(IfMissingInternal).omit().note("an internal topic the principal may not create is not created; the MISSING_INTERNAL_TOPICS status names it")),
	api(kmsg.StreamsGroupDescribe, eachGroup(opDescribe),
		eachTopic(opDescribe).note("every topic of the group's topology; a refused one answers the group TOPIC_AUTHORIZATION_FAILED")),
	api(kmsg.DescribeShareGroupOffsets, eachGroup(opDescribe), eachTopic(opDescribe)),
	api(kmsg.AlterShareGroupOffsets, oneGroup(opRead), eachTopic(opRead)),
	api(kmsg.DeleteShareGroupOffsets, oneGroup(opDelete), eachTopic(opRead)),
	{Key: SamsaRaftKey, Name: "SamsaRaft", Requirements: []Requirement{onCluster(opClusterAction)},
		Note: "Samsa's private raft transport on the CONTROLLER listener: voters only"},
}

// Lookup returns the row of API key.
func Lookup(key int16) (*API, bool) {
	i, ok := slices.BinarySearchFunc(APIs, key, func(a API, k int16) int { return int(a.Key) - int(k) })
	if !ok {
		return nil, false
	}
	return &APIs[i], true
}
