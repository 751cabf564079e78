package main

import (
	"bytes"
	"strings"
	"testing"
)

func configsCmd(args []string, out *bytes.Buffer) int { return configsMain(args, out) }

// TestConfigsCommand sets, describes and deletes the configs of a topic, a broker, the
// brokers' cluster default and a group on a real broker, as kafka-configs.sh does.
func TestConfigsCommand(t *testing.T) {
	s := startTestServer(t, t.TempDir(), "--set", "group.share.heartbeat.interval.ms=200", "--set", "group.share.min.heartbeat.interval.ms=100")
	defer stopTestServer(t, s)
	addr := s.Addr()
	if code, out := run1(t, topicsCmd, addr, "create", "cfg", "--partitions", "1"); code != 0 {
		t.Fatalf("create: %d\n%s", code, out)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--entity-type", "topics", "--entity-name", "cfg", "--alter", "--add-config", "retention.ms=60000,cleanup.policy=[delete,compact]"},
			"Completed updating config for topic cfg."},
		{[]string{"--entity-type", "brokers", "--entity-name", "1", "--alter", "--add-config", "log.retention.ms=7200000"},
			"Completed updating config for broker 1."},
		{[]string{"--entity-type", "brokers", "--entity-default", "--alter", "--add-config", "log.cleaner.backoff.ms=2000"},
			"Completed updating default config for brokers in the cluster."},
		{[]string{"--entity-type", "groups", "--entity-name", "readers", "--alter", "--add-config", "share.auto.offset.reset=earliest,share.heartbeat.interval.ms=150"},
			"Completed updating config for group readers."},
	} {
		if code, out := run1(t, configsCmd, addr, c.args...); code != 0 || !strings.Contains(out, c.want) {
			t.Fatalf("%v: exit %d\n%s", c.args, code, out)
		}
	}
	for _, c := range []struct {
		args       []string
		want, none []string
	}{
		{[]string{"--entity-type", "topics", "--entity-name", "cfg", "--describe"},
			[]string{"Dynamic configs for topic cfg are:", "  cleanup.policy=delete,compact sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:cleanup.policy=delete,compact, DEFAULT_CONFIG:log.cleanup.policy=delete}",
				"  retention.ms=60000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=60000, DYNAMIC_BROKER_CONFIG:log.retention.ms=7200000"},
			[]string{"segment.bytes"}},
		{[]string{"--entity-type", "topics", "--entity-name", "cfg", "--describe", "--all"},
			[]string{"All configs for topic cfg are:", "  segment.bytes=1073741824 sensitive=false synonyms={DEFAULT_CONFIG:log.segment.bytes=1073741824}"}, nil},
		{[]string{"--entity-type", "brokers", "--describe"},
			[]string{"Dynamic configs for broker 1 are:", "  log.retention.ms=7200000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:log.retention.ms=7200000",
				"Default configs for brokers in the cluster are:", "  log.cleaner.backoff.ms=2000 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.cleaner.backoff.ms=2000"}, nil},
		{[]string{"--entity-type", "groups", "--entity-name", "readers", "--describe"},
			[]string{"Dynamic configs for group readers are:", "  share.auto.offset.reset=earliest sensitive=false synonyms={GROUP_CONFIG:share.auto.offset.reset=earliest",
				"  share.heartbeat.interval.ms=150 sensitive=false synonyms={GROUP_CONFIG:share.heartbeat.interval.ms=150, STATIC_BROKER_CONFIG:group.share.heartbeat.interval.ms=200, DEFAULT_CONFIG:group.share.heartbeat.interval.ms=5000}"},
			[]string{"share.session.timeout.ms"}},
		{[]string{"--entity-type", "groups", "--entity-name", "readers", "--describe", "--all"},
			[]string{"All configs for group readers are:", "  share.session.timeout.ms=45000 sensitive=false synonyms={DEFAULT_CONFIG:group.share.session.timeout.ms=45000}",
				"  share.isolation.level=read_uncommitted sensitive=false"}, nil},
	} {
		code, out := run1(t, configsCmd, addr, c.args...)
		if code != 0 {
			t.Fatalf("%v: exit %d\n%s", c.args, code, out)
		}
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Fatalf("%v: no %q in\n%s", c.args, w, out)
			}
		}
		for _, w := range c.none {
			if strings.Contains(out, w) {
				t.Fatalf("%v: %q in\n%s", c.args, w, out)
			}
		}
	}
	// Delete a key; refusals of the broker (exit 1) and of the flags (exit 2).
	if code, out := run1(t, configsCmd, addr, "--entity-type", "groups", "--entity-name", "readers", "--alter", "--delete-config", "share.heartbeat.interval.ms"); code != 0 {
		t.Fatalf("delete-config: exit %d\n%s", code, out)
	}
	if code, out := run1(t, configsCmd, addr, "--entity-type", "groups", "--entity-name", "readers", "--describe"); code != 0 || strings.Contains(out, "share.heartbeat.interval.ms") ||
		!strings.Contains(out, "share.auto.offset.reset=earliest") {
		t.Fatalf("after delete-config: exit %d\n%s", code, out)
	}
	for _, c := range []struct {
		args []string
		code int
	}{
		{[]string{"--entity-type", "groups", "--entity-name", "readers", "--alter", "--add-config", "share.delivery.count.limit=11"}, 1},
		{[]string{"--entity-type", "groups", "--entity-name", "readers", "--alter", "--add-config", "no.such.key=1"}, 1},
		{[]string{"--entity-type", "topics", "--entity-name", "ghost", "--alter", "--add-config", "retention.ms=1"}, 1},
		{[]string{"--entity-type", "groups", "--alter", "--add-config", "share.auto.offset.reset=latest"}, 2},
		{[]string{"--entity-type", "topics", "--entity-default", "--describe"}, 2},
		{[]string{"--entity-type", "users", "--describe"}, 2},
		{[]string{"--entity-type", "topics", "--entity-name", "cfg"}, 2},
		{[]string{"--entity-type", "topics", "--entity-name", "cfg", "--alter"}, 2},
	} {
		if code, out := run1(t, configsCmd, addr, c.args...); code != c.code {
			t.Fatalf("%v: exit %d, want %d\n%s", c.args, code, c.code, out)
		}
	}
}

func TestSplitConfigs(t *testing.T) {
	got := splitConfigs("a=1,b=[x,y],c=z")
	if strings.Join(got, "|") != "a=1|b=[x,y]|c=z" {
		t.Fatalf("%q", got)
	}
}
