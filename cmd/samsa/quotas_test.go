package main

import (
	"bytes"
	"strings"
	"testing"
)

func quotasCmd(args []string, out *bytes.Buffer) int { return quotasMain(args, out) }

// TestQuotasCommands sets, lists and removes client quotas on a real broker, as
// kafka-configs.sh --entity-type users|clients|ips does.
func TestQuotasCommands(t *testing.T) {
	s := startTestServer(t, t.TempDir())
	defer stopTestServer(t, s)
	addr := s.Addr()
	for _, c := range [][]string{
		{"alter", "--user", "alice", "--add-config", "producer_byte_rate=1048576,consumer_byte_rate=2097152"},
		{"alter", "--user", "alice", "--client-id", "app", "--add-config", "request_percentage=50"},
		{"alter", "--client-id-default", "--add-config", "producer_byte_rate=500000"},
		{"alter", "--ip", "10.0.0.1", "--add-config", "connection_creation_rate=10"},
	} {
		if code, out := run1(t, quotasCmd, addr, c...); code != 0 || !strings.Contains(out, "Completed updating quotas") {
			t.Fatalf("%v: exit %d\n%s", c, code, out)
		}
	}
	code, out := run1(t, quotasCmd, addr, "describe")
	for _, want := range []string{
		"user 'alice'  ", "consumer_byte_rate=2097152,producer_byte_rate=1048576",
		"user 'alice', client-id 'app'", "request_percentage=50",
		"default client-id", "producer_byte_rate=500000",
		"ip '10.0.0.1'", "connection_creation_rate=10",
	} {
		if code != 0 || !strings.Contains(out, want) {
			t.Fatalf("describe: exit %d, no %q in\n%s", code, want, out)
		}
	}
	// One entity's quotas; then one key removed.
	if code, out := run1(t, quotasCmd, addr, "describe", "--ip", "10.0.0.1"); code != 0 || strings.Contains(out, "alice") || !strings.Contains(out, "connection_creation_rate=10") {
		t.Fatalf("describe --ip: exit %d\n%s", code, out)
	}
	if code, out := run1(t, quotasCmd, addr, "alter", "--user", "alice", "--delete-config", "consumer_byte_rate"); code != 0 {
		t.Fatalf("delete-config: exit %d\n%s", code, out)
	}
	if code, out := run1(t, quotasCmd, addr, "describe", "--user", "alice"); code != 0 || strings.Contains(out, "consumer_byte_rate") || !strings.Contains(out, "producer_byte_rate=1048576") {
		t.Fatalf("after delete-config: exit %d\n%s", code, out)
	}
	// Refusals: a key the ip entity does not take, no entity, both forms of one type.
	if code, _ := run1(t, quotasCmd, addr, "alter", "--ip", "10.0.0.2", "--add-config", "producer_byte_rate=1"); code != 1 {
		t.Fatalf("producer_byte_rate on an ip: exit %d", code)
	}
	if code, _ := run1(t, quotasCmd, addr, "alter", "--add-config", "producer_byte_rate=1"); code != 2 {
		t.Fatalf("alter without an entity: exit %d", code)
	}
	if code, _ := run1(t, quotasCmd, addr, "describe", "--user", "a", "--user-default"); code != 2 {
		t.Fatalf("--user with --user-default: exit %d", code)
	}
}
