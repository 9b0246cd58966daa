package tlsconf

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/pbkdf2"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"errors"
	"fmt"
	"hash"
	"regexp"
	"strings"
)

// ErrKeyPassword: ssl.key.password is missing or does not decrypt the key.
var ErrKeyPassword = errors.New("ssl.key.password does not decrypt the private key")

// pemBlock is one armoured block with its lines run together.
var pemBlock = regexp.MustCompile(`(?s)-----BEGIN ([A-Z0-9 ]+)-----(.*?)-----END ([A-Z0-9 ]+)-----`)

// inlinePEM returns an inline PEM config value ready for pem.Decode. A value pasted
// from a server.properties file written with line continuations has lost its line
// breaks ("-----BEGIN CERTIFICATE-----MIIB...-----END CERTIFICATE-----"), which Kafka
// accepts; such a value gets its armour lines back.
func inlinePEM(v string) []byte {
	if blk, _ := pem.Decode([]byte(v)); blk != nil {
		return []byte(v)
	}
	var out []byte
	for _, m := range pemBlock.FindAllStringSubmatch(v, -1) {
		body := strings.Join(strings.Fields(m[2]), "")
		out = fmt.Appendf(out, "-----BEGIN %s-----\n%s\n-----END %s-----\n", m[1], body, m[3])
	}
	if out == nil {
		return []byte(v)
	}
	return out
}

// parseKeyStore reads a PEM key store: one private key block and the certificate
// chain, leaf first, in any order relative to each other.
func parseKeyStore(b []byte, password string) (*tls.Certificate, error) {
	var certs, key []byte
	nkeys := 0
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			break
		}
		switch blk.Type {
		case "CERTIFICATE":
			certs = append(certs, pem.EncodeToMemory(blk)...)
		case "PRIVATE KEY", "RSA PRIVATE KEY", "EC PRIVATE KEY":
			if _, ok := blk.Headers["DEK-Info"]; ok {
				return nil, errors.New("legacy encrypted PEM key (Proc-Type: 4,ENCRYPTED) is not supported; convert it to encrypted PKCS#8 (openssl pkcs8 -topk8 -v2 aes256)")
			}
			nkeys++
			key = pem.EncodeToMemory(blk)
		case "ENCRYPTED PRIVATE KEY":
			nkeys++
			if password == "" {
				return nil, fmt.Errorf("the private key is encrypted: %w", ErrKeyPassword)
			}
			der, err := decryptPKCS8(blk.Bytes, []byte(password))
			if err != nil {
				return nil, err
			}
			key = pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
		}
	}
	switch {
	case nkeys == 0:
		return nil, errors.New("no private key (PRIVATE KEY, RSA PRIVATE KEY, EC PRIVATE KEY or ENCRYPTED PRIVATE KEY block)")
	case nkeys > 1:
		return nil, fmt.Errorf("%d private keys; a key store holds one", nkeys)
	case certs == nil:
		return nil, errors.New("no certificate (CERTIFICATE block)")
	}
	cert, err := tls.X509KeyPair(certs, key)
	if err != nil {
		return nil, err
	}
	return &cert, nil
}

// parseTrustStore reads PEM CA certificates.
func parseTrustStore(b []byte) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	n := 0
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return nil, fmt.Errorf("certificate %d: %w", n+1, err)
		}
		pool.AddCert(c)
		n++
	}
	if n == 0 {
		return nil, errors.New("no certificate (CERTIFICATE block)")
	}
	return pool, nil
}

// Encrypted PKCS#8 (RFC 5958 EncryptedPrivateKeyInfo) with PBES2 (RFC 8018):
//
//	EncryptedPrivateKeyInfo ::= SEQUENCE { encryptionAlgorithm AlgorithmIdentifier, encryptedData OCTET STRING }
//	PBES2-params ::= SEQUENCE { keyDerivationFunc AlgorithmIdentifier, encryptionScheme AlgorithmIdentifier }
//	PBKDF2-params ::= SEQUENCE { salt OCTET STRING, iterationCount INTEGER,
//	                             keyLength INTEGER OPTIONAL, prf AlgorithmIdentifier DEFAULT hmacWithSHA1 }
//	encryptionScheme: aes{128,192,256}-CBC with the IV as parameter.
var (
	oidPBES2      = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 5, 13}
	oidPBKDF2     = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 5, 12}
	oidHMACSHA1   = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 7}
	oidHMACSHA224 = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 8}
	oidHMACSHA256 = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 9}
	oidHMACSHA384 = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 10}
	oidHMACSHA512 = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 11}
	oidAES128CBC  = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 1, 2}
	oidAES192CBC  = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 1, 22}
	oidAES256CBC  = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 1, 42}
)

type encryptedPrivateKeyInfo struct {
	Algo pkix.AlgorithmIdentifier
	Data []byte
}

type pbes2Params struct {
	KDF pkix.AlgorithmIdentifier
	Enc pkix.AlgorithmIdentifier
}

type pbkdf2Params struct {
	Salt   []byte
	Iter   int
	KeyLen int                      `asn1:"optional"`
	PRF    pkix.AlgorithmIdentifier `asn1:"optional"`
}

// maxIterations bounds PBKDF2's work: a key store is local config, but a typo must not
// hang the broker's start.
const maxIterations = 10_000_000

// decryptPKCS8 decrypts an EncryptedPrivateKeyInfo and returns the PKCS#8 DER.
func decryptPKCS8(der, password []byte) ([]byte, error) {
	var info encryptedPrivateKeyInfo
	if rest, err := asn1.Unmarshal(der, &info); err != nil || len(rest) > 0 {
		return nil, fmt.Errorf("encrypted private key: malformed: %v", err)
	}
	if !info.Algo.Algorithm.Equal(oidPBES2) {
		return nil, fmt.Errorf("encrypted private key: scheme %v is not supported (only PBES2 with PBKDF2 and AES-CBC)", info.Algo.Algorithm)
	}
	var p pbes2Params
	if _, err := asn1.Unmarshal(info.Algo.Parameters.FullBytes, &p); err != nil {
		return nil, fmt.Errorf("encrypted private key: PBES2 parameters: %w", err)
	}
	if !p.KDF.Algorithm.Equal(oidPBKDF2) {
		return nil, fmt.Errorf("encrypted private key: key derivation %v is not supported (only PBKDF2)", p.KDF.Algorithm)
	}
	var kp pbkdf2Params
	if _, err := asn1.Unmarshal(p.KDF.Parameters.FullBytes, &kp); err != nil {
		return nil, fmt.Errorf("encrypted private key: PBKDF2 parameters: %w", err)
	}
	if kp.Iter < 1 || kp.Iter > maxIterations {
		return nil, fmt.Errorf("encrypted private key: %d PBKDF2 iterations out of range", kp.Iter)
	}
	var prf func() hash.Hash
	switch a := kp.PRF.Algorithm; {
	case len(a) == 0, a.Equal(oidHMACSHA1):
		prf = sha1.New
	case a.Equal(oidHMACSHA224):
		prf = sha256.New224
	case a.Equal(oidHMACSHA256):
		prf = sha256.New
	case a.Equal(oidHMACSHA384):
		prf = sha512.New384
	case a.Equal(oidHMACSHA512):
		prf = sha512.New
	default:
		return nil, fmt.Errorf("encrypted private key: PBKDF2 PRF %v is not supported", a)
	}
	var keyLen int
	switch a := p.Enc.Algorithm; {
	case a.Equal(oidAES128CBC):
		keyLen = 16
	case a.Equal(oidAES192CBC):
		keyLen = 24
	case a.Equal(oidAES256CBC):
		keyLen = 32
	default:
		return nil, fmt.Errorf("encrypted private key: cipher %v is not supported (only AES-CBC)", a)
	}
	if kp.KeyLen != 0 && kp.KeyLen != keyLen {
		return nil, fmt.Errorf("encrypted private key: key length %d does not fit the cipher", kp.KeyLen)
	}
	var iv []byte
	if _, err := asn1.Unmarshal(p.Enc.Parameters.FullBytes, &iv); err != nil || len(iv) != aes.BlockSize {
		return nil, errors.New("encrypted private key: malformed AES-CBC IV")
	}
	if len(info.Data) == 0 || len(info.Data)%aes.BlockSize != 0 {
		return nil, errors.New("encrypted private key: ciphertext is not whole AES blocks")
	}
	key, err := pbkdf2.Key(prf, string(password), kp.Salt, kp.Iter, keyLen)
	if err != nil {
		return nil, fmt.Errorf("encrypted private key: %w", err)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	out := make([]byte, len(info.Data))
	cipher.NewCBCDecrypter(block, iv).CryptBlocks(out, info.Data)
	// PKCS#7 padding; a wrong password leaves garbage here (or, rarely, valid-looking
	// padding and garbage inside, which the key parse below catches).
	pad := int(out[len(out)-1])
	if pad < 1 || pad > aes.BlockSize || subtle.ConstantTimeCompare(out[len(out)-pad:], bytes.Repeat([]byte{byte(pad)}, pad)) != 1 {
		return nil, ErrKeyPassword
	}
	out = out[:len(out)-pad]
	if _, err := x509.ParsePKCS8PrivateKey(out); err != nil {
		return nil, ErrKeyPassword
	}
	return out, nil
}
