package identity

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	jose "github.com/go-jose/go-jose/v4"
)

// Bounds of a key set.
const (
	// MaxKeys is the most keys of one JWKS the gateway reads; the rest are skipped. An issuer
	// publishes a few (the current key and the next or previous one).
	MaxKeys = 64
	// minRSABits and maxRSABits bound an RSA key: shorter is breakable, longer only slows every
	// verification down.
	minRSABits = 2048
	maxRSABits = 8192
)

// key is one public key of the issuer's set that the gateway may verify with.
type key struct {
	id  string // kid, "" when the set gives none
	alg string // the JWK's alg, "" when it names none
	pub crypto.PublicKey
}

// keySet is the issuer's usable keys, as last fetched.
type keySet struct {
	keys []key
}

// parseKeySet reads a JWKS document and keeps the keys the gateway may use. skipped says,
// for the log, what was left out and why; an error means the document is not a key set at all.
func parseKeySet(doc []byte) (ks *keySet, skipped []string, err error) {
	var raw struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(doc, &raw); err != nil {
		return nil, nil, fmt.Errorf("the key set is not JSON: %v", err)
	}
	if raw.Keys == nil {
		return nil, nil, fmt.Errorf("the key set has no \"keys\" array")
	}
	ks = &keySet{}
	for i, r := range raw.Keys {
		if i >= MaxKeys {
			skipped = append(skipped, fmt.Sprintf("%d keys after the first %d", len(raw.Keys)-MaxKeys, MaxKeys))
			break
		}
		var jwk jose.JSONWebKey
		if err := jwk.UnmarshalJSON(r); err != nil {
			skipped = append(skipped, fmt.Sprintf("key %d: not a key the gateway can read (%v)", i, err))
			continue
		}
		var ops struct {
			KeyOps []string `json:"key_ops"`
		}
		_ = json.Unmarshal(r, &ops)
		k, why := usable(&jwk, ops.KeyOps)
		if why != "" {
			skipped = append(skipped, fmt.Sprintf("key %d (kid %q): %s", i, clip(jwk.KeyID, 64), why))
			continue
		}
		ks.keys = append(ks.keys, k)
	}
	return ks, skipped, nil
}

// usable is the key of jwk, whose key_ops are keyOps, the gateway may verify with, or why it
// may not.
func usable(jwk *jose.JSONWebKey, keyOps []string) (key, string) {
	if jwk.Use != "" && jwk.Use != "sig" {
		return key{}, fmt.Sprintf("its use is %q, not sig", clip(jwk.Use, 32))
	}
	if len(keyOps) > 0 && !slices.Contains(keyOps, "verify") {
		return key{}, "its key_ops do not include verify"
	}
	var pub crypto.PublicKey
	switch k := jwk.Key.(type) {
	case *rsa.PublicKey:
		if bits := k.N.BitLen(); bits < minRSABits || bits > maxRSABits {
			return key{}, fmt.Sprintf("an RSA key of %d bits; the gateway uses %d to %d", bits, minRSABits, maxRSABits)
		}
		pub = k
	case *ecdsa.PublicKey:
		if k.Curve != elliptic.P256() && k.Curve != elliptic.P384() && k.Curve != elliptic.P521() {
			return key{}, "an EC key on a curve other than P-256, P-384 or P-521"
		}
		pub = k
	case ed25519.PublicKey:
		pub = k
	case []byte:
		return key{}, "a symmetric (oct) key, never used: a shared secret proves nothing about who signed"
	case *rsa.PrivateKey, *ecdsa.PrivateKey, ed25519.PrivateKey:
		return key{}, "it holds private key material, which an issuer must never publish; it is not trusted"
	default:
		return key{}, fmt.Sprintf("a %T key, which the gateway does not verify with", jwk.Key)
	}
	k := key{id: jwk.KeyID, alg: jwk.Algorithm, pub: pub}
	if k.alg != "" && !fits(pub, k.alg) {
		return key{}, fmt.Sprintf("its alg %q does not go with its key type", clip(k.alg, 32))
	}
	return k, ""
}

// fits reports whether pub can verify signatures of algorithm alg.
func fits(pub crypto.PublicKey, alg string) bool {
	switch k := pub.(type) {
	case *rsa.PublicKey:
		return strings.HasPrefix(alg, "RS") || strings.HasPrefix(alg, "PS")
	case *ecdsa.PublicKey:
		switch alg {
		case "ES256":
			return k.Curve == elliptic.P256()
		case "ES384":
			return k.Curve == elliptic.P384()
		case "ES512":
			return k.Curve == elliptic.P521()
		}
	case ed25519.PublicKey:
		return alg == "EdDSA"
	}
	return false
}

// candidates are the keys that may have signed a token with header kid and alg: the key
// named kid, or without a kid every key that fits alg. A key whose own alg differs from the
// token's is never one.
func (ks *keySet) candidates(kid, alg string) []key {
	if ks == nil {
		return nil
	}
	var out []key
	for _, k := range ks.keys {
		if kid != "" && k.id != kid {
			continue
		}
		if (k.alg != "" && k.alg != alg) || !fits(k.pub, alg) {
			continue
		}
		out = append(out, k)
	}
	return out
}

// has reports whether the set holds a key named kid, whatever its algorithm.
func (ks *keySet) has(kid string) bool {
	if ks == nil {
		return false
	}
	for _, k := range ks.keys {
		if k.id == kid {
			return true
		}
	}
	return false
}
