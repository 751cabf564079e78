// DescribeUserScramCredentials (key 50), version 0.
//
// Answered from this broker's image, as Kafka's brokers answer it: for each user (or
// every user, when the request names none), its SCRAM mechanisms and iterations, never
// salts or keys; RESOURCE_NOT_FOUND for a user without credentials, DUPLICATE_RESOURCE
// for a user named twice. Needs DESCRIBE on the cluster (its row, net/authz).

package kafka

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/controller"
)

func init() {
	register(API{Key: 50, MinVersion: 0, MaxVersion: 0, Handle: handleDescribeUserScram})
}

func handleDescribeUserScram(b *Broker, r *Request) {
	_, im := b.Image()
	r.Respond(controller.DescribeScramResponse(im, r.Body.(*kmsg.DescribeUserSCRAMCredentialsRequest)))
}
