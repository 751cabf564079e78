package auth

import (
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/samsa-broker/samsa/coordinator/metadata"
)

// credImage returns an image holding SCRAM credentials for user with password, one per
// mechanism, with the given iterations.
func credImage(t testing.TB, iterations int32, users ...[2]string) *metadata.Image {
	t.Helper()
	var recs []metadata.Record
	for _, u := range users {
		for _, m := range []metadata.ScramMechanism{metadata.ScramSHA256, metadata.ScramSHA512} {
			salt := []byte("0123456789abcdef-" + u[0])
			sp, err := m.SaltPassword(u[1], salt, int(iterations))
			if err != nil {
				t.Fatal(err)
			}
			c, err := metadata.NewScramCredential(u[0], m, salt, sp, iterations)
			if err != nil {
				t.Fatal(err)
			}
			recs = append(recs, &metadata.UserScramCredentialRecord{ScramCredential: c})
		}
	}
	im, err := (&metadata.Image{}).Apply(recs...)
	if err != nil {
		t.Fatal(err)
	}
	return im
}

func storeOf(im *metadata.Image) CredentialStore {
	return ImageCredentials(func() *metadata.Image { return im })
}

// drive runs franz-go's client mechanism against a server exchange in memory, as a
// broker and a client would over SaslAuthenticate. It returns the server's
// authorization id, the server's error and the client's error.
func drive(t *testing.T, client sasl.Mechanism, server Mechanism) (string, error, error) {
	t.Helper()
	if client.Name() != server.Name() {
		t.Fatalf("client %s against server %s", client.Name(), server.Name())
	}
	session, msg, err := client.Authenticate(context.Background(), "broker:9092")
	if err != nil {
		return "", nil, err
	}
	ex := server.Start()
	for round := 0; round < 5; round++ {
		answer, done, err := ex.Next(msg)
		if err != nil {
			return "", err, nil
		}
		cdone, next, cerr := session.Challenge(answer)
		if cerr != nil {
			return "", nil, cerr
		}
		if done {
			if !cdone {
				t.Fatalf("server done, client not")
			}
			return ex.AuthorizationID(), nil, nil
		}
		if cdone {
			t.Fatalf("client done, server not")
		}
		msg = next
	}
	t.Fatal("exchange did not finish")
	return "", nil, nil
}

func TestScramWithFranzGo(t *testing.T) {
	store := storeOf(credImage(t, 4096, [2]string{"alice", "alice-secret"}, [2]string{"b,o=b", "pw"}))
	for _, c := range []struct {
		name    string
		user    string
		pass    string
		zid     string
		wantErr bool
		msgHas  string
	}{
		{name: "ok", user: "alice", pass: "alice-secret"},
		{name: "escaped user name", user: "b,o=b", pass: "pw"},
		{name: "authzid equal to the user", user: "alice", pass: "alice-secret", zid: "alice"},
		{name: "wrong password", user: "alice", pass: "nope", wantErr: true, msgHas: "invalid credentials"},
		{name: "unknown user", user: "mallory", pass: "x", wantErr: true, msgHas: "invalid credentials"},
		{name: "authzid of another user", user: "alice", pass: "alice-secret", zid: "admin", wantErr: true, msgHas: "authorization id"},
	} {
		for _, mech := range []struct {
			client sasl.Mechanism
			m      metadata.ScramMechanism
		}{
			{scram.Auth{User: c.user, Pass: c.pass, Zid: c.zid}.AsSha256Mechanism(), metadata.ScramSHA256},
			{scram.Auth{User: c.user, Pass: c.pass, Zid: c.zid}.AsSha512Mechanism(), metadata.ScramSHA512},
		} {
			t.Run(c.name+"/"+mech.m.String(), func(t *testing.T) {
				id, serr, cerr := drive(t, mech.client, NewScram(mech.m, store))
				if cerr != nil {
					t.Fatalf("client failed: %v", cerr)
				}
				if c.wantErr {
					if !errors.Is(serr, ErrAuthenticationFailed) || !strings.Contains(serr.Error(), c.msgHas) {
						t.Fatalf("server error = %v", serr)
					}
					return
				}
				if serr != nil || id != c.user {
					t.Fatalf("server: id %q, %v", id, serr)
				}
			})
		}
	}
}

// TestScramUnknownUserLooksKnown: an unknown user gets a server-first message of the
// same shape as a known one (same salt every time, Kafka's minimum iterations) and
// fails with the wrong-password message at the same step.
func TestScramUnknownUserLooksKnown(t *testing.T) {
	m := NewScram(metadata.ScramSHA256, storeOf(&metadata.Image{})).(*scramMech)
	first := func() string {
		out, _, err := m.Start().Next([]byte("n,,n=ghost,r=abc"))
		if err != nil {
			t.Fatal(err)
		}
		return string(out)
	}
	a, b := first(), first()
	salt := func(s string) string { return strings.Split(s, ",")[1] }
	if salt(a) != salt(b) || !strings.HasSuffix(a, ",i=4096") || !strings.HasPrefix(a, "r=abc") {
		t.Fatalf("server-first for an unknown user: %q then %q", a, b)
	}
}

// TestScramRFC7677 runs RFC 7677's example exchange (SCRAM-SHA-256, user "user",
// password "pencil") against the server with the example's server nonce.
func TestScramRFC7677(t *testing.T) {
	salt, _ := base64.StdEncoding.DecodeString("W22ZaJ0SNY7soEsUEjb6gQ==")
	sp, _ := metadata.ScramSHA256.SaltPassword("pencil", salt, 4096)
	cred, err := metadata.NewScramCredential("user", metadata.ScramSHA256, salt, sp, 4096)
	if err != nil {
		t.Fatal(err)
	}
	im, _ := (&metadata.Image{}).Apply(&metadata.UserScramCredentialRecord{ScramCredential: cred})
	m := NewScram(metadata.ScramSHA256, storeOf(im)).(*scramMech)
	m.nonce = func() string { return "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0" }

	const (
		clientFirst = "n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
		serverFirst = "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
		clientFinal = "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
		serverFinal = "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
	)
	ex := m.Start()
	got, done, err := ex.Next([]byte(clientFirst))
	if err != nil || done || string(got) != serverFirst {
		t.Fatalf("server-first = %q, %v, %v", got, done, err)
	}
	got, done, err = ex.Next([]byte(clientFinal))
	if err != nil || !done || string(got) != serverFinal || ex.AuthorizationID() != "user" {
		t.Fatalf("server-final = %q, %v, %v", got, done, err)
	}
	if _, _, err := ex.Next([]byte(clientFinal)); !errors.Is(err, ErrAuthenticationFailed) {
		t.Fatalf("a finished exchange accepted another message: %v", err)
	}

	// CVE-2024-56128: a client-final whose nonce is not exactly server-first's fails,
	// even with an otherwise valid proof.
	for name, final := range map[string]string{
		"client part only": "c=biws,r=rOprNGfwEbeRWgbNEkqO,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
		"altered server":   "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k1,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
		"extra suffix":     "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0x,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
		"altered client":   "c=biws,r=XOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
		"bad proof":        "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=eHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
		"short proof":      "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzb",
		"binding":          "c=eSws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
		"no proof":         "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0",
		"extension":        "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,x=1,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
	} {
		ex := m.Start()
		if _, _, err := ex.Next([]byte(clientFirst)); err != nil {
			t.Fatal(err)
		}
		if _, done, err := ex.Next([]byte(final)); !errors.Is(err, ErrAuthenticationFailed) || done || ex.AuthorizationID() != "" {
			t.Errorf("%s: client-final accepted (%v, %v)", name, done, err)
		}
	}

	// A replayed client-final: a new exchange has a new server nonce, so the recorded
	// final of another exchange fails.
	var n atomic.Int32
	m.nonce = func() string { n.Add(1); return "fresh" + string(rune('a'+n.Load())) }
	ex = m.Start()
	if _, _, err := ex.Next([]byte(clientFirst)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ex.Next([]byte(clientFinal)); !errors.Is(err, ErrAuthenticationFailed) {
		t.Fatalf("replayed client-final: %v", err)
	}
}

func TestScramClientFirstRefused(t *testing.T) {
	store := storeOf(credImage(t, 4096, [2]string{"alice", "pw"}))
	for name, msg := range map[string]string{
		"empty":               "",
		"channel binding p":   "p=tls-unique,,n=alice,r=abc",
		"bad flag":            "x,,n=alice,r=abc",
		"no header":           "n=alice,r=abc",
		"mandatory ext":       "n,,m=foo,n=alice,r=abc",
		"no user":             "n,,r=abc",
		"empty user":          "n,,n=,r=abc",
		"bad escape":          "n,,n=al=ice,r=abc",
		"no nonce":            "n,,n=alice",
		"empty nonce":         "n,,n=alice,r=",
		"nonce not printable": "n,,n=alice,r=a\x01b",
		"token auth":          "n,,n=alice,r=abc,tokenauth=true",
		"unknown extension":   "n,,n=alice,r=abc,foo=bar",
		"bad extension":       "n,,n=alice,r=abc,foo",
		"authzid other user":  "n,a=bob,n=alice,r=abc",
		"bad authzid":         "n,b=bob,n=alice,r=abc",
		"empty authzid":       "n,a=,n=alice,r=abc",
		"invalid utf-8":       "n,,n=\xff,r=abc",
		"too long":            "n,,n=alice,r=" + strings.Repeat("a", maxScramMessage),
	} {
		ex := NewScram(metadata.ScramSHA256, store).Start()
		if _, _, err := ex.Next([]byte(msg)); !errors.Is(err, ErrAuthenticationFailed) {
			t.Errorf("%s: %v", name, err)
		}
	}
	// "y": the client could bind but thinks the server cannot; accepted.
	if _, _, err := NewScram(metadata.ScramSHA256, store).Start().Next([]byte("y,,n=alice,r=abc")); err != nil {
		t.Fatalf("flag y: %v", err)
	}
}

func TestPlainWithFranzGo(t *testing.T) {
	im := credImage(t, 4096, [2]string{"alice", "alice-secret"})
	jaas, err := ParseJAAS(`org.apache.kafka.common.security.plain.PlainLoginModule required
		username="admin" password="admin-secret"
		user_admin="admin-secret"
		user_alice="alice-secret";`)
	if err != nil {
		t.Fatal(err)
	}
	static, err := StaticPlainFromJAAS(jaas)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []struct {
		name string
		a    PlainAuthenticator
	}{{"scram-backed", NewScramPlain(storeOf(im), 0)}, {"jaas", static}} {
		for _, c := range []struct {
			name, user, pass, zid string
			ok                    bool
		}{
			{"ok", "alice", "alice-secret", "", true},
			{"authzid equal", "alice", "alice-secret", "alice", true},
			{"authzid of another user", "alice", "alice-secret", "admin", false},
			{"wrong password", "alice", "alice-secret2", "", false},
			{"unknown user", "mallory", "x", "", false},
		} {
			t.Run(a.name+"/"+c.name, func(t *testing.T) {
				id, serr, cerr := drive(t, plain.Auth{User: c.user, Pass: c.pass, Zid: c.zid}.AsMechanism(), NewPlain(a.a))
				if cerr != nil {
					t.Fatal(cerr)
				}
				if c.ok != (serr == nil) || (c.ok && id != c.user) {
					t.Fatalf("id %q, err %v", id, serr)
				}
				if serr != nil && !errors.Is(serr, ErrAuthenticationFailed) {
					t.Fatalf("error %v is not ErrAuthenticationFailed", serr)
				}
			})
		}
	}
	ex := NewPlain(static).Start()
	for name, msg := range map[string]string{
		"two tokens":    "alice\x00alice-secret",
		"four tokens":   "\x00alice\x00alice-secret\x00",
		"empty user":    "\x00\x00pw",
		"empty pass":    "\x00alice\x00",
		"invalid utf-8": "\x00alice\x00\xff",
		"too long":      "\x00alice\x00" + strings.Repeat("p", maxPlainMessage),
	} {
		ex = NewPlain(static).Start()
		if _, _, err := ex.Next([]byte(msg)); !errors.Is(err, ErrAuthenticationFailed) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, _, err := ex.Next([]byte("\x00alice\x00alice-secret")); !errors.Is(err, ErrAuthenticationFailed) {
		t.Fatal("a finished PLAIN exchange accepted another message")
	}
}

func TestMechanisms(t *testing.T) {
	store := storeOf(&metadata.Image{})
	ms, err := Mechanisms([]string{" scram-sha-512", "PLAIN", "SCRAM-SHA-256", "PLAIN"}, store, nil)
	if err != nil || len(ms) != 3 || ms[0].Name() != MechScramSHA512 || ms[1].Name() != MechPlain || ms[2].Name() != MechScramSHA256 {
		t.Fatalf("Mechanisms = %v, %v", ms, err)
	}
	for _, bad := range [][]string{{"GSSAPI"}, {"OAUTHBEARER"}, {}, {" "}} {
		if _, err := Mechanisms(bad, store, nil); !errors.Is(err, ErrUnsupportedMechanism) {
			t.Errorf("Mechanisms(%q) = %v", bad, err)
		}
	}
}

func TestJAAS(t *testing.T) {
	j, err := ParseJAAS(`org.apache.kafka.common.security.scram.ScramLoginModule required username=admin password="a \"quoted\" pass\\word";`)
	if err != nil || j.LoginModule != ScramLoginModule || j.Flag != "required" || j.Options["username"] != "admin" ||
		j.Options["password"] != `a "quoted" pass\word` || len(j.Users()) != 0 {
		t.Fatalf("ParseJAAS = %+v, %v", j, err)
	}
	if _, err := StaticPlainFromJAAS(j); !errors.Is(err, ErrInvalidJAAS) {
		t.Fatal("a SCRAM login module made a PLAIN user table")
	}
	for _, bad := range []string{
		"", "Module", "Module required", "Module maybe;", "Module required key;", `Module required k="unterminated;`,
		"Module required;Other required;", `Module required k="x\`, "Module required k=;",
	} {
		if _, err := ParseJAAS(bad); !errors.Is(err, ErrInvalidJAAS) {
			t.Errorf("ParseJAAS(%q) = %v", bad, err)
		}
	}
}

// FuzzScramServer feeds arbitrary client-first and client-final messages to a server
// exchange: errors, never a panic, and never success without the password.
func FuzzScramServer(f *testing.F) {
	f.Add([]byte("n,,n=user,r=rOprNGfwEbeRWgbNEkqO"), []byte("c=biws,r=rOprNGfwEbeRWgbNEkqOfixed,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="))
	f.Add([]byte("n,a=user,n=user,r=x"), []byte("c=bixxx,r=x,p="))
	f.Add([]byte("y,,n=us=3Der,r=abc,tokenauth=true"), []byte(",p=,p="))
	store := storeOf(credImage(f, 4096, [2]string{"user", "pencil"}))
	f.Fuzz(func(t *testing.T, first, final []byte) {
		m := NewScram(metadata.ScramSHA256, store).(*scramMech)
		m.nonce = func() string { return "fixed" }
		ex := m.Start()
		if _, done, err := ex.Next(first); err != nil || done {
			if err != nil && !errors.Is(err, ErrAuthenticationFailed) {
				t.Fatalf("error %v", err)
			}
			return
		}
		if _, done, err := ex.Next(final); done {
			t.Fatalf("authenticated by a fuzzed proof: %q %q", first, final)
		} else if !errors.Is(err, ErrAuthenticationFailed) {
			t.Fatalf("error %v", err)
		}
	})
}

// FuzzPlainServer: arbitrary PLAIN messages never panic and never authenticate with a
// wrong password.
func FuzzPlainServer(f *testing.F) {
	f.Add([]byte("\x00alice\x00alice-secret"))
	f.Add([]byte("alice\x00alice\x00x"))
	f.Add([]byte("\x00\x00\x00"))
	static := NewStaticPlain(map[string]string{"alice": "alice-secret"})
	f.Fuzz(func(t *testing.T, msg []byte) {
		_, done, err := NewPlain(static).Start().Next(msg)
		if done {
			parts := strings.Split(string(msg), "\x00")
			if len(parts) != 3 || parts[1] != "alice" || parts[2] != "alice-secret" || (parts[0] != "" && parts[0] != "alice") {
				t.Fatalf("authenticated %q", msg)
			}
		} else if !errors.Is(err, ErrAuthenticationFailed) {
			t.Fatalf("error %v", err)
		}
	})
}

func BenchmarkScramExchange(b *testing.B) {
	store := storeOf(credImage(b, 4096, [2]string{"alice", "alice-secret"}))
	srv := NewScram(metadata.ScramSHA512, store)
	client := scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism()
	b.ReportAllocs()
	for b.Loop() {
		session, msg, _ := client.Authenticate(context.Background(), "")
		ex := srv.Start()
		out, _, err := ex.Next(msg)
		if err != nil {
			b.Fatal(err)
		}
		_, final, err := session.Challenge(out)
		if err != nil {
			b.Fatal(err)
		}
		if _, done, err := ex.Next(final); !done || err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFailedAttempt is the broker's cost of one failed authentication (what an
// authentication storm costs per attempt): SCRAM with a wrong proof (an unknown user
// costs the same: no key derivation on the server), PLAIN checked against SCRAM
// credentials (one PBKDF2 of the credential's iterations, bounded in concurrency), PLAIN
// against a JAAS user table.
func BenchmarkFailedAttempt(b *testing.B) {
	store := storeOf(credImage(b, 4096, [2]string{"alice", "alice-secret"}))
	b.Run("scram-sha-512", func(b *testing.B) {
		srv := NewScram(metadata.ScramSHA512, store)
		// A client-final for another exchange: fails at the nonce check.
		final := []byte("c=biws,r=abcdefgh,p=" + base64.StdEncoding.EncodeToString(make([]byte, 64)))
		b.ReportAllocs()
		for b.Loop() {
			ex := srv.Start()
			if _, _, err := ex.Next([]byte("n,,n=alice,r=abcd")); err != nil {
				b.Fatal(err)
			}
			if _, _, err := ex.Next(final); err == nil {
				b.Fatal("authenticated")
			}
		}
	})
	b.Run("scram-sha-512-bad-proof", func(b *testing.B) {
		m := NewScram(metadata.ScramSHA512, store).(*scramMech)
		m.nonce = func() string { return "S" }
		final := []byte("c=biws,r=abcdS,p=" + base64.StdEncoding.EncodeToString(make([]byte, 64)))
		b.ReportAllocs()
		for b.Loop() {
			ex := m.Start()
			ex.Next([]byte("n,,n=alice,r=abcd"))
			if _, _, err := ex.Next(final); err == nil {
				b.Fatal("authenticated")
			}
		}
	})
	b.Run("plain-over-scram", func(b *testing.B) {
		srv := NewPlain(NewScramPlain(store, 0))
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := srv.Start().Next([]byte("\x00alice\x00wrong")); err == nil {
				b.Fatal("authenticated")
			}
		}
	})
	b.Run("plain-jaas", func(b *testing.B) {
		srv := NewPlain(NewStaticPlain(map[string]string{"alice": "alice-secret"}))
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := srv.Start().Next([]byte("\x00alice\x00wrong")); err == nil {
				b.Fatal("authenticated")
			}
		}
	})
}
