package tlsconf

import (
	"crypto/x509"
	"encoding/asn1"
	"encoding/hex"
	"fmt"
	"strings"
	"unicode/utf16"
)

// SubjectDN is a certificate's subject in RFC 2253 form, as Java's
// X500Principal.getName() writes it (and so as Kafka's default principal builder and
// its ssl.principal.mapping.rules see it): the relative distinguished names most
// specific first ("CN=alice,OU=eng,O=Acme,C=US"), the values of a multi-valued RDN
// joined by '+' in their encoded order, the keywords CN, C, L, ST, O, OU, STREET, DC
// and UID, any other attribute as its dotted OID with the value's DER in hex
// ("1.2.840.113549.1.9.1=#1611..."), and the special characters escaped with '\'.
func SubjectDN(cert *x509.Certificate) (string, error) {
	return FormatDN(cert.RawSubject)
}

// rawATV is an AttributeTypeAndValue with its value's DER kept.
type rawATV struct {
	Type  asn1.ObjectIdentifier
	Value asn1.RawValue
}

// rawRDNSET is a RelativeDistinguishedName (encoding/asn1 reads a type whose name ends
// in SET as a SET OF).
type rawRDNSET []rawATV

// dnKeywords are the attribute types Java's RFC 2253 form names by keyword.
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

// FormatDN formats a DER-encoded X.501 Name (a certificate's RawSubject) as SubjectDN
// does.
func FormatDN(der []byte) (string, error) {
	var seq []rawRDNSET
	rest, err := asn1.Unmarshal(der, &seq)
	if err != nil {
		return "", fmt.Errorf("subject: %w", err)
	}
	if len(rest) > 0 {
		return "", fmt.Errorf("subject: %d trailing bytes", len(rest))
	}
	var b strings.Builder
	for i := len(seq) - 1; i >= 0; i-- {
		if i != len(seq)-1 {
			b.WriteByte(',')
		}
		for j, atv := range seq[i] {
			if j > 0 {
				b.WriteByte('+')
			}
			oid := atv.Type.String()
			kw, known := dnKeywords[oid]
			s, isString := decodeDirectoryString(atv.Value)
			if !known || !isString {
				if kw == "" {
					kw = oid
				}
				b.WriteString(kw)
				b.WriteString("=#")
				b.WriteString(hex.EncodeToString(atv.Value.FullBytes))
				continue
			}
			b.WriteString(kw)
			b.WriteByte('=')
			escapeDNValue(&b, s)
		}
	}
	return b.String(), nil
}

// decodeDirectoryString returns the text of a string-typed attribute value.
func decodeDirectoryString(v asn1.RawValue) (string, bool) {
	if v.Class != asn1.ClassUniversal {
		return "", false
	}
	switch v.Tag {
	case asn1.TagUTF8String, asn1.TagPrintableString, asn1.TagIA5String, 26 /* VisibleString */, 27 /* GeneralString */ :
		return string(v.Bytes), true
	case asn1.TagT61String:
		// Read as Latin-1, as Java does.
		r := make([]rune, len(v.Bytes))
		for i, c := range v.Bytes {
			r[i] = rune(c)
		}
		return string(r), true
	case asn1.TagBMPString:
		if len(v.Bytes)%2 != 0 {
			return "", false
		}
		u := make([]uint16, len(v.Bytes)/2)
		for i := range u {
			u[i] = uint16(v.Bytes[2*i])<<8 | uint16(v.Bytes[2*i+1])
		}
		return string(utf16.Decode(u)), true
	case 28: // UniversalString, UTF-32BE
		if len(v.Bytes)%4 != 0 {
			return "", false
		}
		r := make([]rune, len(v.Bytes)/4)
		for i := range r {
			b := v.Bytes[4*i:]
			r[i] = rune(uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3]))
		}
		return string(r), true
	}
	return "", false
}

// escapeDNValue writes s with RFC 2253's escapes: ',', '+', '"', '\', '<', '>' and ';'
// anywhere, '#' and ' ' at the start, ' ' at the end; NUL as \00.
func escapeDNValue(b *strings.Builder, s string) {
	for i, r := range s {
		switch {
		case strings.ContainsRune(",+\"\\<>;", r),
			i == 0 && (r == '#' || r == ' '),
			i == len(s)-1 && r == ' ':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == 0:
			b.WriteString(`\00`)
		default:
			b.WriteRune(r)
		}
	}
}
