// RemoveRaftVoter (key 81) on a broker listener: forwarded to the active controller, as
// Kafka's brokers do. The controller listener serves it (net/controllerapi, whose
// file of the same name says how, and where Samsa differs from Kafka).

package kafka

func init() {
	register(API{Key: 81, MinVersion: 0, MaxVersion: 0, Handle: handleRemoveRaftVoter})
}

func handleRemoveRaftVoter(b *Broker, r *Request) {
	b.forward(r, forwarded{write: true})
}
