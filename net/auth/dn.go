package auth

import (
	"encoding/asn1"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// ErrBadSubject is returned for a certificate subject that is not a DER Name.
var ErrBadSubject = errors.New("auth: malformed certificate subject")

// DistinguishedName formats a certificate's DER subject (x509.Certificate.RawSubject) as
// Java's X500Principal.getName() does (RFC 2253), the string Kafka's
// ssl.principal.mapping.rules are applied to: RDNs last to first, joined by ','; the
// AVAs of a multi-valued RDN joined by '+' in their encoded order; the keywords CN, C,
// L, ST, O, OU, STREET, DC and UID, other attribute types as dotted OIDs whose values
// are '#' and the hex of their DER encoding (lower case); string values escaped as Java
// escapes them (a backslash before , = + < > # ; " \ and before leading and trailing
// spaces; NUL as \00). Values of a keyword type that are not a directory string (a tag
// Java does not read as one) are written in the '#' hex form too.
//
// Go's pkix.Name.String differs (it knows SERIALNUMBER and POSTALCODE, not DC and UID,
// and escapes fewer characters), which is why Samsa formats names itself.
func DistinguishedName(rawSubject []byte) (string, error) {
	var seq []rdnSET
	rest, err := asn1.Unmarshal(rawSubject, &seq)
	if err != nil || len(rest) != 0 {
		return "", fmt.Errorf("%w: %v", ErrBadSubject, err)
	}
	var b strings.Builder
	for i := len(seq) - 1; i >= 0; i-- {
		if i != len(seq)-1 {
			b.WriteByte(',')
		}
		for j, a := range seq[i] {
			if j > 0 {
				b.WriteByte('+')
			}
			if err := writeAVA(&b, a); err != nil {
				return "", err
			}
		}
	}
	return b.String(), nil
}

type atv struct {
	Type  asn1.ObjectIdentifier
	Value asn1.RawValue
}

// rdnSET is one relative distinguished name (encoding/asn1 reads a slice type whose
// name ends in SET as a SET OF).
type rdnSET []atv

var dnKeywords = map[string]string{
	"2.5.4.3":                    "CN",
	"2.5.4.6":                    "C",
	"2.5.4.7":                    "L",
	"2.5.4.8":                    "ST",
	"2.5.4.10":                   "O",
	"2.5.4.11":                   "OU",
	"2.5.4.9":                    "STREET",
	"0.9.2342.19200300.100.1.25": "DC",
	"0.9.2342.19200300.100.1.1":  "UID",
}

// ASN.1 universal tags of the directory strings Java writes as text.
const (
	tagUTF8String      = 12
	tagPrintableString = 19
	tagT61String       = 20
	tagIA5String       = 22
	tagGeneralString   = 27
	tagBMPString       = 30
)

func writeAVA(b *strings.Builder, a atv) error {
	oid := a.Type.String()
	kw, known := dnKeywords[oid]
	if known && a.Value.Class == asn1.ClassUniversal && !a.Value.IsCompound {
		if s, ok := directoryString(a.Value.Tag, a.Value.Bytes); ok {
			b.WriteString(kw)
			b.WriteByte('=')
			escapeRFC2253(b, s)
			return nil
		}
	}
	if known {
		b.WriteString(kw)
	} else {
		b.WriteString(oid)
	}
	b.WriteString("=#")
	b.WriteString(hex.EncodeToString(a.Value.FullBytes))
	return nil
}

// directoryString returns the text of a value of the string types Java's AVA writes as
// text (isDerString: UTF8String, PrintableString, T61String, IA5String, GeneralString,
// BMPString). Like Java, it reads the value's bytes as UTF-8 whatever the type, so a
// BMPString or a T61String with bytes above 0x7F reads as Java prints it; each maximal
// ill-formed subsequence becomes one U+FFFD, as Java's decoder replaces it.
func directoryString(tag int, v []byte) (string, bool) {
	switch tag {
	case tagUTF8String, tagPrintableString, tagT61String, tagIA5String, tagGeneralString, tagBMPString:
		if utf8.Valid(v) {
			return string(v), true
		}
		return decodeUTF8Java(v), true
	}
	return "", false
}

// escapeRFC2253 writes s escaped as Java's AVA.toRFC2253String does.
func escapeRFC2253(b *strings.Builder, s string) {
	const escapees = ",=+<>#;\"\\"
	r := []rune(s)
	lead := 0
	for lead < len(r) && (r[lead] == ' ' || r[lead] == '\r') {
		lead++
	}
	trail := len(r) - 1
	for trail >= 0 && (r[trail] == ' ' || r[trail] == '\r') {
		trail--
	}
	for i, c := range r {
		switch {
		case strings.ContainsRune(escapees, c):
			b.WriteByte('\\')
			b.WriteRune(c)
		case c == 0:
			b.WriteString("\\00")
		case i < lead || i > trail:
			b.WriteByte('\\')
			b.WriteRune(c)
		default:
			b.WriteRune(c)
		}
	}
}

// decodeUTF8Java decodes v as Java's UTF-8 decoder does with replacement: every maximal
// subpart of an ill-formed sequence (Unicode's Table 3-7) becomes one U+FFFD.
func decodeUTF8Java(v []byte) string {
	var b strings.Builder
	for len(v) > 0 {
		c, n := utf8.DecodeRune(v)
		if c != utf8.RuneError || n != 1 {
			b.WriteRune(c)
			v = v[n:]
			continue
		}
		b.WriteRune(utf8.RuneError)
		v = v[maximalSubpart(v):]
	}
	return b.String()
}

// maximalSubpart is the length of the ill-formed prefix of v that is replaced by one
// U+FFFD: a lead byte and the continuation bytes that can follow it, at least 1.
func maximalSubpart(v []byte) int {
	lead := v[0]
	var need int
	lo, hi := byte(0x80), byte(0xBF) // the range of the first continuation byte
	switch {
	case lead >= 0xC2 && lead <= 0xDF:
		need = 1
	case lead == 0xE0:
		need, lo = 2, 0xA0
	case lead >= 0xE1 && lead <= 0xEC, lead == 0xEE, lead == 0xEF:
		need = 2
	case lead == 0xED:
		need, hi = 2, 0x9F
	case lead == 0xF0:
		need, lo = 3, 0x90
	case lead >= 0xF1 && lead <= 0xF3:
		need = 3
	case lead == 0xF4:
		need, hi = 3, 0x8F
	default:
		return 1
	}
	n := 1
	for i := 0; i < need && n < len(v); i++ {
		c := v[n]
		if i == 0 && (c < lo || c > hi) || i > 0 && (c < 0x80 || c > 0xBF) {
			break
		}
		n++
	}
	return n
}
