package cluster

import (
	"fmt"
	"strings"
)

// properties is a node's KRaft configuration: every node a combined broker and
// controller voter, as Kafka's own keys say it.
func (c *Cluster) properties(n *Node) string {
	var voters []string
	for _, m := range c.nodes {
		voters = append(voters, fmt.Sprintf("%d@%s", m.ID, m.ControllerAddr()))
	}
	rf := min(3, len(c.nodes))
	isr := min(2, len(c.nodes))
	lines := []string{
		"# written by samsa-chaos",
		"process.roles=broker,controller",
		fmt.Sprintf("node.id=%d", n.ID),
		"controller.quorum.voters=" + strings.Join(voters, ","),
		"log.dirs=" + n.LogDir,
		"metadata.log.dir=" + n.MetaDir,
		fmt.Sprintf("broker.heartbeat.interval.ms=%d", c.cfg.HeartbeatInterval.Milliseconds()),
		fmt.Sprintf("broker.session.timeout.ms=%d", c.cfg.SessionTimeout.Milliseconds()),
		fmt.Sprintf("default.replication.factor=%d", rf),
		fmt.Sprintf("min.insync.replicas=%d", isr),
		fmt.Sprintf("offsets.topic.replication.factor=%d", rf),
		"admin.listen=" + n.AdminAddr(),
	}
	if c.sec != nil {
		lines = append(lines, c.sec.properties(n)...)
	} else {
		lines = append(lines,
			fmt.Sprintf("listeners=PLAINTEXT://%s,CONTROLLER://%s", n.Addr(), n.ControllerAddr()),
			"advertised.listeners=PLAINTEXT://"+n.Addr(),
			"controller.listener.names=CONTROLLER",
			"inter.broker.listener.name=PLAINTEXT",
			"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT")
	}
	if n.Journal != "" {
		lines = append(lines, PowerLossKey+"="+n.Journal)
	}
	if c.store != nil {
		lines = append(lines, c.store.BrokerKeys()...)
	}
	lines = append(lines, c.cfg.Set...)
	return strings.Join(lines, "\n") + "\n"
}
