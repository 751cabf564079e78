// AlterUserScramCredentials (key 51), version 0.
//
// Forwarded to the active controller, which checks each deletion and upsertion (the
// client sends salt, iterations and salted password, never the password), derives the
// stored and server keys and writes UserScramCredentialRecords and
// RemoveUserScramCredentialRecords as one entry; answered once this broker's image has
// them, so the new credential authenticates here at once. Needs ALTER on the cluster
// (its row, net/authz).

package kafka

func init() {
	register(API{Key: 51, MinVersion: 0, MaxVersion: 0, Handle: handleAlterUserScram})
}

func handleAlterUserScram(b *Broker, r *Request) {
	b.forward(r, forwarded{write: true})
}
