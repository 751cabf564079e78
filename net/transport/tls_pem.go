package transport

import (
	"crypto"
	"crypto/aes"
	"crypto/cipher"
	"crypto/des"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/pbkdf2"
	"crypto/rsa"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"encoding/asn1"
	"encoding/pem"
	"errors"
	"fmt"
	"hash"
)

// ErrTLSConfig is wrapped by every error of a listener's ssl.* configuration.
var ErrTLSConfig = errors.New("transport: invalid TLS configuration")

// PEM block types of Kafka's PEM key and trust stores.
const (
	pemCertificate  = "CERTIFICATE"
	pemPrivateKey   = "PRIVATE KEY"           // PKCS#8, Kafka's unencrypted form
	pemEncryptedKey = "ENCRYPTED PRIVATE KEY" // PKCS#8 EncryptedPrivateKeyInfo, Kafka's encrypted form
	pemRSAKey       = "RSA PRIVATE KEY"       // PKCS#1 (OpenSSL's traditional form; Samsa reads it, Kafka does not)
	pemECKey        = "EC PRIVATE KEY"        // SEC 1 (likewise)
)

// keyPair parses a PEM key store: a private key (PKCS#8, encrypted with password when
// it is an ENCRYPTED PRIVATE KEY) and the certificate chain, leaf first. certPEM and
// keyPEM may be the same bytes (a key store file holds both, Kafka's
// ssl.keystore.location with ssl.keystore.type=PEM).
func keyPair(certPEM, keyPEM []byte, password string, havePassword bool) (tls.Certificate, error) {
	var chain [][]byte
	for rest := certPEM; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type == pemCertificate {
			chain = append(chain, b.Bytes)
		}
	}
	if len(chain) == 0 {
		return tls.Certificate{}, fmt.Errorf("%w: the key store has no CERTIFICATE block", ErrTLSConfig)
	}
	var key crypto.PrivateKey
	for rest := keyPEM; key == nil; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			return tls.Certificate{}, fmt.Errorf("%w: the key store has no private key (PRIVATE KEY or ENCRYPTED PRIVATE KEY)", ErrTLSConfig)
		}
		var err error
		switch b.Type {
		case pemPrivateKey, pemRSAKey, pemECKey:
			if _, legacy := b.Headers["Proc-Type"]; legacy {
				return tls.Certificate{}, fmt.Errorf("%w: the private key is encrypted in OpenSSL's legacy PEM form, which is insecure and unsupported; convert it to encrypted PKCS#8 (openssl pkcs8 -topk8 -v2 aes-256-cbc)", ErrTLSConfig)
			}
			if havePassword {
				return tls.Certificate{}, fmt.Errorf("%w: ssl.key.password is set but the private key is not encrypted", ErrTLSConfig)
			}
			key, err = parseKey(b.Type, b.Bytes)
		case pemEncryptedKey:
			if !havePassword {
				return tls.Certificate{}, fmt.Errorf("%w: the private key is encrypted and ssl.key.password is not set", ErrTLSConfig)
			}
			var der []byte
			if der, err = decryptPKCS8(b.Bytes, []byte(password)); err == nil {
				key, err = x509.ParsePKCS8PrivateKey(der)
				if err != nil {
					err = fmt.Errorf("%w: wrong ssl.key.password or corrupt key", ErrTLSConfig)
				}
			}
		default:
			continue
		}
		if err != nil {
			return tls.Certificate{}, err
		}
	}
	leaf, err := x509.ParseCertificate(chain[0])
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("%w: key store certificate: %v", ErrTLSConfig, err)
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return tls.Certificate{}, fmt.Errorf("%w: unsupported private key type %T", ErrTLSConfig, key)
	}
	pub, ok := leaf.PublicKey.(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(signer.Public()) {
		return tls.Certificate{}, fmt.Errorf("%w: the private key does not match the first certificate of the key store", ErrTLSConfig)
	}
	return tls.Certificate{Certificate: chain, PrivateKey: key, Leaf: leaf}, nil
}

func parseKey(typ string, der []byte) (crypto.PrivateKey, error) {
	var key crypto.PrivateKey
	var err error
	switch typ {
	case pemRSAKey:
		key, err = x509.ParsePKCS1PrivateKey(der)
	case pemECKey:
		key, err = x509.ParseECPrivateKey(der)
	default:
		key, err = x509.ParsePKCS8PrivateKey(der)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: private key: %v", ErrTLSConfig, err)
	}
	switch key.(type) {
	case *rsa.PrivateKey, *ecdsa.PrivateKey, ed25519.PrivateKey:
		return key, nil
	}
	return nil, fmt.Errorf("%w: unsupported private key type %T", ErrTLSConfig, key)
}

// certPool parses a PEM trust store: one or more CERTIFICATE blocks.
func certPool(pemBytes []byte) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	n := 0
	for rest := pemBytes; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != pemCertificate {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%w: trust store certificate %d: %v", ErrTLSConfig, n, err)
		}
		pool.AddCert(c)
		n++
	}
	if n == 0 {
		return nil, fmt.Errorf("%w: the trust store has no CERTIFICATE block", ErrTLSConfig)
	}
	return pool, nil
}

// Encrypted PKCS#8 (RFC 5958, RFC 8018): what Samsa decrypts is PBES2 with PBKDF2
// (HMAC-SHA1, -SHA224, -SHA256, -SHA384 or -SHA512) and AES-128/192/256-CBC or
// DES-EDE3-CBC: what OpenSSL's `pkcs8 -topk8` and Java's tools write by default. PBES1
// and PKCS#12 PBE schemes (openssl pkcs8 -v1 ...) and scrypt are refused.
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
	oidDESEDE3CBC = asn1.ObjectIdentifier{1, 2, 840, 113549, 3, 7}
)

// maxPBKDF2Iterations bounds the work a key file can ask for.
const maxPBKDF2Iterations = 1 << 24

type algorithmIdentifier struct {
	Algorithm  asn1.ObjectIdentifier
	Parameters asn1.RawValue `asn1:"optional"`
}

type encryptedPrivateKeyInfo struct {
	Algorithm     algorithmIdentifier
	EncryptedData []byte
}

type pbes2Params struct {
	KeyDerivationFunc algorithmIdentifier
	EncryptionScheme  algorithmIdentifier
}

type pbkdf2Params struct {
	Salt           []byte
	IterationCount int
	KeyLength      int                 `asn1:"optional"`
	PRF            algorithmIdentifier `asn1:"optional"`
}

func decryptPKCS8(der, password []byte) ([]byte, error) {
	var info encryptedPrivateKeyInfo
	if rest, err := asn1.Unmarshal(der, &info); err != nil || len(rest) != 0 {
		return nil, fmt.Errorf("%w: encrypted private key: not PKCS#8 EncryptedPrivateKeyInfo", ErrTLSConfig)
	}
	if !info.Algorithm.Algorithm.Equal(oidPBES2) {
		return nil, fmt.Errorf("%w: encrypted private key: scheme %v is not supported (Samsa reads PBES2 with PBKDF2 and AES-CBC or DES-EDE3-CBC)", ErrTLSConfig, info.Algorithm.Algorithm)
	}
	var p pbes2Params
	if _, err := asn1.Unmarshal(info.Algorithm.Parameters.FullBytes, &p); err != nil {
		return nil, fmt.Errorf("%w: encrypted private key: PBES2 parameters: %v", ErrTLSConfig, err)
	}
	if !p.KeyDerivationFunc.Algorithm.Equal(oidPBKDF2) {
		return nil, fmt.Errorf("%w: encrypted private key: key derivation %v is not supported (PBKDF2 only)", ErrTLSConfig, p.KeyDerivationFunc.Algorithm)
	}
	var kdf pbkdf2Params
	if _, err := asn1.Unmarshal(p.KeyDerivationFunc.Parameters.FullBytes, &kdf); err != nil {
		return nil, fmt.Errorf("%w: encrypted private key: PBKDF2 parameters: %v", ErrTLSConfig, err)
	}
	if kdf.IterationCount < 1 || kdf.IterationCount > maxPBKDF2Iterations {
		return nil, fmt.Errorf("%w: encrypted private key: %d PBKDF2 iterations", ErrTLSConfig, kdf.IterationCount)
	}
	var prf func() hash.Hash
	switch alg := kdf.PRF.Algorithm; {
	case len(alg) == 0 || alg.Equal(oidHMACSHA1):
		prf = sha1.New
	case alg.Equal(oidHMACSHA224):
		prf = sha256.New224
	case alg.Equal(oidHMACSHA256):
		prf = sha256.New
	case alg.Equal(oidHMACSHA384):
		prf = sha512.New384
	case alg.Equal(oidHMACSHA512):
		prf = sha512.New
	default:
		return nil, fmt.Errorf("%w: encrypted private key: PBKDF2 PRF %v is not supported", ErrTLSConfig, alg)
	}
	var keyLen int
	var newCipher func([]byte) (cipher.Block, error)
	switch alg := p.EncryptionScheme.Algorithm; {
	case alg.Equal(oidAES128CBC):
		keyLen, newCipher = 16, aes.NewCipher
	case alg.Equal(oidAES192CBC):
		keyLen, newCipher = 24, aes.NewCipher
	case alg.Equal(oidAES256CBC):
		keyLen, newCipher = 32, aes.NewCipher
	case alg.Equal(oidDESEDE3CBC):
		keyLen, newCipher = 24, des.NewTripleDESCipher
	default:
		return nil, fmt.Errorf("%w: encrypted private key: cipher %v is not supported (AES-CBC, DES-EDE3-CBC)", ErrTLSConfig, alg)
	}
	if kdf.KeyLength != 0 && kdf.KeyLength != keyLen {
		return nil, fmt.Errorf("%w: encrypted private key: key length %d for a %d-byte cipher key", ErrTLSConfig, kdf.KeyLength, keyLen)
	}
	var iv []byte
	if _, err := asn1.Unmarshal(p.EncryptionScheme.Parameters.FullBytes, &iv); err != nil {
		return nil, fmt.Errorf("%w: encrypted private key: IV: %v", ErrTLSConfig, err)
	}
	key, err := pbkdf2.Key(prf, string(password), kdf.Salt, kdf.IterationCount, keyLen)
	if err != nil {
		return nil, fmt.Errorf("%w: encrypted private key: %v", ErrTLSConfig, err)
	}
	block, err := newCipher(key)
	if err != nil {
		return nil, fmt.Errorf("%w: encrypted private key: %v", ErrTLSConfig, err)
	}
	bs := block.BlockSize()
	if len(iv) != bs || len(info.EncryptedData) == 0 || len(info.EncryptedData)%bs != 0 {
		return nil, fmt.Errorf("%w: encrypted private key: IV or data size", ErrTLSConfig)
	}
	out := make([]byte, len(info.EncryptedData))
	cipher.NewCBCDecrypter(block, iv).CryptBlocks(out, info.EncryptedData)
	// PKCS#7 padding; a wrong password shows here (or in the PKCS#8 parse after it).
	pad := int(out[len(out)-1])
	if pad == 0 || pad > bs {
		return nil, fmt.Errorf("%w: wrong ssl.key.password or corrupt key", ErrTLSConfig)
	}
	want := make([]byte, pad)
	for i := range want {
		want[i] = byte(pad)
	}
	if subtle.ConstantTimeCompare(out[len(out)-pad:], want) != 1 {
		return nil, fmt.Errorf("%w: wrong ssl.key.password or corrupt key", ErrTLSConfig)
	}
	return out[:len(out)-pad], nil
}
