package auth

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha512"
	"crypto/subtle"
	"encoding/base64"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/samsa-broker/samsa/coordinator/metadata"
)

// maxScramMessage bounds each SCRAM client message (a user name, a nonce, a proof and a
// few attributes).
const maxScramMessage = 8192

// serverNonceBytes is the randomness of the server's part of the nonce.
const serverNonceBytes = 24

// NewScram returns the SCRAM server mechanism of m (RFC 5802, RFC 7677 for SHA-256)
// reading credentials from store.
//
// The exchange, server side:
//
//	client-first  gs2-header client-first-bare     n,[a=authzid],n=user,r=cnonce[,ext]
//	server-first  r=cnonce+snonce,s=salt,i=iterations
//	client-final  c=base64(gs2-header),r=cnonce+snonce[,ext],p=proof
//	server-final  v=base64(ServerSignature)
//
// Checks, in order: sizes and syntax (channel-binding flag "n" or "y", never "p"; no
// "m=" extension; only Kafka's extension names; tokenauth=true is refused: delegation
// tokens are not served); an authorization id other than the user name is refused; the
// client-final nonce must be exactly the server-first nonce (CVE-2024-56128); c= must
// be the base64 of the client's gs2 header; the proof decodes to the hash's size and
// H(ClientSignature XOR proof) equals StoredKey, compared in constant time. An unknown
// user is answered with a salt derived from a per-process secret and fails at the
// client-final message with the same message as a wrong password.
func NewScram(m metadata.ScramMechanism, store CredentialStore) Mechanism {
	s := &scramMech{mech: m, store: store}
	_, _ = rand.Read(s.secret[:])
	s.nonce = func() string {
		b := make([]byte, serverNonceBytes)
		_, _ = rand.Read(b)
		return base64.RawStdEncoding.EncodeToString(b)
	}
	return s
}

type scramMech struct {
	mech   metadata.ScramMechanism
	store  CredentialStore
	secret [32]byte
	nonce  func() string // the server's nonce part (replaced in tests)
}

func (s *scramMech) Name() string    { return s.mech.String() }
func (s *scramMech) Start() Exchange { return &scramExchange{m: s} }

type scramStep uint8

const (
	scramWantFirst scramStep = iota
	scramWantFinal
	scramOver
)

type scramExchange struct {
	m           *scramMech
	step        scramStep
	user        string
	gs2Header   string
	clientBare  string
	serverFirst string
	nonce       string
	cnonce      string
	cred        metadata.ScramCredential
	known       bool
}

func (e *scramExchange) AuthorizationID() string {
	if e.step == scramOver && e.known {
		return e.user
	}
	return ""
}

func (e *scramExchange) Next(msg []byte) ([]byte, bool, error) {
	switch e.step {
	case scramWantFirst:
		e.step = scramOver
		out, err := e.first(msg)
		if err != nil {
			return nil, false, err
		}
		e.step = scramWantFinal
		return out, false, nil
	case scramWantFinal:
		e.step = scramOver
		out, err := e.final(msg)
		if err != nil {
			e.known = false
			return nil, false, err
		}
		return out, true, nil
	}
	return nil, false, failf("%s exchange is over", e.m.mech)
}

// first handles client-first-message and returns server-first-message.
func (e *scramExchange) first(msg []byte) ([]byte, error) {
	if len(msg) > maxScramMessage || !utf8.Valid(msg) {
		return nil, failf("invalid %s client-first message", e.m.mech)
	}
	s := string(msg)
	// gs2-header = gs2-cbind-flag "," [authzid] ","
	flag, rest, ok := strings.Cut(s, ",")
	if !ok || (flag != "n" && flag != "y") {
		return nil, failf("invalid %s client-first message: channel binding flag %q (only n and y)", e.m.mech, flag)
	}
	authz, bare, ok := strings.Cut(rest, ",")
	if !ok {
		return nil, failf("invalid %s client-first message", e.m.mech)
	}
	authzid := ""
	if authz != "" {
		v, ok := strings.CutPrefix(authz, "a=")
		if !ok {
			return nil, failf("invalid %s client-first message: authzid", e.m.mech)
		}
		if authzid, ok = unescapeSaslName(v); !ok || authzid == "" {
			return nil, failf("invalid %s client-first message: authzid", e.m.mech)
		}
	}
	e.gs2Header = s[:len(s)-len(bare)]
	e.clientBare = bare
	attrs := strings.Split(bare, ",")
	if len(attrs) < 2 {
		return nil, failf("invalid %s client-first message", e.m.mech)
	}
	if strings.HasPrefix(attrs[0], "m=") {
		return nil, failf("%s mandatory extensions are not supported", e.m.mech)
	}
	name, ok := strings.CutPrefix(attrs[0], "n=")
	if !ok {
		return nil, failf("invalid %s client-first message: no user name", e.m.mech)
	}
	user, ok := unescapeSaslName(name)
	if !ok || user == "" {
		return nil, failf("invalid %s client-first message: user name", e.m.mech)
	}
	cnonce, ok := strings.CutPrefix(attrs[1], "r=")
	if !ok || cnonce == "" || !printableNonce(cnonce) {
		return nil, failf("invalid %s client-first message: nonce", e.m.mech)
	}
	if err := e.checkExtensions(attrs[2:]); err != nil {
		return nil, err
	}
	if authzid != "" && authzid != user {
		return nil, failf("Client requested an authorization id that is different from username")
	}
	e.user = user
	e.cred, e.known = e.m.store.ScramCredential(user, e.m.mech)
	if !e.known || e.cred.Mechanism != e.m.mech || len(e.cred.StoredKey) != e.m.mech.KeyLen() ||
		e.cred.Iterations < metadata.ScramMinIterations || e.cred.Iterations > metadata.ScramMaxIterations {
		e.known = false
		e.cred = fakeCredential(e.m.secret[:], user, e.m.mech)
	}
	e.cnonce = cnonce
	e.nonce = cnonce + e.m.nonce()
	e.serverFirst = "r=" + e.nonce + ",s=" + base64.StdEncoding.EncodeToString(e.cred.Salt) + ",i=" + strconv.Itoa(int(e.cred.Iterations))
	return []byte(e.serverFirst), nil
}

// checkExtensions accepts Kafka's extension syntax (key=value, key alphanumeric) and
// refuses every extension: Kafka's only one, tokenauth, is for delegation tokens.
func (e *scramExchange) checkExtensions(exts []string) error {
	for _, x := range exts {
		k, _, ok := strings.Cut(x, "=")
		if !ok || k == "" {
			return failf("invalid %s extension %q", e.m.mech, x)
		}
		if k == "tokenauth" {
			return failf("delegation token authentication is not supported")
		}
		return failf("unsupported %s extension %q", e.m.mech, k)
	}
	return nil
}

// final handles client-final-message and returns server-final-message.
func (e *scramExchange) final(msg []byte) ([]byte, error) {
	mech := e.m.mech.String()
	if len(msg) > maxScramMessage || !utf8.Valid(msg) {
		return nil, failf("invalid %s client-final message", mech)
	}
	s := string(msg)
	i := strings.LastIndex(s, ",p=")
	if i < 0 {
		return nil, failf("invalid %s client-final message: no proof", mech)
	}
	withoutProof, proofB64 := s[:i], s[i+len(",p="):]
	attrs := strings.Split(withoutProof, ",")
	if len(attrs) < 2 {
		return nil, failf("invalid %s client-final message", mech)
	}
	cb, ok := strings.CutPrefix(attrs[0], "c=")
	if !ok {
		return nil, failf("invalid %s client-final message: no channel binding", mech)
	}
	nonce, ok := strings.CutPrefix(attrs[1], "r=")
	if !ok {
		return nil, failf("invalid %s client-final message: no nonce", mech)
	}
	if err := e.checkExtensions(attrs[2:]); err != nil {
		return nil, err
	}
	// CVE-2024-56128: the whole nonce, the client's part and the server's, must be the
	// one of server-first. One other form is accepted, exactly: librdkafka before 2.6.1
	// (kcat, confluent-kafka on Debian 12) sends its own nonce twice, cnonce + the
	// server-first nonce (librdkafka#4895); Kafka 3.8.1 to 3.9 accept it too. It still
	// carries this exchange's server nonce whole, after the client's own nonce, so it
	// cannot be replayed from another exchange; any other prefix or suffix is refused.
	legacy := subtle.ConstantTimeCompare([]byte(nonce), []byte(e.cnonce+e.nonce)) == 1
	if subtle.ConstantTimeCompare([]byte(nonce), []byte(e.nonce)) != 1 && !legacy {
		return nil, failf("Invalid client nonce in the final client message.")
	}
	cbData, err := base64.StdEncoding.Strict().DecodeString(cb)
	if err != nil || string(cbData) != e.gs2Header {
		return nil, failf("invalid %s channel binding", mech)
	}
	proof, err := base64.StdEncoding.Strict().DecodeString(proofB64)
	if err != nil || len(proof) != e.m.mech.KeyLen() {
		return nil, failf("invalid %s client proof", mech)
	}
	authMsg := e.clientBare + "," + e.serverFirst + "," + withoutProof
	h := e.m.mech.Hash()
	mac := hmac.New(h, e.cred.StoredKey)
	mac.Write([]byte(authMsg))
	clientKey := mac.Sum(nil) // ClientSignature, XORed into ClientKey below
	for i := range clientKey {
		clientKey[i] ^= proof[i]
	}
	d := h()
	d.Write(clientKey)
	if subtle.ConstantTimeCompare(d.Sum(nil), e.cred.StoredKey) != 1 || !e.known {
		return nil, fail(mech, "invalid proof or unknown user "+e.user)
	}
	mac = hmac.New(h, e.cred.ServerKey)
	mac.Write([]byte(authMsg))
	return []byte("v=" + base64.StdEncoding.EncodeToString(mac.Sum(nil))), nil
}

// unescapeSaslName reverses RFC 5802's saslname escaping (=2C is ',', =3D is '='); any
// other '=' and a ',' are invalid.
func unescapeSaslName(s string) (string, bool) {
	if !strings.ContainsAny(s, "=,") {
		return s, true
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case ',':
			return "", false
		case '=':
			switch {
			case strings.HasPrefix(s[i:], "=2C"):
				b.WriteByte(',')
			case strings.HasPrefix(s[i:], "=3D"):
				b.WriteByte('=')
			default:
				return "", false
			}
			i += 2
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String(), true
}

// printableNonce: RFC 5802's printable, ASCII 0x21 to 0x7E except ','.
func printableNonce(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x21 || c > 0x7e || c == ',' {
			return false
		}
	}
	return true
}

// fakeCredential is the credential an unknown user is answered with: a salt derived
// from secret and the user (the same user sees the same salt every time, as a real
// one would), Kafka's minimum iterations, and keys no proof can match in practice.
func fakeCredential(secret []byte, user string, m metadata.ScramMechanism) metadata.ScramCredential {
	derive := func(label string, n int) []byte {
		mac := hmac.New(sha512.New, secret)
		mac.Write([]byte(label))
		mac.Write([]byte{byte(m)})
		mac.Write([]byte(user))
		return bytes.Clone(mac.Sum(nil)[:n])
	}
	n := m.KeyLen()
	return metadata.ScramCredential{Name: user, Mechanism: m, Salt: derive("salt", 24), StoredKey: derive("stored", n),
		ServerKey: derive("server", n), Iterations: metadata.ScramMinIterations}
}
