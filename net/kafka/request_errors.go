package kafka

import (
	"github.com/samsa-broker/samsa/net/wire"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Errors per API and code (samsa_request_errors_total), as Kafka's
// RequestMetrics ErrorsPerSec count them: every ErrorCode field of an answer, at any
// depth (top level, per topic, per partition, per group, per resource), counts once.
// Kafka counts NONE too; here it is left out, so that an idle series set stays
// small and the hot path does no label lookups for a successful answer.
//
// The fields are found by net/wire (ErrorCodes), by reflection once per response
// type; a type without any costs one map lookup per answer. Fetch, whose answer is
// framed by hand, counts its own (01_fetch.go).

// countErrors adds resp's error codes to the API's series.
func (a *apiMetrics) countErrors(resp kmsg.Response) { wire.ErrorCodes(resp, a) }

// CountError adds one answer's code to the API's series (wire.ErrorSink); NONE is not
// counted.
func (a *apiMetrics) CountError(code int16) {
	if code == 0 {
		return
	}
	a.errors.WithLabelValues(a.name, wire.ErrorName(code)).Inc()
}
