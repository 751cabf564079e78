package kafka

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/samsa-broker/samsa/net/controllerapi"
)

// The broker's cluster metrics and the controller listener's collectors share one
// registry (a combined node's) and report what the image and the replica manager say.
func TestClusterMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	tb := startTestBroker(t, testBrokerOptions{Registerer: reg})
	h, err := controllerapi.New(controllerapi.Config{Rules: AuthzRule, NodeID: 1, ClusterID: "test-cluster", Registerer: reg}, tb.node.ctrl, tb.node.q, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if _, err := tb.admin(t).CreateTopic(testCtx(t), 4, 1, nil, "measured"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "four more leaders", func() bool {
		return gauge(t, reg, "samsa_replica_leader_partitions") >= 4
	})
	for name, want := range map[string]float64{
		"samsa_replica_under_replicated_partitions": 0,
		"samsa_replica_under_min_isr_partitions":    0,
		"samsa_cluster_offline_partitions":          0,
		"samsa_controller_active":                   1,
		"samsa_metadata_offset_lag":                 0,
	} {
		if got := gauge(t, reg, name); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if got := gauge(t, reg, "samsa_metadata_applied_offset"); got < 3 {
		t.Errorf("applied offset %v", got)
	}
	if got := gauge(t, reg, "samsa_cluster_brokers"); got != 1 { // the unfenced series
		t.Errorf("brokers %v", got)
	}
}

// gauge reads a metric's first (or its unfenced) sample from reg.
func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel()) > 0 && !strings.Contains(m.String(), "unfenced") {
				continue
			}
			if g := m.GetGauge(); g != nil {
				return g.GetValue()
			}
			if c := m.GetCounter(); c != nil {
				return c.GetValue()
			}
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}
