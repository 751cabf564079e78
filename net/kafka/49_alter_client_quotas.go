// AlterClientQuotas (key 49), versions 0-1 (KIP-546).
//
// Forwarded to the active controller, which validates each entity (user, client-id,
// both, or ip alone; by name or default) and op (producer_byte_rate,
// consumer_byte_rate, request_percentage, controller_mutation_rate for users and
// client ids; connection_creation_rate for ips; positive values, whole for the byte
// and connection rates) and writes ClientQuotaRecords as one entry; an invalid entity
// is INVALID_REQUEST and writes nothing. validate_only writes nothing. Answered once
// this broker's image has the records, so the new quota applies here at once. Needs
// ALTER_CONFIGS on the cluster (its row, net/authz).

package kafka

func init() {
	register(API{Key: 49, MinVersion: 0, MaxVersion: 1, Handle: handleAlterClientQuotas})
}

func handleAlterClientQuotas(b *Broker, r *Request) {
	b.forward(r, forwarded{write: true})
}
