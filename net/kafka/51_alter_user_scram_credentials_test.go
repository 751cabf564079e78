package kafka

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
)

// TestAlterScramSaltedPasswordOfAnyLength: an upsertion whose salted password is not
// the hash's length (a client that salts with another PRF, or another client's test
// suite sending fixed bytes) is stored, as Kafka stores it; it was refused with
// UNACCEPTABLE_CREDENTIAL ("salted password of SCRAM-SHA-512 must have 64 bytes").
func TestAlterScramSaltedPasswordOfAnyLength(t *testing.T) {
	tb := startTestBroker(t)
	adm := tb.admin(t)
	res, err := adm.AlterUserSCRAMs(testCtx(t), nil, []kadm.UpsertSCRAM{
		{User: "short", Mechanism: kadm.ScramSha512, Iterations: 4096, Salt: []byte("salt"), SaltedPassword: []byte("twenty-bytes-of-key!")},
		{User: "long", Mechanism: kadm.ScramSha256, Iterations: 4096, Salt: []byte("salt"), SaltedPassword: make([]byte, 100)},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("%s: %v", r.User, r.Err)
		}
	}
	desc, err := adm.DescribeUserSCRAMs(testCtx(t), "short", "long")
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{"short", "long"} {
		if d, ok := desc[u]; !ok || d.Err != nil || len(d.CredInfos) != 1 || d.CredInfos[0].Iterations != 4096 {
			t.Fatalf("%s described as %+v", u, desc[u])
		}
	}
}
