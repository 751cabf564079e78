// Package lint holds repository-wide checks that run with the ordinary test suite.
package lint

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/samsa-broker/samsa"

// allowed lists, for each package of the repository (its directory under the module
// root), the project packages it may import (DESIGN.md, "Dependency direction"). A key
// ending in "/..." covers every package below that directory that has no key of its
// own; an allowed entry ending in "/..." allows that package and every package below
// it. A package of the repository without a rule is itself a violation, so a new
// package has to say where it stands. Test files are held to the same rules as the
// package they test; the files of an external test package (package x_test) may have
// a rule of their own, keyed by the directory and externalTests.
var allowed = map[string][]string{
	// Storage is the leaf: it imports no other package of the project; its own
	// subpackages (file-system seams) import only each other. internal/invariants
	// (the invariants build tag) is a leaf of constants: it imports nothing.
	"engine":     {"engine/...", "internal/invariants"},
	"engine/...": {"engine/..."},
	"purgatory":  {},

	// Remote storage (KIP-405's RemoteStorageManager over S3): a leaf beside
	// the engine; its tests write real segments through the engine. No
	// broker package: the remote log manager above it drives it.
	"engine/remote": {"engine", "internal/s3test"},

	// Replica state: partitions' leader/follower state, ISR, HW, fetchers
	// (internal/invariants: a leaf of constants, the invariants build tag).
	"replication":     {"engine/...", "purgatory", "replication/...", "internal/invariants"},
	"replication/...": {"engine/...", "purgatory", "replication/..."},
	// Tiered storage's remote log manager is tested with the real remote log
	// metadata manager and a real S3-compatible server.
	"replication/tiered" + externalTests: {"engine/...", "purgatory", "replication/...", "coordinator/remotelog", "internal/s3test"},

	// Metadata records and images: a leaf, read by everything above it.
	"coordinator/metadata": {},
	// Kafka's config keys: definitions, validation, layering.
	"coordinator/configs": {"engine/...", "coordinator/metadata"},
	// Its generator, from Kafka's documentation (go generate): the standard library only.
	"coordinator/configs/internal/kafkadoc": {},
	// The ACL authorizer and the CreateAcls/DescribeAcls/DeleteAcls rules over the image.
	"coordinator/acl": {"coordinator/metadata"},
	// The controller quorum and the broker's side of it.
	"coordinator/controller":     {"engine/...", "purgatory", "replication/...", "coordinator/metadata", "coordinator/configs", "coordinator/acl", "coordinator/controller/..."},
	"coordinator/controller/...": {"engine/...", "purgatory", "replication/...", "coordinator/metadata", "coordinator/configs", "coordinator/controller/..."},
	// The logs of the internal topics the coordinators keep their state in.
	"coordinator/statelog": {"engine/...", "purgatory", "replication/..."},
	"coordinator/host":     {"coordinator/metadata"},
	"coordinator/group":    {"engine/...", "purgatory", "replication/...", "coordinator/statelog", "internal/latch"},
	// Tiered storage's remote log metadata manager (Kafka's
	// TopicBasedRemoteLogMetadataManager) over __remote_log_metadata.
	"coordinator/remotelog": {"engine/...", "purgatory", "replication/...", "coordinator/statelog"},
	// Share-partition state (KIP-932) and its share coordinator, over the group
	// package's replicated-log seam.
	"coordinator/share": {"engine/...", "purgatory", "replication/...", "coordinator/group"},
	// The transaction coordinator, and the leader's side of WriteTxnMarkers.
	"coordinator/txn": {"engine/...", "purgatory", "replication/...", "coordinator/metadata", "coordinator/configs", "coordinator/statelog"},
	// Whole-cluster simulations may drive every coordinator and the replica state.
	"coordinator/sim": {"engine/...", "purgatory", "replication/...", "coordinator/..."},

	// Transports know nothing of Kafka's APIs.
	"net/transport": {},
	// Authorisation of Kafka requests: coordinator/acl's table and authorizer over the
	// image, the controller's error shape for the APIs it serves. The protocol adapter
	// calls it, never the other way round.
	"net/authz": {"coordinator/acl", "coordinator/metadata", "coordinator/controller"},
	// The protocol adapter and the node-to-node client may use everything below net
	// (net/peer: net/auth, no I/O, whose server sessions its security tests dial).
	"net/kafka": {"engine/...", "purgatory", "replication/...", "coordinator/...", "net/transport", "net/peer", "net/auth", "net/authz", "net/quota", "net/fetchsession", "net/sharesession", "net/wire", "net/request", "net/connauth", "net/metadatacache", "net/brokermetrics",
		"internal/...", "net/controllerapi"}, // its tests serve voters on the controller listener
	"net/peer":     {"engine/...", "purgatory", "replication/...", "coordinator/...", "net/transport", "net/auth"},
	"net/...":      {"engine/...", "purgatory", "replication/...", "coordinator/...", "net/...", "internal/..."},
	"internal/...": {},
	// The tests' S3-compatible server is versitygw as internal/versitygw starts it.
	"internal/s3test": {"internal/versitygw"},

	// Client quotas (Kafka's ClientQuotaManager and its siblings): the quotas of the
	// image in, throttle times out; no protocol layer, no transport.
	"net/quota": {"coordinator/metadata", "coordinator/configs"},
	// Fetch sessions (KIP-227, Kafka's FetchSessionCache): the partitions' logs and
	// replicas (their quiet state), the image; no protocol layer, no purgatory.
	"net/fetchsession": {"engine/...", "replication/...", "coordinator/metadata"},
	// Share sessions (KIP-932, Kafka's ShareSessionCache): share partitions' keys and
	// the connections that opened them; no protocol layer, no share partitions' state.
	"net/sharesession": {"coordinator/share", "net/transport"},
	// The hand-written parts of the wire format (request and response headers, the
	// Fetch response framed around file ranges, the error codes of an answer): the
	// engine's slices and the transport's chunks, nothing of the protocol adapter.
	"net/wire": {"engine", "net/transport"},
	// A request between the transport and the protocol adapter (Kafka's
	// RequestChannel.Request and RequestMetrics): parsing against a listener's APIs,
	// answering, the request metrics; no API's meaning, no broker state.
	"net/request": {"net/transport", "net/wire"},
	// The security of a listener's connections (Kafka's ChannelBuilders and
	// SaslServerAuthenticator): net/auth's sessions, the principal, the carrying out
	// of net/authz's decisions on a request; no handler table.
	// What handlers read of the cluster (Kafka's MetadataCache): the published image,
	// endpoints and coordinators from it, this node's leader replicas; no protocol
	// adapter, no request.
	"net/metadatacache": {"coordinator/metadata", "coordinator/group", "coordinator/txn", "engine", "replication"},
	// The controller listener (Kafka's ControllerApis): the controller and the voter it
	// serves, requests parsed and answered by net/request, sessions of net/connauth,
	// the authorizer's decisions; never the broker's protocol adapter.
	"net/controllerapi": {"coordinator/controller/...", "coordinator/metadata", "net/authz", "net/connauth", "net/peer", "net/request", "net/transport"},
	"net/connauth":      {"coordinator/acl", "coordinator/metadata", "net/auth", "net/authz", "net/request", "net/transport", "net/wire"},
	// The broker's topic and cluster metrics, read from the image, the replica manager,
	// the group coordinator and the logs; not the request metrics (net/kafka's).
	"net/brokermetrics": {"engine", "replication", "coordinator/metadata", "coordinator/group"},
	// The broker's assembly (Kafka's BrokerServer and BrokerMetadataPublisher): the
	// replica manager, the coordinators on their internal topics' leadership, the
	// feature levels and the publisher, around the protocol adapter, which it imports
	// and which never imports it.
	"net/broker": {"engine/...", "purgatory", "replication/...", "coordinator/...", "net/kafka", "net/peer", "net/brokermetrics", "internal/..."},
	// net/kafka's tests serve brokers assembled by net/broker, which imports net/kafka:
	// an external test file hands the assembly to the package's tests.
	"net/kafka" + externalTests: {"engine/...", "purgatory", "replication/...", "coordinator/...", "net/transport", "net/peer", "net/auth",
		"net/authz", "net/quota", "net/fetchsession", "net/sharesession", "net/wire", "net/request", "net/connauth", "net/controllerapi", "net/metadatacache", "net/brokermetrics", "internal/...",
		"net/kafka", "net/broker"},

	// Clients: they talk to brokers over the wire only.
	// bench starts a versitygw (internal/versitygw, no broker code) as the object
	// store of a samsa it spawns for a tiered workload.
	"bench":           {"internal/versitygw"},
	"bench/...":       {"bench/..."},
	"tools/chaos":     {},
	"tools/chaos/...": {"tools/chaos/..."},
	// samsa audit: a client of any Kafka-compatible cluster; it shares the harness's
	// anomaly vocabulary (tools/chaos imports no project package).
	"tools/audit": {"tools/chaos"},
	// The pipelines of examples/ (examples/benthos is a module of its own): clients.
	"examples/...": {"examples/..."},
	// tests/sasl_ssl.sh's admin client.
	"tests/sasl_admin": {},
	// dump-log reads segment files the way the engine writes them; it uses the engine's
	// exported inspection code rather than a second parser.
	"tools/dumplog": {"engine/..."},

	// Commands wire concrete types together.
	"cmd/samsa":       {"engine/...", "purgatory", "replication/...", "coordinator/...", "net/...", "internal/...", "tools/audit"},
	"cmd/samsa-bench": {"bench/...", "internal/kafkaprops"}, // --command-config: the client properties parser
	"cmd/samsa-chaos": {"tools/chaos/..."},
}

// externalTests suffixes the key of an external test package's rule.
const externalTests = " (external tests)"

// ruleFor returns the rule of package dir: its own key, else the nearest "/..." key.
func ruleFor(dir string) ([]string, bool) {
	if r, ok := allowed[dir]; ok {
		return r, true
	}
	for d := dir; ; {
		i := strings.LastIndex(d, "/")
		if i < 0 {
			return nil, false
		}
		d = d[:i]
		if r, ok := allowed[d+"/..."]; ok {
			return r, true
		}
	}
}

// permits reports whether a rule lets a package import pkg.
func permits(rule []string, pkg string) bool {
	for _, a := range rule {
		if a == pkg {
			return true
		}
		if base, ok := strings.CutSuffix(a, "/..."); ok && (pkg == base || strings.HasPrefix(pkg, base+"/")) {
			return true
		}
	}
	return false
}

func TestDependencyDirection(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	var violations []string
	seen := map[string]bool{}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "data" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if !strings.Contains(rel, "/") {
			return nil // files at the module root (TestNoStrayRootPackages)
		}
		dir := rel[:strings.LastIndex(rel, "/")]
		rule, known := ruleFor(dir)
		if !known {
			if !seen[dir] {
				violations = append(violations, dir+": package has no entry in the dependency rules")
				seen[dir] = true
			}
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		if r, ok := allowed[dir+externalTests]; ok && strings.HasSuffix(path, "_test.go") && strings.HasSuffix(f.Name.Name, "_test") {
			rule = r
		}
		checked++
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if p != module && !strings.HasPrefix(p, module+"/") {
				continue
			}
			to := strings.TrimPrefix(strings.TrimPrefix(p, module), "/")
			if to == dir || permits(rule, to) {
				continue
			}
			violations = append(violations, rel+" imports "+p+" ("+dir+" may not import "+to+")")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked == 0 {
		t.Fatal("no Go files found; is the test running from internal/lint?")
	}
	sort.Strings(violations)
	for _, v := range violations {
		t.Error(v)
	}
}

// TestRules checks the rule lookup itself on a few cases.
func TestRules(t *testing.T) {
	for _, c := range []struct {
		from, to string
		ok       bool
	}{
		{"engine", "purgatory", false},
		{"engine", "engine/vfs", true},
		{"engine/vfs", "engine", true},
		{"engine/remote", "engine", true},
		{"engine/remote", "replication", false},
		{"engine/remote", "net/kafka", false},
		{"engine/remote", "coordinator/metadata", false},
		{"net/transport", "net/kafka", false},
		{"coordinator/metadata", "engine", false},
		{"coordinator/group", "coordinator/metadata", false},
		{"coordinator/controller", "coordinator/metadata", true},
		{"coordinator/controller", "coordinator/acl", true},
		{"coordinator/acl", "coordinator/metadata", true},
		{"coordinator/acl", "coordinator/configs", false},
		{"replication", "coordinator/metadata", false},
		{"net/kafka", "coordinator/group", true},
		{"net/kafka", "net/broker", false},
		{"net/kafka" + externalTests, "net/broker", true},
		{"net/broker", "net/kafka", true},
		{"net/broker", "net/node", false},
		{"net/node", "net/broker", true},
		{"net/kafka", "net/authz", true},
		{"net/authz", "net/kafka", false},
		{"net/authz", "coordinator/acl", true},
		{"net/authz", "coordinator/group", false},
		{"net/authz", "net/transport", false},
		{"net/kafka", "net/quota", true},
		{"net/quota", "coordinator/metadata", true},
		{"net/quota", "net/kafka", false},
		{"net/quota", "net/transport", false},
		{"net/quota", "replication", false},
		{"net/kafka", "net/fetchsession", true},
		{"net/fetchsession", "replication", true},
		{"net/fetchsession", "coordinator/metadata", true},
		{"net/fetchsession", "purgatory", false},
		{"net/fetchsession", "net/kafka", false},
		{"net/kafka", "net/sharesession", true},
		{"net/sharesession", "coordinator/share", true},
		{"net/sharesession", "net/kafka", false},
		{"net/sharesession", "engine", false},
		{"net/kafka", "net/wire", true},
		{"net/wire", "engine", true},
		{"net/wire", "net/kafka", false},
		{"net/wire", "replication", false},
		{"net/kafka", "net/request", true},
		{"net/request", "net/wire", true},
		{"net/request", "net/kafka", false},
		{"net/request", "net/authz", false},
		{"net/request", "engine", false},
		{"net/kafka", "net/connauth", true},
		{"net/connauth", "net/auth", true},
		{"net/connauth", "net/kafka", false},
		{"net/connauth", "net/authz", true},
		{"net/controllerapi", "coordinator/controller/quorum", true},
		{"net/controllerapi", "net/kafka", false},
		{"net/node", "net/controllerapi", true},
		{"net/kafka", "net/metadatacache", true},
		{"net/metadatacache", "net/kafka", false},
		{"net/metadatacache", "net/request", false},
		{"net/authz", "net/connauth", false},
		{"net/kafka", "net/brokermetrics", true},
		{"net/brokermetrics", "coordinator/group", true},
		{"net/brokermetrics", "net/kafka", false},
		{"net/brokermetrics", "net/transport", false},
		{"bench", "engine", false},
		{"cmd/samsa-chaos", "tools/chaos", true},
		{"tools/audit", "tools/chaos", true},
		{"tools/audit", "tools/chaos/runner", false},
		{"tools/audit", "engine", false},
		{"tools/audit", "net/kafka", false},
		{"cmd/samsa", "tools/audit", true},
		{"cmd/samsa-chaos", "engine", false},
	} {
		rule, known := ruleFor(c.from)
		if !known {
			t.Errorf("%s: no rule", c.from)
			continue
		}
		if got := permits(rule, c.to); got != c.ok {
			t.Errorf("%s may import %s: got %v, want %v", c.from, c.to, got, c.ok)
		}
	}
	if _, known := ruleFor("newarea"); known {
		t.Error("a package outside every rule must not be covered")
	}
}

// TestNoStrayRootPackages keeps the module root free of Go packages: code lives in the
// packages listed above so the dependency rules cover it.
func TestNoStrayRootPackages(t *testing.T) {
	matches, err := filepath.Glob("../../*.go")
	if err != nil {
		t.Fatal(err)
	}
	if len(matches) > 0 {
		t.Errorf("Go files at the module root: %v", matches)
	}
	if _, err := os.Stat("../../go.mod"); err != nil {
		t.Fatalf("module root not where expected: %v", err)
	}
}
