package cluster

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"
)

// Features is what a samsa binary supports, learnt by running it.
type Features struct {
	// ClusterMode: `samsa storage random-uuid` works (KRaft configuration, N > 1).
	ClusterMode bool
	// PowerLoss: the broker accepts PowerLossKey; PowerLossNote says why not otherwise.
	PowerLoss     bool
	PowerLossNote string
	// Switches are the fault switches the broker reported active (FaultSwitchesMsg)
	// when started with the probe's environment.
	Switches []string
}

// HasSwitch reports whether the probe saw switch active ("SKIP_FDATASYNC", with or
// without the SAMSA_FAULT_ prefix).
func (f Features) HasSwitch(name string) bool {
	return slices.Contains(f.Switches, strings.TrimPrefix(strings.ToUpper(name), "SAMSA_FAULT_"))
}

// Probe starts one node of bin in a temporary directory under dir, with env and the
// power-loss key, and reports what it supports. It fails only when the binary cannot
// serve at all.
func Probe(ctx context.Context, bin, dir string, env []string) (Features, error) {
	tmp, err := os.MkdirTemp(dir, "probe-")
	if err != nil {
		return Features{}, fmt.Errorf("cluster: probe: %w", err)
	}
	defer os.RemoveAll(tmp)
	f := Features{ClusterMode: HasClusterMode(ctx, bin)}
	c, err := New(ctx, Config{Bin: bin, Nodes: 1, Dir: tmp, Env: env, PowerLoss: true})
	if err != nil {
		return f, fmt.Errorf("cluster: probe: %w", err)
	}
	defer c.Close()
	startErr := c.Start(ctx)
	n := c.Node(1)
	if startErr == nil {
		n.SawListening(2 * time.Second)
	}
	f.Switches = n.Switches()
	switch {
	case slices.Contains(n.Unknown(), PowerLossKey):
		f.PowerLossNote = "this samsa binary does not know " + PowerLossKey + " (warned as an unknown key)"
	case startErr != nil:
		f.PowerLossNote = "a node with " + PowerLossKey + " did not start: " + startErr.Error()
	default:
		f.PowerLoss = true
	}
	if startErr != nil {
		// Maybe the key is what stopped it: try without, so the run can go on.
		c2, err := New(ctx, Config{Bin: bin, Nodes: 1, Dir: tmp + "/plain", Env: env})
		if err != nil {
			return f, fmt.Errorf("cluster: probe: %w", err)
		}
		defer c2.Close()
		if err := c2.Start(ctx); err != nil {
			return f, fmt.Errorf("cluster: probe: samsa does not start: %w", err)
		}
		c2.Node(1).SawListening(2 * time.Second)
		f.Switches = c2.Node(1).Switches()
	}
	return f, nil
}

// ProbeCluster starts n nodes of bin (loopback) in a temporary directory under dir and
// returns nil when they form a cluster (every node answers Metadata naming all n),
// else why not: ErrNoClusterMode, or the first node's complaint.
func ProbeCluster(ctx context.Context, bin, dir string, n int) error {
	tmp, err := os.MkdirTemp(dir, "probe-cluster-")
	if err != nil {
		return fmt.Errorf("cluster: probe: %w", err)
	}
	defer os.RemoveAll(tmp)
	c, err := New(ctx, Config{Bin: bin, Nodes: n, Dir: tmp, StartTimeout: 30 * time.Second})
	if err != nil {
		return err
	}
	defer c.Close()
	return c.Start(ctx)
}
