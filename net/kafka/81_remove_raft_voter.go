// RemoveRaftVoter (key 81), version 0 (KIP-853).
//
// On a broker listener: forwarded to the active controller, as Kafka's brokers do.
// On the controller listener: the quorum's leader removes the member VoterID with
// metadata directory VoterDirectoryID (a voter, in a joint configuration raft
// leaves by itself, or a learner left by an add that timed out); the answer comes
// once the new voter set has committed. A leader asked to remove itself first moves
// leadership to another voter and answers NOT_CONTROLLER: the new leader removes it
// (samsa metadata-quorum asks again). Errors as Kafka's: VOTER_NOT_FOUND when no
// member has the id and directory id, INVALID_REQUEST for the last voter,
// REQUEST_TIMED_OUT while another change is in progress, UNSUPPORTED_VERSION on a
// static quorum. Needs ALTER on the cluster (coordinator/acl).
//
// Differences from Apache Kafka: Kafka's leader removes itself and resigns once the
// change commits; Samsa's moves leadership first (etcd raft's advice: a leader that
// removed itself leaves the others unable to elect one until they learn the change
// committed).

package kafka

func init() {
	register(API{Key: 81, MinVersion: 0, MaxVersion: 0, Handle: handleRemoveRaftVoter})
}

func handleRemoveRaftVoter(b *Broker, r *Request) {
	b.forward(r, forwarded{write: true})
}
