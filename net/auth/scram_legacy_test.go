package auth

import (
	"crypto/hmac"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/samsa-broker/samsa/coordinator/metadata"
)

// clientFinal computes a client-final message for nonce the way a client does.
func clientFinal(t *testing.T, m metadata.ScramMechanism, password, clientBare, serverFirst, nonce string) string {
	t.Helper()
	var salt []byte
	var iters int
	for _, a := range strings.Split(serverFirst, ",") {
		switch {
		case strings.HasPrefix(a, "s="):
			salt, _ = base64.StdEncoding.DecodeString(a[2:])
		case strings.HasPrefix(a, "i="):
			for _, c := range a[2:] {
				iters = iters*10 + int(c-'0')
			}
		}
	}
	sp, err := m.SaltPassword(password, salt, iters)
	if err != nil {
		t.Fatal(err)
	}
	mac := hmac.New(m.Hash(), sp)
	mac.Write([]byte("Client Key"))
	clientKey := mac.Sum(nil)
	h := m.Hash()()
	h.Write(clientKey)
	stored := h.Sum(nil)
	withoutProof := "c=biws,r=" + nonce
	mac = hmac.New(m.Hash(), stored)
	mac.Write([]byte(clientBare + "," + serverFirst + "," + withoutProof))
	sig := mac.Sum(nil)
	for i := range sig {
		sig[i] ^= clientKey[i]
	}
	return withoutProof + ",p=" + base64.StdEncoding.EncodeToString(sig)
}

// TestScramLegacyLibrdkafkaNonce: librdkafka before 2.6.1 sends cnonce + the
// server-first nonce; that exact form is accepted, any other prefix is not.
func TestScramLegacyLibrdkafkaNonce(t *testing.T) {
	store := storeOf(credImage(t, 4096, [2]string{"alice", "pw"}))
	const cnonce = "abcdef"
	for _, tc := range []struct {
		name   string
		prefix string // before the server-first nonce
		ok     bool
	}{
		{"exact", "", true},
		{"client nonce twice (librdkafka < 2.6.1)", cnonce, true},
		{"another prefix", "zzzzzz", false},
		{"client nonce three times", cnonce + cnonce, false},
	} {
		ex := NewScram(metadata.ScramSHA256, store).Start()
		sf, _, err := ex.Next([]byte("n,,n=alice,r=" + cnonce))
		if err != nil {
			t.Fatal(err)
		}
		nonce := strings.TrimPrefix(strings.Split(string(sf), ",")[0], "r=")
		final := clientFinal(t, metadata.ScramSHA256, "pw", "n=alice,r="+cnonce, string(sf), tc.prefix+nonce)
		_, done, err := ex.Next([]byte(final))
		if tc.ok && (err != nil || !done) {
			t.Errorf("%s: refused: %v", tc.name, err)
		}
		if !tc.ok && (!errors.Is(err, ErrAuthenticationFailed) || done) {
			t.Errorf("%s: accepted", tc.name)
		}
	}
}
