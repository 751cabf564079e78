package main

import (
	"strconv"
	"strings"
)

// The broker's binary, as `make build` links it (SAMSA_LDFLAGS in the Makefile),
// carries schedtrace=2147483647 in the Go runtime's compiled-in GODEBUG defaults.
// A positive schedtrace keeps the runtime's monitor thread (sysmon) out of its deep
// sleep: without it, sysmon sleeps whenever every goroutine waits and the next system
// call wakes it to poll every 20 µs again, a cycle that at fixed request rates cost
// about a fifth of the broker's CPU (BENCHMARKS.md, "sysmon kept awake"). With it,
// sysmon backs off to 10 ms sleeps while there is nothing to retake. The runtime then
// writes a SCHED line to stderr each time the host's uptime crosses a multiple of
// 2^31 ms (24.8 days), and a fatal runtime error prints the scheduler's state too.
// GODEBUG=schedtrace=0 in the environment restores the runtime's default (the
// environment overrides compiled-in defaults).

// linkedGODEBUG is what SAMSA_LDFLAGS linked into the runtime's GODEBUG defaults,
// set by the same link (-X main.linkedGODEBUG=...): the build settings cannot tell,
// since a -trimpath build (make image, make test) leaves -ldflags out of them.
var linkedGODEBUG string

// sysmonMode says how this process's sysmon runs, from the GODEBUG defaults the link
// gave the runtime and the GODEBUG of the environment, for the start-up log.
func sysmonMode(linked, godebug string) string {
	if v, ok := godebugValue(godebug, "schedtrace"); ok {
		if n, err := strconv.Atoi(v); err == nil && n > 0 {
			return "awake (GODEBUG schedtrace=" + v + ")"
		}
		return "runtime default (GODEBUG schedtrace=" + v + ")"
	}
	if v, ok := godebugValue(linked, "schedtrace"); ok {
		if n, err := strconv.Atoi(v); err == nil && n > 0 {
			return "awake (built with schedtrace=" + v + ")"
		}
	}
	return "runtime default (not built by make build: see SAMSA_LDFLAGS in the Makefile)"
}

// godebugValue is the last value of key in a GODEBUG list (later settings win, as
// the runtime reads them).
func godebugValue(godebug, key string) (string, bool) {
	var val string
	var found bool
	for _, f := range strings.Split(godebug, ",") {
		if k, v, ok := strings.Cut(strings.TrimSpace(f), "="); ok && k == key {
			val, found = v, true
		}
	}
	return val, found
}
