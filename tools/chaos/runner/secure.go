package runner

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/samsa-broker/samsa/tools/chaos"
	"github.com/samsa-broker/samsa/tools/chaos/cluster"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// clientACLs are what the workload's user needs, and nothing more: its topics (read,
// write, describe), its group (read), the transactional ids of its producers and
// copiers (prefix "chaos-txn-": write, describe) and idempotent writes on the cluster.
func clientACLs(cfg Config, txnTopic string) []*kadm.ACLBuilder {
	user := "User:" + cluster.UserClient
	topics := []string{cfg.Topic}
	if txnTopic != "" {
		topics = append(topics, txnTopic)
	}
	return []*kadm.ACLBuilder{
		kadm.NewACLs().Allow(user).AllowHosts("*").Topics(topics...).ResourcePatternType(kadm.ACLPatternLiteral).
			Operations(kadm.OpRead, kadm.OpWrite, kadm.OpDescribe),
		kadm.NewACLs().Allow(user).AllowHosts("*").Groups("chaos-g").ResourcePatternType(kadm.ACLPatternLiteral).
			Operations(kadm.OpRead, kadm.OpDescribe),
		kadm.NewACLs().Allow(user).AllowHosts("*").TransactionalIDs("chaos-txn-").ResourcePatternType(kadm.ACLPatternPrefixed).
			Operations(kadm.OpWrite, kadm.OpDescribe),
		kadm.NewACLs().Allow(user).AllowHosts("*").Clusters().ResourcePatternType(kadm.ACLPatternLiteral).
			Operations(kadm.OpIdempotentWrite),
	}
}

// grantClient gives the workload's user its ACLs (as the super user) and waits until
// every node authorizes it: each node, asked directly as that user, describes the
// workload's topics.
func (r *run) grantClient(ctx context.Context, c *cluster.Cluster, adm *cluster.Admin, cfg Config, txnTopic string) error {
	k := kadm.NewClient(adm.Client())
	var n int
	for _, b := range clientACLs(cfg, txnTopic) {
		res, err := k.CreateACLs(ctx, b)
		if err != nil {
			return fmt.Errorf("runner: ACLs of %s: %w", cluster.UserClient, err)
		}
		for _, x := range res {
			if x.Err != nil {
				return fmt.Errorf("runner: ACL %s %s %s: %w", x.Type, x.Name, x.Operation, x.Err)
			}
			n++
		}
	}
	topics := []string{cfg.Topic}
	if txnTopic != "" {
		topics = append(topics, txnTopic)
	}
	for _, nd := range c.Nodes() {
		if err := describesAs(ctx, nd, c.ClientOpts(), topics); err != nil {
			return err
		}
	}
	r.note("secured: %d ACLs for User:%s (topics %s: READ, WRITE, DESCRIBE; group chaos-g: READ, DESCRIBE; transactional ids chaos-txn-*: WRITE, DESCRIBE; cluster: IDEMPOTENT_WRITE), authorized by every node",
		n, cluster.UserClient, strings.Join(topics, ","))
	return nil
}

// describesAs waits until node nd answers Metadata of topics for a client with opts
// without an authorization error.
func describesAs(ctx context.Context, nd *cluster.Node, opts []kgo.Opt, topics []string) error {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(nd.Addr()), kgo.RequestRetries(0), kgo.DialTimeout(2 * time.Second)}, opts...)...)
	if err != nil {
		return fmt.Errorf("runner: %w", err)
	}
	defer cl.Close()
	var last error
	for {
		req := kmsg.NewPtrMetadataRequest()
		for _, t := range topics {
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(t)
			req.Topics = append(req.Topics, rt)
		}
		rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		resp, err := cl.SeedBrokers()[0].Request(rctx, req)
		cancel()
		last = err
		if err == nil {
			last = nil
			for _, t := range resp.(*kmsg.MetadataResponse).Topics {
				if t.ErrorCode != 0 {
					name := ""
					if t.Topic != nil {
						name = *t.Topic
					}
					last = fmt.Errorf("topic %s: %w", name, kerr.ErrorForCode(t.ErrorCode))
				}
			}
			if last == nil {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("runner: node %d does not authorize %s yet: %v", nd.ID, cluster.UserClient, last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// authFailed records a node's log line about a failed authentication as an event of
// the node's process, at the time the line carries when it has one.
func authFailed(hist *chaos.Writer) func(cluster.AuthFailure) {
	return func(f cluster.AuthFailure) {
		at := f.At
		if t, err := time.Parse(time.RFC3339Nano, cluster.ParseLogLine(f.Line)["time"]); err == nil {
			at = t
		}
		mono := hist.Since(at)
		line := f.Line
		if len(line) > 400 {
			line = line[:400] + "..."
		}
		hist.Append(chaos.Op{Proc: fmt.Sprintf("node%d", f.Node), F: chaos.FEvent, Status: chaos.Info, Start: mono, End: mono, Wall: at.UnixNano(),
			V: chaos.EventAuthFailed, Err: line})
	}
}
