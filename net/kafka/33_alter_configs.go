// AlterConfigs (key 33), versions 0-2: the legacy, non-incremental alter, still used by
// several clients (sarama, kafka-python, older admin tools).
//
// Forwarded to the active controller and answered with its result once this broker's
// image has the change (live logs are then reconfigured). The request's configs become
// the resource's complete set of overrides: keys given are set (validated by name and
// value: INVALID_CONFIG), overrides not given are deleted. Resources and the keys that
// may be altered are those of IncrementalAlterConfigs (44_incremental_alter_configs.go).
// A null value or a key given twice: INVALID_REQUEST / INVALID_CONFIG. ValidateOnly
// validates only.
//
// Differences from Apache Kafka: none known for topic, broker and group resources.

package kafka

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/net/authz"
)

func init() {
	register(API{Key: 33, MinVersion: 0, MaxVersion: 2, Handle: handleAlterConfigs, Authz: authz.AlterConfigs})
}

func handleAlterConfigs(b *Broker, r *Request) {
	req := r.Body.(*kmsg.AlterConfigsRequest)
	b.forward(r, forwarded{write: !req.ValidateOnly})
}
