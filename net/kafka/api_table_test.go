package kafka

// TestKafkaAPITable compares the live handler tables (brokerAPIs, controllerAPIs) with
// Apache Kafka 4.4's, key by key and version by version, and renders docs/PROTOCOL.md.
//
// Where Kafka's table comes from (established 2026-12-07 with the search index of public
// repositories; the snapshot of apache/kafka it could fetch stops at trunk 1eb7644349cb,
// 2024-10-25, 4.0.0-SNAPSHOT, so no single 4.4 source tree was at hand):
//
//   - Broker listener: Kafka 4.4's release documentation, which Kafka's build generates
//     from clients/src/main/resources/common/message/*Request.json (Protocol.toHtml and
//     ApiKeys.toHtml): apache/kafka-site 44/generated/protocol_api_keys.html (commit
//     6d5deab16b237b1c2c68bbdd478fdc47a5f4b072: the APIs whose "listeners" hold
//     "broker" and which have a stable version) and 44/generated/protocol_messages.html
//     (commit 70950cc6657b6842ba743a0cc37f2f75c114d170: each API's request versions,
//     from the lowest "validVersions" on, a "latestVersionUnstable" version marked
//     "This version of the request is unstable": in 4.4 only InitProducerId v6, left
//     out). That the folder is 4.4's: Kafka 4.4.0's RC0 vote opened 2026-08-21, and
//     apache/kafka trunk 66c197c9f974 (4.4 era: LATEST_PRODUCTION = IBP_4_4_IV2) states
//     ProduceRequest.json's "validVersions": "3-13" as the folder does. The folder
//     agrees with a third-party transcription of Kafka 4.3.1's JSON on every key 4.3.1
//     has, except the versions 4.4 added (ApiVersions v5, TxnOffsetCommit v6,
//     DeleteGroups v3, StreamsGroupHeartbeat/Describe v1, keys 93 and 94).
//   - Controller listener: the APIs whose JSON "listeners" hold "controller". The
//     listeners are those of the trunk snapshot above less "zkBroker" (removed with
//     ZooKeeper in 4.0), with UnregisterController (94, ae0443b5e34a) added; an API
//     served on both listeners has the versions of the broker table. The versions of
//     the controller-only APIs come from their JSON in apache/kafka: AlterPartition 2-3
//     and UpdateRaftVoter 0 at 07a283acad20 (4.x), BrokerHeartbeat 0-2 at 3a4757452e47
//     (4.x, CordonedLogDirs), BeginQuorumEpoch and EndQuorumEpoch 0-1 at 1c0fb28e5261,
//     FetchSnapshot 0-1 at 107c50365ae0; Vote, Envelope, BrokerRegistration,
//     AllocateProducerIds, ControllerRegistration and AssignReplicasToDirs from the
//     trunk snapshot, Vote raised to 0-2 by KIP-996 (Kafka 4.0): these rows were not
//     read from a 4.4 file and are the least certain of the table (the 4.3.1
//     transcription above and franz-go's message definitions of 2026-11 agree with all
//     the controller-only rows).
//
// Produce: Kafka 4.0 removed v0-2 (KIP-896) but ApiVersions still advertises 0-13
// (ApiKeys.PRODUCE_API_VERSIONS_RESPONSE_MIN_VERSION, KAFKA-18659: librdkafka); the
// table holds the JSON's 3-13 and notes the advertised range.
//
// Each key of either side has a classification below (status, Samsa's versions, reason,
// written from the handler's header comment); the test fails when the live table
// disagrees with it, when a key has none, or when docs/PROTOCOL.md is out of date
// (go test ./net/kafka -run TestKafkaAPITable -update rewrites it).

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/net/controllerapi"
	"github.com/samsa-broker/samsa/net/peer"
)

var updateProtocolDoc = flag.Bool("update", false, "rewrite docs/PROTOCOL.md from the API tables")

const protocolDoc = "../../docs/PROTOCOL.md"

// kafkaListeners says which of a Kafka node's listeners serve an API (its JSON's
// "listeners").
type kafkaListeners uint8

const (
	onBroker kafkaListeners = 1 << iota
	onController
	onBoth = onBroker | onController
)

// kafkaAPI is one API of Kafka 4.4's ApiVersions: its stable versions.
type kafkaAPI struct {
	key      int16
	name     string
	min, max int16
	on       kafkaListeners
	// advertisedMin, when not -1, is the minimum ApiVersions advertises instead of min.
	advertisedMin int16
}

// kafka44 is Apache Kafka 4.4's table (see the file's comment for the sources).
var kafka44 = []kafkaAPI{
	{0, "Produce", 3, 13, onBroker, 0},
	{1, "Fetch", 4, 18, onBoth, -1},
	{2, "ListOffsets", 1, 11, onBroker, -1},
	{3, "Metadata", 0, 13, onBroker, -1},
	{8, "OffsetCommit", 2, 10, onBroker, -1},
	{9, "OffsetFetch", 1, 10, onBroker, -1},
	{10, "FindCoordinator", 0, 6, onBroker, -1},
	{11, "JoinGroup", 0, 9, onBroker, -1},
	{12, "Heartbeat", 0, 4, onBroker, -1},
	{13, "LeaveGroup", 0, 5, onBroker, -1},
	{14, "SyncGroup", 0, 5, onBroker, -1},
	{15, "DescribeGroups", 0, 6, onBroker, -1},
	{16, "ListGroups", 0, 5, onBroker, -1},
	{17, "SaslHandshake", 0, 1, onBoth, -1},
	{18, "ApiVersions", 0, 5, onBoth, -1},
	{19, "CreateTopics", 2, 7, onBoth, -1},
	{20, "DeleteTopics", 1, 6, onBoth, -1},
	{21, "DeleteRecords", 0, 2, onBroker, -1},
	{22, "InitProducerId", 0, 5, onBroker, -1}, // v6 is latestVersionUnstable
	{23, "OffsetForLeaderEpoch", 2, 4, onBroker, -1},
	{24, "AddPartitionsToTxn", 0, 5, onBroker, -1},
	{25, "AddOffsetsToTxn", 0, 4, onBroker, -1},
	{26, "EndTxn", 0, 5, onBroker, -1},
	{27, "WriteTxnMarkers", 1, 2, onBroker, -1},
	{28, "TxnOffsetCommit", 0, 6, onBroker, -1},
	{29, "DescribeAcls", 1, 3, onBoth, -1},
	{30, "CreateAcls", 1, 3, onBoth, -1},
	{31, "DeleteAcls", 1, 3, onBoth, -1},
	{32, "DescribeConfigs", 1, 4, onBoth, -1},
	{33, "AlterConfigs", 0, 2, onBoth, -1},
	{34, "AlterReplicaLogDirs", 1, 2, onBroker, -1},
	{35, "DescribeLogDirs", 1, 5, onBroker, -1},
	{36, "SaslAuthenticate", 0, 2, onBoth, -1},
	{37, "CreatePartitions", 0, 3, onBoth, -1},
	{38, "CreateDelegationToken", 1, 3, onBoth, -1},
	{39, "RenewDelegationToken", 1, 2, onBoth, -1},
	{40, "ExpireDelegationToken", 1, 2, onBoth, -1},
	{41, "DescribeDelegationToken", 1, 3, onBoth, -1},
	{42, "DeleteGroups", 0, 3, onBroker, -1},
	{43, "ElectLeaders", 0, 2, onBoth, -1},
	{44, "IncrementalAlterConfigs", 0, 1, onBoth, -1},
	{45, "AlterPartitionReassignments", 0, 1, onBoth, -1},
	{46, "ListPartitionReassignments", 0, 0, onBoth, -1},
	{47, "OffsetDelete", 0, 0, onBroker, -1},
	{48, "DescribeClientQuotas", 0, 1, onBroker, -1},
	{49, "AlterClientQuotas", 0, 1, onBoth, -1},
	{50, "DescribeUserScramCredentials", 0, 0, onBoth, -1},
	{51, "AlterUserScramCredentials", 0, 0, onBoth, -1},
	{52, "Vote", 0, 2, onController, -1},
	{53, "BeginQuorumEpoch", 0, 1, onController, -1},
	{54, "EndQuorumEpoch", 0, 1, onController, -1},
	{55, "DescribeQuorum", 0, 2, onBoth, -1},
	{56, "AlterPartition", 2, 3, onController, -1},
	{57, "UpdateFeatures", 0, 2, onBoth, -1},
	{58, "Envelope", 0, 0, onController, -1},
	{59, "FetchSnapshot", 0, 1, onController, -1},
	{60, "DescribeCluster", 0, 2, onBoth, -1},
	{61, "DescribeProducers", 0, 0, onBroker, -1},
	{62, "BrokerRegistration", 0, 4, onController, -1},
	{63, "BrokerHeartbeat", 0, 2, onController, -1},
	{64, "UnregisterBroker", 0, 0, onBoth, -1},
	{65, "DescribeTransactions", 0, 0, onBroker, -1},
	{66, "ListTransactions", 0, 2, onBroker, -1},
	{67, "AllocateProducerIds", 0, 0, onController, -1},
	{68, "ConsumerGroupHeartbeat", 0, 1, onBroker, -1},
	{69, "ConsumerGroupDescribe", 0, 1, onBroker, -1},
	{70, "ControllerRegistration", 0, 0, onController, -1},
	{71, "GetTelemetrySubscriptions", 0, 0, onBroker, -1},
	{72, "PushTelemetry", 0, 0, onBroker, -1},
	{73, "AssignReplicasToDirs", 0, 0, onController, -1},
	{74, "ListConfigResources", 0, 1, onBroker, -1},
	{75, "DescribeTopicPartitions", 0, 0, onBroker, -1},
	{76, "ShareGroupHeartbeat", 1, 1, onBroker, -1},
	{77, "ShareGroupDescribe", 1, 1, onBroker, -1},
	{78, "ShareFetch", 1, 2, onBroker, -1},
	{79, "ShareAcknowledge", 1, 2, onBroker, -1},
	{80, "AddRaftVoter", 0, 1, onBoth, -1},
	{81, "RemoveRaftVoter", 0, 0, onBoth, -1},
	{82, "UpdateRaftVoter", 0, 0, onController, -1},
	{83, "InitializeShareGroupState", 0, 0, onBroker, -1},
	{84, "ReadShareGroupState", 0, 0, onBroker, -1},
	{85, "WriteShareGroupState", 0, 1, onBroker, -1},
	{86, "DeleteShareGroupState", 0, 0, onBroker, -1},
	{87, "ReadShareGroupStateSummary", 0, 1, onBroker, -1},
	{88, "StreamsGroupHeartbeat", 0, 1, onBroker, -1},
	{89, "StreamsGroupDescribe", 0, 1, onBroker, -1},
	{90, "DescribeShareGroupOffsets", 0, 1, onBroker, -1},
	{91, "AlterShareGroupOffsets", 0, 0, onBroker, -1},
	{92, "DeleteShareGroupOffsets", 0, 0, onBroker, -1},
	{93, "StreamsGroupTopologyDescriptionUpdate", 0, 0, onBroker, -1},
	{94, "UnregisterController", 0, 0, onBoth, -1},
}

// The statuses of a key. A row may hold several, joined by " + ".
const (
	stServed    = "served"                     // Samsa serves Kafka's versions
	stOlder     = "older versions served too"  // Samsa's min is below Kafka's
	stNewer     = "newer version missing"      // Samsa's max is below Kafka's
	stNotServed = "not served"                 // no handler
	stRefused   = "refused on purpose"         // no handler, or fewer old versions, by design
	stAhead     = "ahead of Kafka 4.4"         // Samsa's max is above Kafka's
	stExtra     = "not on this Kafka listener" // Samsa serves a key Kafka 4.4 does not here
)

// apiClass is the classification of one key: Samsa's versions ("" when not served),
// the status they make, and why.
type apiClass struct {
	samsa, status, reason string
}

const whyNotBuilt = "not built yet"

// Reasons shared by several keys.
const (
	whyKIP896 = "Kafka 4.0 removed them (KIP-896); Samsa still answers them: harmless, can stay"
	whyRaft   = "Samsa's quorum is etcd raft: voters exchange SamsaRaft (10000) messages, not KRaft's Vote, BeginQuorumEpoch and EndQuorumEpoch (10000_samsa_raft.go)"
)

// brokerClass classifies each key of the broker listeners.
var brokerClass = map[int16]apiClass{
	0:  {"0-13", stOlder, "Kafka 4 advertises 0-13 too (KAFKA-18659) but rejects v0-2; Samsa advertises v0 because librdkafka probes for it and answers records that are not magic 2 UNSUPPORTED_VERSION (00_produce.go): stays"},
	1:  {"4-18", stServed, ""},
	2:  {"0-11", stOlder, "v0: " + whyKIP896 + " (v0 answers OldStyleOffsets with one offset, 02_list_offsets.go)"},
	3:  {"0-13", stServed, ""},
	8:  {"0-10", stOlder, "v0-1: " + whyKIP896},
	9:  {"0-10", stOlder, "v0: " + whyKIP896},
	10: {"0-6", stServed, ""},
	11: {"0-9", stServed, ""},
	12: {"0-4", stServed, ""},
	13: {"0-5", stServed, ""},
	14: {"0-5", stServed, ""},
	15: {"0-6", stServed, ""},
	16: {"0-5", stServed, ""},
	17: {"0-1", stServed, ""},
	18: {"0-5", stServed, ""},
	19: {"0-7", stOlder, "v0-1: " + whyKIP896},
	20: {"0-6", stOlder, "v0: " + whyKIP896},
	21: {"0-2", stServed, ""},
	22: {"0-5", stServed, "Kafka's v6 (two-phase commit) is unstable in 4.4 and not advertised"},
	23: {"0-4", stOlder, "v0-1: " + whyKIP896 + " (CurrentLeaderEpoch is checked from v2, 23_offset_for_leader_epoch.go)"},
	24: {"0-5", stServed, ""},
	25: {"0-4", stServed, ""},
	26: {"0-5", stServed, ""},
	27: {"0-2", stOlder, "v0: " + whyKIP896 + " (Samsa's coordinators send v1, docs/CLUSTER.md)"},
	28: {"0-6", stServed, ""},
	29: {"0-3", stOlder, "v0: " + whyKIP896 + " (v0 filters are LITERAL, 29_describe_acls.go)"},
	30: {"0-3", stOlder, "v0: " + whyKIP896},
	31: {"0-3", stOlder, "v0: " + whyKIP896 + " (v0 filters are LITERAL, 31_delete_acls.go)"},
	32: {"0-4", stOlder, "v0: " + whyKIP896},
	33: {"0-2", stServed, ""},
	34: {"", stNotServed, whyNotBuilt},
	35: {"0-5", stOlder, "v0: " + whyKIP896 + ". v5's IsCordoned is always false: no cordoned directories (35_describe_log_dirs.go)"},
	36: {"0-2", stServed, ""},
	37: {"0-3", stServed, ""},
	38: {"", stNotServed, whyNotBuilt},
	39: {"", stNotServed, whyNotBuilt},
	40: {"", stNotServed, whyNotBuilt},
	41: {"", stNotServed, whyNotBuilt},
	42: {"0-3", stServed, ""},
	43: {"0-2", stServed, ""},
	44: {"0-1", stServed, ""},
	45: {"0-1", stServed, ""},
	46: {"0", stServed, ""},
	47: {"0", stServed, ""},
	48: {"0-1", stServed, ""},
	49: {"0-1", stServed, ""},
	50: {"0", stServed, ""},
	51: {"0", stServed, ""},
	55: {"0-2", stServed, ""},
	57: {"0-2", stServed, ""},
	60: {"0-2", stServed, ""},
	61: {"0", stServed, ""},
	64: {"", stNotServed, whyNotBuilt},
	65: {"0", stServed, ""},
	66: {"0-2", stServed, ""},
	68: {"0-1", stServed, ""},
	69: {"0-1", stServed, ""},
	71: {"", stNotServed, whyNotBuilt},
	72: {"", stNotServed, whyNotBuilt},
	74: {"", stNotServed, whyNotBuilt},
	75: {"0", stServed, ""},
	76: {"1", stServed, ""},
	77: {"1", stServed, ""},
	78: {"1-2", stServed, ""},
	79: {"1-2", stServed, ""},
	80: {"0-1", stServed, ""},
	81: {"0", stServed, ""},
	83: {"0", stServed, ""},
	84: {"0", stServed, ""},
	85: {"0-1", stServed, ""},
	86: {"0", stServed, ""},
	87: {"0-1", stServed, ""},
	88: {"0-1", stServed, ""},
	89: {"0-1", stServed, ""},
	90: {"0-1", stServed, ""},
	91: {"0", stServed, ""},
	92: {"0", stServed, ""},
	93: {"", stNotServed, whyNotBuilt + ": streams groups keep no topology description; StreamsGroupHeartbeat v1 never asks for one and StreamsGroupDescribe answers NOT_STORED (88_streams_group_heartbeat.go)"},
	94: {"", stNotServed, whyNotBuilt},
}

// controllerClass classifies each key of the controller listener.
var controllerClass = map[int16]apiClass{
	1:                 {"12-18", stRefused, "only brokers reading the committed metadata log fetch here, at v12-18 (01_fetch_metadata.go); voters replicate over SamsaRaft (10000)"},
	17:                {"0-1", stServed, ""},
	18:                {"0-5", stServed, ""},
	19:                {"0-7", stOlder, "v0-1: " + whyKIP896},
	20:                {"0-6", stOlder, "v0: " + whyKIP896},
	29:                {"0-3", stOlder, "v0: " + whyKIP896},
	30:                {"0-3", stOlder, "v0: " + whyKIP896},
	31:                {"0-3", stOlder, "v0: " + whyKIP896},
	32:                {"", stNotServed, whyNotBuilt + " (brokers answer it)"},
	33:                {"0-2", stServed, ""},
	36:                {"0-2", stServed, ""},
	37:                {"0-3", stServed, ""},
	38:                {"", stNotServed, whyNotBuilt},
	39:                {"", stNotServed, whyNotBuilt},
	40:                {"", stNotServed, whyNotBuilt},
	41:                {"", stNotServed, whyNotBuilt},
	43:                {"0-2", stServed, ""},
	44:                {"0-1", stServed, ""},
	45:                {"0-1", stServed, ""},
	46:                {"0", stServed, ""},
	48:                {"0-1", stExtra, "Kafka 4.4 serves it on brokers only; Samsa's controller listener hands it to the Controller with the other admin APIs (net/controllerapi)"},
	49:                {"0-1", stServed, ""},
	50:                {"0", stServed, ""},
	51:                {"0", stServed, ""},
	52:                {"", stRefused, whyRaft},
	53:                {"", stRefused, whyRaft},
	54:                {"", stRefused, whyRaft},
	55:                {"0-2", stServed, ""},
	56:                {"0-3", stOlder, "v0-1: " + whyKIP896},
	57:                {"0-2", stServed, ""},
	58:                {"", stNotServed, "brokers forward admin requests to the active controller as themselves, not wrapped in an Envelope (forward.go; docs/CLUSTER.md, \"The paths between nodes\")"},
	59:                {"0-1", stServed, ""},
	60:                {"1-2", stRefused, "v0 has no EndpointType (brokers only); the controller listener answers EndpointType 2, the controllers, from v1 (60_describe_cluster.go)"},
	62:                {"0-4", stServed, ""},
	63:                {"0-2", stServed, ""},
	64:                {"", stNotServed, whyNotBuilt},
	67:                {"0", stServed, ""},
	70:                {"", stNotServed, whyNotBuilt + " (voters are known from controller.quorum.voters, 60_describe_cluster.go)"},
	73:                {"", stNotServed, whyNotBuilt},
	80:                {"0-1", stServed, ""},
	81:                {"0", stServed, ""},
	82:                {"0", stServed, ""},
	94:                {"", stNotServed, whyNotBuilt},
	peer.SamsaRaftKey: {"0", stExtra, "Samsa's private raft transport between voters (10000_samsa_raft.go)"},
}

// apiRow is one rendered row of a listener's comparison.
type apiRow struct {
	key                 int16
	name                string
	kafka, samsa        string
	status, reason      string
	served, sameAsKafka bool
}

func versionRange(min, max int16) string {
	if min == max {
		return fmt.Sprint(min)
	}
	return fmt.Sprintf("%d-%d", min, max)
}

// deriveStatus is the status the live entry a makes against Kafka's k (either may be
// nil, not both). A missing handler may be "not served" or "refused on purpose": only
// the classification can say which.
func deriveStatus(k *kafkaAPI, a *API) []string {
	switch {
	case a == nil:
		return []string{stNotServed, stRefused}
	case k == nil:
		return []string{stExtra}
	}
	var st []string
	if a.MinVersion < k.min {
		st = append(st, stOlder)
	}
	if a.MinVersion > k.min {
		st = append(st, stRefused)
	}
	if a.MaxVersion < k.max {
		st = append(st, stNewer)
	}
	if a.MaxVersion > k.max {
		st = append(st, stAhead)
	}
	if len(st) == 0 {
		return []string{stServed}
	}
	return []string{strings.Join(st, " + ")}
}

// compareListener checks table t against Kafka's APIs on listener on and the
// classification class, and returns the rows of the comparison in key order.
func compareListener(t *testing.T, table *apiTable, on kafkaListeners, class map[int16]apiClass) []apiRow {
	t.Helper()
	kafka := map[int16]*kafkaAPI{}
	var keys []int16
	for i := range kafka44 {
		if k := &kafka44[i]; k.on&on != 0 {
			kafka[k.key] = k
			keys = append(keys, k.key)
		}
	}
	for _, a := range table.served() {
		if kafka[a.Key] == nil {
			keys = append(keys, a.Key)
		}
	}
	slices.Sort(keys)
	var rows []apiRow
	for _, key := range keys {
		k, a := kafka[key], table.lookup(key)
		row := apiRow{key: key, kafka: "not served", samsa: "not served", served: a != nil}
		switch {
		case k != nil:
			row.name = k.name
			row.kafka = versionRange(k.min, k.max)
			if k.advertisedMin >= 0 {
				row.kafka += fmt.Sprintf(" (advertised %s)", versionRange(k.advertisedMin, k.max))
			}
		case key == peer.SamsaRaftKey:
			row.name = "SamsaRaft"
		default:
			row.name = kmsg.NameForKey(key)
		}
		live := ""
		if a != nil {
			live = versionRange(a.MinVersion, a.MaxVersion)
			row.samsa = live
		}
		c, ok := class[key]
		if !ok {
			t.Errorf("%s table: key %d (%s) has no classification: add it (Kafka %s, Samsa %s)", table.name, key, row.name, row.kafka, row.samsa)
			continue
		}
		derived := deriveStatus(k, a)
		switch {
		case c.samsa != live:
			t.Errorf("%s table: key %d (%s): Samsa serves %q, the classification says %q: update it", table.name, key, row.name, live, c.samsa)
		case !slices.Contains(derived, c.status):
			t.Errorf("%s table: key %d (%s): status %q, the live table makes it %q", table.name, key, row.name, c.status, strings.Join(derived, " or "))
		case c.status != stServed && c.reason == "":
			t.Errorf("%s table: key %d (%s): status %q needs a reason", table.name, key, row.name, c.status)
		}
		row.status, row.reason = c.status, c.reason
		row.sameAsKafka = c.status == stServed
		rows = append(rows, row)
	}
	for key := range class {
		if kafka[key] == nil && table.lookup(key) == nil {
			t.Errorf("%s table: key %d is classified but neither Kafka 4.4 nor Samsa has it here: remove it", table.name, key)
		}
	}
	return rows
}

// TestKafkaAPITable: the live handler tables match their classification against Kafka
// 4.4's, and docs/PROTOCOL.md is what they say (-update rewrites it).
func TestKafkaAPITable(t *testing.T) {
	seen := map[int16]bool{}
	for i, k := range kafka44 {
		if seen[k.key] || (i > 0 && kafka44[i-1].key > k.key) || k.min > k.max || k.on == 0 || k.name == "" {
			t.Fatalf("kafka44: bad or unordered row %+v", k)
		}
		seen[k.key] = true
	}
	broker := compareListener(t, brokerAPIs, onBroker, brokerClass)
	controller := compareListener(t, controllerTable(), onController, controllerClass)
	if t.Failed() {
		return
	}
	want := renderProtocolDoc(broker, controller)
	if *updateProtocolDoc {
		if err := os.WriteFile(protocolDoc, want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(protocolDoc)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("docs/PROTOCOL.md is out of date (%v): go test ./net/kafka -run TestKafkaAPITable -update", err)
	}
}

func protocolCell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// switchedOff notes the keys a broker stops advertising by configuration.
func switchedOff(key int16) string {
	switch {
	case key == consumerGroupHeartbeatKey || key == consumerGroupDescribeKey:
		return "advertised only while group.coordinator.rebalance.protocols holds consumer (the default)"
	case slices.Contains(shareAPIKeys, key):
		return "advertised only while share groups are on (group.share.enable, the default)"
	}
	return ""
}

func renderListener(w *bytes.Buffer, rows []apiRow, noteOff bool) {
	p := func(f string, a ...any) { fmt.Fprintf(w, f, a...) }
	p("| key | API | Kafka 4.4 | Samsa | status | reason |\n|---|---|---|---|---|---|\n")
	var same, differ, notServed, refused, extra int
	for _, r := range rows {
		reason := r.reason
		if off := switchedOff(r.key); noteOff && off != "" {
			reason = strings.TrimPrefix(reason+"; "+off, "; ")
		}
		p("| %d | %s | %s | %s | %s | %s |\n", r.key, r.name, r.kafka, r.samsa, r.status, protocolCell(reason))
		switch {
		case r.status == stExtra:
			extra++
		case !r.served:
			notServed++
			if r.status == stRefused {
				refused++
			}
		case r.sameAsKafka:
			same++
		default:
			differ++
		}
	}
	p("\n%d APIs of Kafka 4.4: %d served with Kafka's versions, %d served with other versions, %d not served (%d of them refused on purpose)",
		same+differ+notServed, same, differ, notServed, refused)
	if extra > 0 {
		p("; and %d served by Samsa that Kafka 4.4 does not serve here", extra)
	}
	p(".\n\n")
}

// renderProtocolDoc writes docs/PROTOCOL.md.
func renderProtocolDoc(broker, controller []apiRow) []byte {
	var w bytes.Buffer
	p := func(f string, a ...any) { fmt.Fprintf(&w, f, a...) }
	p("# Kafka protocol: Samsa's API versions beside Apache Kafka 4.4's\n\n")
	p("<!-- Rendered from net/kafka/api_table_test.go by TestKafkaAPITable; do not edit. Rewrite it with\n")
	p("     go test ./net/kafka -run TestKafkaAPITable -update -->\n\n")
	p("What a client learns from ApiVersions: for every API key, the versions Apache Kafka 4.4 advertises\n")
	p("beside those Samsa serves. Kafka's side is the stable `validVersions` of its message definitions\n")
	p("(`clients/src/main/resources/common/message/*Request.json`), on the listeners their `listeners`\n")
	p("name; a version marked `latestVersionUnstable` is left out, as a Kafka node advertises it only with\n")
	p("`unstable.api.versions.enable` (in 4.4: InitProducerId v6). Kafka 4.0 removed the versions older\n")
	p("than Kafka 2.1's (KIP-896), so several of its minimums are above 0. The broker rows are those of\n")
	p("Kafka 4.4's generated protocol documentation (apache/kafka-site `44/generated/protocol_api_keys.html`\n")
	p("and `protocol_messages.html`), the controller rows those of the JSON files; the test's comment\n")
	p("says which commits and how each was established. Samsa's side is the live handler table\n")
	p("(`brokerAPIs`, `controllerAPIs` in net/kafka: one `register` per `NN_name.go`), as ApiVersions\n")
	p("advertises it.\n\n")
	p("Statuses: *served* (Kafka's versions), *older versions served too* (versions Kafka 4 removed),\n")
	p("*newer version missing*, *not served*, *refused on purpose*, *not on this Kafka listener* (Samsa\n")
	p("serves a key Kafka 4.4 does not serve there). A reason *not built yet* means no document says why.\n\n")
	p("TestKafkaAPITable fails when a handler's versions change without its row's classification, when a\n")
	p("key has no classification, and when this file is out of date.\n\n")
	p("## Broker listeners\n\n")
	renderListener(&w, broker, true)
	p("## Controller listener\n\n")
	p("The APIs a Kafka 4.4 controller serves on its listener (`\"listeners\"` holding `controller`), beside\n")
	p("Samsa's controller listener, where brokers register, heartbeat, forward admin requests and read the\n")
	p("metadata log, and voters speak raft (docs/CLUSTER.md, \"The paths between nodes\").\n\n")
	renderListener(&w, controller, false)
	return append(bytes.TrimRight(w.Bytes(), "\n"), '\n')
}

// controllerTable is the controller listener's table (net/controllerapi) in the shape
// of the broker's, for the comparisons here.
func controllerTable() *apiTable {
	t := &apiTable{name: "controller"}
	for _, s := range controllerapi.APIs() {
		t.add(API{Key: s.Key, MinVersion: s.MinVersion, MaxVersion: s.MaxVersion, Raw: s.Raw, Decode: s.Decode})
	}
	return t
}
