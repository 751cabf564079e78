package chaos

import (
	"fmt"
	"strings"
)

// The authentication check, for runs against a secured cluster (TLS, SASL, ACLs):
//
//	auth-failure   outside every fault's window (before the first fault, between a
//	               heal and the next fault, after the last heal), a client's operation
//	               failed on authentication, TLS or authorization, or a client or a node
//	               logged a failed authentication (recorded as "auth-failed" events)
//
// Within a fault's window such failures are counted (AuthStats) but not reported: a
// node killed in the middle of a handshake fails it. Once a fault has healed, every
// node is running and ready and its credentials and ACLs are those of the metadata
// log, so none may fail. That includes a connection whose session expired while its
// node was paused or cut off: Kafka's broker accepts a re-authentication begun after
// the session expired (KafkaChannel.maybeBeginServerReauthentication checks only that
// a second has passed since the last one) and closes the connection only when any
// other request arrives on it, so a client then reconnects and retries; such refusals
// are counted apart (LateReauth) as well, to name the cause.

// KAuthFailure is the authentication check's anomaly kind.
const KAuthFailure = "auth-failure"

// EventAuthFailed is the V of an FEvent op recording a failed authentication that a
// client or a node logged.
const EventAuthFailed = "auth-failed"

// AuthStats counts the failed authentications and authorizations of a run.
type AuthStats struct {
	DuringFaults int `json:"during_faults"`
	Outside      int `json:"outside"`
	// LateReauth counts, among both, the re-authentications refused because the
	// session had expired, as either side says it: the broker's "session expired
	// before re-authentication began", ILLEGAL_SASL_STATE at the client.
	LateReauth int `json:"late_reauth"`
}

// isLateReauth reports whether a failure is a re-authentication refused because the
// session had already expired.
func isLateReauth(text string) bool {
	return strings.Contains(text, "session expired before re-authentication began") || strings.Contains(text, "ILLEGAL_SASL_STATE")
}

// authErrorMarks are what an error names when authentication, TLS or authorization
// failed: Kafka's error names, franz-go's SASL message, Go's TLS and x509 errors.
var authErrorMarks = []string{"SASL_AUTHENTICATION_FAILED", "AUTHORIZATION_FAILED", "ILLEGAL_SASL_STATE", "UNSUPPORTED_SASL_MECHANISM",
	"unable to initialize sasl", "x509: ", "tls: "}

// IsAuthError reports whether an error text says that authentication, TLS or
// authorization failed.
func IsAuthError(text string) bool {
	for _, m := range authErrorMarks {
		if strings.Contains(text, m) {
			return true
		}
	}
	return false
}

func (c *checker) checkAuth() {
	type window struct{ from, to int64 }
	var faults []window
	for i := range c.h.Ops {
		if op := &c.h.Ops[i]; op.F == FFault {
			faults = append(faults, window{op.Start, op.End})
		}
	}
	during := func(t int64) bool {
		for _, w := range faults {
			if t >= w.from && t <= w.to {
				return true
			}
		}
		return false
	}
	for i := range c.h.Ops {
		op := &c.h.Ops[i]
		var what string
		switch op.F {
		case FEvent:
			if op.V == EventAuthFailed {
				what = op.Err
			}
		case FSend, FPoll, FCommit, FTxn, FTxnPoll:
			if IsAuthError(op.Err) {
				what = op.Err
			}
			for p, e := range op.PartErr {
				if what == "" && IsAuthError(e) {
					what = fmt.Sprintf("p%d: %s", p, e)
				}
			}
		}
		if what == "" {
			continue
		}
		if isLateReauth(what) {
			c.res.Auth.LateReauth++
		}
		if during(op.End) {
			c.res.Auth.DuringFaults++
			continue
		}
		c.res.Auth.Outside++
		c.add(Anomaly{Kind: KAuthFailure, P: -1, O: -1, Proc: op.Proc, Time: op.End,
			Detail: fmt.Sprintf("%s %s outside every fault's window: %s", op.Proc, op.F, what), Ops: []int64{op.ID}})
	}
}
