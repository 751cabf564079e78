package auth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"errors"
	"math/big"
	"testing"
	"time"
)

// TestDistinguishedNameJava: the expected names were printed by OpenJDK 17's
// new X500Principal(der).getName() for these DER subjects.
func TestDistinguishedNameJava(t *testing.T) {
	for _, c := range []struct{ der, want string }{
		{"303a310b3009060355040613025553310d300b060355040a130441636d65310c300a060355040b1303656e67310e300c06035504031305616c696365", `CN=alice,OU=eng,O=Acme,C=US`},
		{"305031133011060a0992268993f22c6401191303636f6d31173015060a0992268993f22c64011913076578616d706c6531123010060a0992268993f22c64010113027531310c300a06035504031303626f62", `CN=bob,UID=u1,DC=example,DC=com`},
		{"301e311c301a06035504030c13612c623d632b643c653e6623673b6822695c6a", `CN=a\,b\=c\+d\<e\>f\#g\;h\"i\\j`},
		{"3031310e300c06035504031305206c656164310f300d060355040b1306747261696c20310e300c060355040a0c052368617368", `O=\#hash,OU=trail\ ,CN=\ lead`},
		{"30163114300806035504031301783008060355040b130179", `CN=x+OU=y`},
		{"30333114301206092a864886f70d0109010c056140622e63310d300b0603550405130431323334310c300a06035504031303737663", `CN=svc,2.5.4.5=#130431323334,1.2.840.113549.1.9.1=#0c056140622e63`},
		{"3046310b3009060355040813024341310b3009060355040713025346311230100603550409130931204d61696e2053743116301406035504030c0d68c3a96c6c6f2077c3b6726c64", `CN=héllo wörld,STREET=1 Main St,L=SF,ST=CA`},
		{"300d310b3009060355040313022020", `CN=\ \ `},
		{"300e310c300a06035504030c03610062", `CN=a\00b`},
		{"3020310f300d06032a03041306637573746f6d310d300b06035504031e0400680069", `CN=\00h\00i,1.2.3.4=#1306637573746f6d`},
		{"300c310a30080603550403020105", `CN=#020105`},
		{"300d310b30090603550403140263e9", "CN=c\uFFFD"},
		{"3010310e300c060355040316056961353d78", `CN=ia5\=x`},
		{"30133111300f06035504030c087461620968657265", "CN=tab\there"},
		{"300f310d300b06035504031c0400000075", `CN=#1c0400000075`},
		{"300e310c300a06035504031a03766973", `CN=#1a03766973`},
		{"300f310d300b06035504030c0461e98062", "CN=a\uFFFDb"},
		{"301c310c300a060355040b0c03780d0a310c300a060355040313033d6571", "CN=\\=eq,OU=x\r\n"},
		{"3000", ``},
	} {
		der, _ := hex.DecodeString(c.der)
		got, err := DistinguishedName(der)
		if err != nil || got != c.want {
			t.Errorf("DistinguishedName(%s) = %q, %v; want %q", c.der, got, err, c.want)
		}
	}
	for _, bad := range []string{"", "30", "3003310130", "300c310a30080603550403020105ff"} {
		der, _ := hex.DecodeString(bad)
		if _, err := DistinguishedName(der); !errors.Is(err, ErrBadSubject) {
			t.Errorf("DistinguishedName(%s) = %v", bad, err)
		}
	}
}

// TestMappingRulesJava: each expected result was computed by Java (Pattern.matches,
// String.replaceAll with Kafka's escaping of group numbers above the group count, then
// toLowerCase/toUpperCase), as Kafka's SslPrincipalMapper does.
func TestMappingRulesJava(t *testing.T) {
	for _, c := range []struct{ rules, dn, want string }{
		{`RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/`, "CN=kafka1,OU=ServiceUsers,O=Unknown,L=Unknown,ST=Unknown,C=Unknown", "kafka1"},
		{`RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L`, "CN=Duke,OU=JavaSoft,O=Sun Microsystems,L=Cupertino,ST=CA,C=US", "duke@javasoft"},
		{`RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L`, "CN=Kafka1.Example.COM,OU=x", "kafka1.example.com"},
		{`RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U`, "cn=duke,ou=javasoft,dc=sun,dc=com", "DUKE@JAVASOFT"},
		{`RULE:CN=([^,]*).*/$1$2/`, "CN=a,OU=b", "a$2"},
		{`RULE:CN=([^,]*).*/$12/`, "CN=a,OU=b", "a2"},
		{`RULE:CN=([^,]*).*/$0!/`, "CN=a,OU=b", "CN=a,OU=b!"},
		{`RULE:CN=([^,]*).*/\$1-$1/`, "CN=a,OU=b", "$1-a"},
		{`RULE:(CN)=([^,]*).*/$21/`, "CN=a,OU=b", "a1"},
		{`RULE:a|ab/X/`, "ab", "Xb"},
		{`RULE:(?<user>[a-z]+)@.*/${user}/`, "alice@example", "alice"},
		{`RULE:(a)(b)?c/[$2]/`, "ac", "[]"},
		// Rule lists: the first rule that matches wins; DEFAULT keeps the name.
		{`RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/, DEFAULT`, "CN=kafka1,OU=Other", "CN=kafka1,OU=Other"},
		{`RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,RULE:^CN=(.*?),.*$/$1/U`, "CN=kafka1,OU=Other", "KAFKA1"},
		{"RULE:^CN=([^,]*),.*$/$1/L,\n   DEFAULT", "CN=Bob,O=x", "bob"},
		{`RULE:^CN=(.*)\/(.*)$/$2\/$1/`, "CN=a/b", "b/a"},
		{`DEFAULT,,RULE:x/y/,`, "anything", "anything"},
		{``, "CN=x", "CN=x"},
		{`DEFAULT`, "", ""},
	} {
		mr, err := ParseMappingRules(c.rules)
		if err != nil {
			t.Errorf("ParseMappingRules(%q): %v", c.rules, err)
			continue
		}
		if got, err := mr.Map(c.dn); err != nil || got != c.want {
			t.Errorf("rules %q on %q = %q, %v; want %q", c.rules, c.dn, got, err, c.want)
		}
	}
	// Go's documented difference from Java: no second replacement of the empty match at
	// the end (Java gives "xx" and "--").
	for _, c := range []struct{ rules, dn, want string }{{`RULE:.*/x/`, "abc", "x"}, {`RULE:x*/-/`, "xxx", "-"}} {
		mr, _ := ParseMappingRules(c.rules)
		if got, _ := mr.Map(c.dn); got != c.want {
			t.Errorf("rules %q on %q = %q, want %q", c.rules, c.dn, got, c.want)
		}
	}
	mr, _ := ParseMappingRules(`RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/`)
	if _, err := mr.Map("CN=kafka1,OU=Other"); !errors.Is(err, ErrNoMatchingRule) {
		t.Fatalf("no rule matched: %v", err)
	}
	var none *MappingRules
	if got, _ := none.Map("CN=x"); got != "CN=x" || none.String() != "DEFAULT" {
		t.Fatal("nil rules are not DEFAULT")
	}
}

func TestMappingRulesInvalid(t *testing.T) {
	for _, bad := range []string{
		"RULE:abc", "RULE:abc/def", "RULE:(/x/", "DEFAULTX", "RULE:a/b/Lx", "RULE:a/b/ DEFAULT", "nonsense",
		`RULE:(a)(?=b)/x/`, `RULE:(a)\1/x/`, `RULE:a/${nope}/`, `RULE:(a)/${x/`, `RULE:a/$x/`, `RULE:a/tail\/`, ",",
	} {
		if _, err := ParseMappingRules(bad); !errors.Is(err, ErrInvalidRule) {
			t.Errorf("ParseMappingRules(%q) = %v", bad, err)
		}
	}
}

func TestPrincipals(t *testing.T) {
	p, err := ParsePrincipal("User:CN=a,O=b")
	if err != nil || p.Type != "User" || p.Name != "CN=a,O=b" || p.String() != "User:CN=a,O=b" {
		t.Fatalf("ParsePrincipal = %+v, %v", p, err)
	}
	for _, bad := range []string{"alice", ":a", "User:", ""} {
		if _, err := ParsePrincipal(bad); !errors.Is(err, ErrInvalidPrincipal) {
			t.Errorf("ParsePrincipal(%q) = %v", bad, err)
		}
	}
	if Anonymous.String() != "User:ANONYMOUS" || User("x").String() != "User:x" {
		t.Fatal("principal strings")
	}

	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour),
		Subject: pkix.Name{CommonName: "client-1", OrganizationalUnit: []string{"ServiceUsers"}, Organization: []string{"Acme"}}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	state := &tls.ConnectionState{PeerCertificates: []*x509.Certificate{cert}}
	if p, err := (PrincipalBuilder{}).FromTLS(state); err != nil || p.String() != "User:CN=client-1,OU=ServiceUsers,O=Acme" {
		t.Fatalf("FromTLS DEFAULT = %v, %v", p, err)
	}
	rules, _ := ParseMappingRules(`RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L`)
	if p, err := (PrincipalBuilder{Rules: rules}).FromTLS(state); err != nil || p.String() != "User:client-1" {
		t.Fatalf("FromTLS mapped = %v, %v", p, err)
	}
	strict, _ := ParseMappingRules(`RULE:^CN=(.*?),OU=Brokers.*$/$1/`)
	if _, err := (PrincipalBuilder{Rules: strict}).FromTLS(state); !errors.Is(err, ErrNoMatchingRule) {
		t.Fatalf("FromTLS without a matching rule: %v", err)
	}
	if p, err := (PrincipalBuilder{}).FromTLS(&tls.ConnectionState{}); err != nil || p != Anonymous {
		t.Fatalf("FromTLS without a certificate = %v, %v", p, err)
	}
	if p := (PrincipalBuilder{}).FromSASL("alice"); p.String() != "User:alice" {
		t.Fatal("FromSASL")
	}
}

// FuzzDistinguishedName: any bytes give a name or ErrBadSubject, never a panic.
func FuzzDistinguishedName(f *testing.F) {
	for _, s := range []string{"303a310b3009060355040613025553310d300b060355040a130441636d65", "3000", "300c310a30080603550403020105"} {
		b, _ := hex.DecodeString(s)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if _, err := DistinguishedName(b); err != nil && !errors.Is(err, ErrBadSubject) {
			t.Fatal(err)
		}
	})
}

// FuzzConfigParsers: mapping rules and JAAS text parse or fail with their errors; rules
// that parse map any name without a panic.
func FuzzConfigParsers(f *testing.F) {
	f.Add(`RULE:^CN=(.*?),OU=(.*?)$/$1@$2/L,DEFAULT`, "CN=a,OU=b")
	f.Add(`org.apache.kafka.common.security.plain.PlainLoginModule required user_a="b";`, "x")
	f.Add(`RULE:(?<u>.)/${u}$0\$/U`, "")
	f.Fuzz(func(t *testing.T, text, dn string) {
		if mr, err := ParseMappingRules(text); err == nil {
			if _, err := mr.Map(dn); err != nil && !errors.Is(err, ErrNoMatchingRule) {
				t.Fatal(err)
			}
		} else if !errors.Is(err, ErrInvalidRule) {
			t.Fatal(err)
		}
		if _, err := ParseJAAS(text); err != nil && !errors.Is(err, ErrInvalidJAAS) {
			t.Fatal(err)
		}
	})
}
