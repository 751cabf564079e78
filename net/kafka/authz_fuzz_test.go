package kafka

import (
	"encoding/binary"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/acl"
	"github.com/samsa-broker/samsa/coordinator/metadata"
	"github.com/samsa-broker/samsa/net/auth"
	"github.com/samsa-broker/samsa/net/transport"
)

// fuzzFrames splits data into frames, each a 2-byte length and its bytes (at most 8).
func fuzzFrames(data []byte) [][]byte {
	var out [][]byte
	for len(data) >= 2 && len(out) < 8 {
		n := int(binary.BigEndian.Uint16(data))
		data = data[2:]
		if n > len(data) {
			n = len(data)
		}
		out = append(out, data[:n])
		data = data[n:]
	}
	return out
}

func joinFrames(frames ...[]byte) []byte {
	var out []byte
	for _, f := range frames {
		out = binary.BigEndian.AppendUint16(out, uint16(len(f)))
		out = append(out, f...)
	}
	return out
}

// FuzzSecureListener feeds arbitrary frame sequences to one SASL_PLAINTEXT connection
// of a SecureListener with an authorizer: the SASL handshake, tokens (raw and in
// SaslAuthenticate) and requests before and after authentication. Nothing may panic.
//
// Run it with: go test -run XXX -fuzz FuzzSecureListener -fuzztime 5m ./net/kafka
func FuzzSecureListener(f *testing.F) {
	fm := kmsg.NewRequestFormatter(kmsg.FormatterClientID("fuzz"))
	frame := func(r kmsg.Request, v int16) []byte {
		r.SetVersion(v)
		return fm.AppendRequest(nil, r, 1)[4:]
	}
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Mechanism = "PLAIN"
	sa := kmsg.NewPtrSASLAuthenticateRequest()
	sa.SASLAuthBytes = []byte("\x00u\x00pw")
	md := kmsg.NewPtrMetadataRequest()
	f.Add(joinFrames(frame(hs, 1), frame(sa, 2), frame(md, 12)))
	f.Add(joinFrames(frame(hs, 0), []byte("\x00u\x00pw"), frame(md, 1)))
	f.Add(joinFrames(frame(hs, 1), []byte("garbage"), frame(md, 1)))
	f.Add(joinFrames(frame(md, 1)))
	for _, s := range seedFrames()[:20] {
		f.Add(joinFrames(frame(hs, 1), frame(sa, 2), s))
	}
	b := newFuzzBroker(f)
	mechs, err := auth.Mechanisms([]string{auth.MechPlain, auth.MechScramSHA512}, auth.ImageCredentials(func() *metadata.Image { _, im := b.Image(); return im }),
		auth.NewStaticPlain(map[string]string{"u": "pw"}))
	if err != nil {
		f.Fatal(err)
	}
	srv, err := auth.NewServer(auth.ServerConfig{Mechanisms: mechs})
	if err != nil {
		f.Fatal(err)
	}
	l, err := NewSecureListener(b, ListenerSecurity{Name: "SASL_PLAINTEXT", Protocol: auth.SASLPlaintext, Auth: srv, Authorizer: acl.New(acl.Config{})})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c := newFakeConn()
		l.ConnOpened(c)
		defer l.ConnClosed(c)
		for i, fr := range fuzzFrames(data) {
			l.Serve(transport.Request{Conn: c, Ticket: transport.NewTicket(c, uint64(i)), Frame: fr})
			c.mu.Lock()
			closed := c.answers[uint64(i)] == transport.CloseConn || c.closed
			c.mu.Unlock()
			if closed {
				break
			}
		}
		if n := b.panics.Load(); n != 0 {
			t.Fatalf("%d handler panics", n)
		}
	})
}
