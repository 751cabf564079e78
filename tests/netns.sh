# Sourced by the shell tests that need this machine's default ports (9092, 9644).
#
#   . tests/netns.sh; private_netns "$@"
#
# private_netns re-runs the calling script in a network namespace of its own (as root,
# with unshare and ip), where 127.0.0.1 is a private loopback: the default ports are
# free whatever else runs on the machine, and nothing the test starts is reachable
# from outside. Without it the test runs on the machine's loopback, and says so.
private_netns() {
	if [ -n "${SAMSA_TEST_NETNS:-}" ]; then
		ip link set lo up
		return 0
	fi
	if [ "$(id -u)" = 0 ] && command -v unshare >/dev/null && command -v ip >/dev/null && unshare -n true 2>/dev/null; then
		SAMSA_TEST_NETNS=1 exec unshare -n "$BASH" "$0" "$@"
	fi
	echo "note: no private network namespace (it needs root, unshare and ip): using this machine's loopback" >&2
}

# port_free PORT: nothing listens on 127.0.0.1:PORT.
port_free() {
	! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}
