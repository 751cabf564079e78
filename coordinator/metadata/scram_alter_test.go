package metadata

import (
	"errors"
	"testing"
)

// A salted password of another length than the hash's is accepted, as Kafka accepts
// it (it is an HMAC key): another client's test suite sends one and got
// UNACCEPTABLE_CREDENTIAL.
func TestAlterScramCredentialsAnySaltedPasswordLength(t *testing.T) {
	for _, n := range []int{1, 20, 32, 64, 100} {
		results, recs := AlterScramCredentials(&Image{}, nil, []ScramUpsertion{{Name: "u", Mechanism: ScramSHA512, Iterations: 4096,
			Salt: []byte("s"), SaltedPassword: make([]byte, n)}})
		if len(results) != 1 || results[0].Err != nil || len(recs) != 1 {
			t.Fatalf("salted password of %d bytes: %+v", n, results)
		}
		if _, err := (&Image{}).Apply(recs...); err != nil {
			t.Fatalf("salted password of %d bytes: the record does not apply: %v", n, err)
		}
	}
}

func TestAlterScramCredentials(t *testing.T) {
	im := mustApply(t, &Image{}, &UserScramCredentialRecord{scramCred(t, "alice", ScramSHA256, "pw")},
		&UserScramCredentialRecord{scramCred(t, "carol", ScramSHA512, "pw")})
	sp := func(m ScramMechanism) []byte {
		b, err := m.SaltPassword("secret", []byte("salty"), 8192)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	up := func(name string, m ScramMechanism, iter int32) ScramUpsertion {
		return ScramUpsertion{Name: name, Mechanism: m, Iterations: iter, Salt: []byte("salty"), SaltedPassword: sp(m)}
	}
	results, recs := AlterScramCredentials(im,
		[]ScramDeletion{{"alice", ScramSHA256}, {"carol", ScramSHA256}, {"dup", ScramSHA256}, {"", ScramSHA256}, {"zed", 7}},
		[]ScramUpsertion{
			up("bob", ScramSHA512, 8192),
			up("dup", ScramSHA512, 8192),
			up("few", ScramSHA256, 4095),
			up("many", ScramSHA256, 16385),
			{Name: "nosalt", Mechanism: ScramSHA256, Iterations: 4096, SaltedPassword: sp(ScramSHA256)},
		})
	want := map[string]error{"": ErrScramUnacceptable, "alice": nil, "bob": nil, "carol": ErrScramNotFound, "dup": ErrScramDuplicate,
		"few": ErrScramUnacceptable, "many": ErrScramUnacceptable, "nosalt": ErrScramUnacceptable, "zed": ErrScramMechanism}
	if len(results) != len(want) {
		t.Fatalf("%d results: %+v", len(results), results)
	}
	for i, r := range results {
		if i > 0 && results[i-1].User >= r.User {
			t.Fatal("results not sorted by user")
		}
		if w := want[r.User]; (w == nil) != (r.Err == nil) || (w != nil && !errors.Is(r.Err, w)) {
			t.Errorf("%q: %v, want %v", r.User, r.Err, w)
		}
	}
	next, err := im.Apply(recs...)
	if err != nil || len(recs) != 2 {
		t.Fatalf("%d records: %v", len(recs), err)
	}
	if _, ok := next.ScramCredential("alice", ScramSHA256); ok {
		t.Fatal("alice not deleted")
	}
	bob, ok := next.ScramCredential("bob", ScramSHA512)
	if !ok || bob.Iterations != 8192 {
		t.Fatal("bob not created")
	}
	if sk, _ := ScramSHA512.Keys(sp(ScramSHA512)); string(sk) != string(bob.StoredKey) {
		t.Fatal("bob's stored key is not derived from the salted password")
	}

	// DescribeUserScramCredentials.
	all := DescribeScramCredentials(next, nil, true)
	if len(all) != 2 || all[0].User != "bob" || all[1].User != "carol" || all[1].Credentials[0] != (ScramCredentialInfo{ScramSHA512, 4096}) {
		t.Fatalf("describe all = %+v", all)
	}
	some := DescribeScramCredentials(next, []string{"carol", "nobody", "bob", "carol"}, false)
	if len(some) != 3 || !errors.Is(some[0].Err, ErrScramDuplicate) || !errors.Is(some[1].Err, ErrScramNotFound) ||
		some[2].Err != nil || len(some[2].Credentials) != 1 {
		t.Fatalf("describe = %+v", some)
	}
}
