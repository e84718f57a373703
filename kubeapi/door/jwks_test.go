package door

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"k8s.io/client-go/rest"
)

const testIssuer = "https://kubernetes.default.svc.cluster.local"

// issuer is a service-account issuer: its key, and a server of its
// discovery and JWKS, as the API server serves them, counting the fetches.
type issuer struct {
	key     *ecdsa.PrivateKey
	kid     string
	fetches atomic.Int64
	keys    *issuerKeys
}

func newIssuer(t *testing.T) *issuer {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	is := &issuer{key: key, kid: "key-1"}
	mux := http.NewServeMux()
	mux.HandleFunc(discoveryPath, func(w http.ResponseWriter, r *http.Request) {
		is.fetches.Add(1)
		_ = json.NewEncoder(w).Encode(map[string]string{"issuer": testIssuer, "jwks_uri": testIssuer + jwksPath})
	})
	mux.HandleFunc(jwksPath, func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: is.kid, Algorithm: string(jose.ES256), Use: "sig"}}})
	})
	s := httptest.NewServer(mux)
	t.Cleanup(s.Close)
	c, err := newReviewClients(&rest.Config{Host: s.URL})
	if err != nil {
		t.Fatal(err)
	}
	is.keys = newIssuerKeys(c.authentication)
	return is
}

// sign returns a token of claims signed by key under kid.
func sign(t *testing.T, key *ecdsa.PrivateKey, kid string, claims jwt.Claims) string {
	t.Helper()
	opts := (&jose.SignerOptions{}).WithType("JWT")
	if kid != "" {
		opts = opts.WithHeader("kid", kid)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: key}, opts)
	if err != nil {
		t.Fatal(err)
	}
	token, err := jwt.Signed(signer).Claims(claims).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return token
}

// TestIssuerKeys: what a token is, told by the issuer's keys alone.
func TestIssuerKeys(t *testing.T) {
	is := newIssuer(t)
	other, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	sa := jwt.Claims{Issuer: testIssuer, Subject: "system:serviceaccount:a:agent", Expiry: jwt.NewNumericDate(now.Add(time.Hour))}
	with := func(f func(*jwt.Claims)) jwt.Claims { c := sa; f(&c); return c }
	tests := []struct {
		name        string
		token       string
		want        tokenKind
		wantSubject string
	}{
		{"Signed", sign(t, is.key, is.kid, sa), tokenSigned, sa.Subject},
		{"SignedLegacy", sign(t, is.key, is.kid, with(func(c *jwt.Claims) { c.Issuer = legacyIssuer })), tokenSigned, sa.Subject},
		{"OtherKey", sign(t, other, is.kid, sa), tokenForged, ""},
		// A key rotated in since the keys were fetched, or a forged kid:
		// only a review can tell.
		{"UnknownKid", sign(t, other, "key-2", sa), tokenOpaque, ""},
		// Without a kid, every key is tried, as the API server tries them.
		{"NoKid", sign(t, is.key, "", sa), tokenSigned, sa.Subject},
		{"NoKidOtherKey", sign(t, other, "", sa), tokenOpaque, ""},
		{"Expired", sign(t, is.key, is.kid, with(func(c *jwt.Claims) { c.Expiry = jwt.NewNumericDate(now.Add(-time.Hour)) })), tokenForged, ""},
		{"ExpiredUnknownKid", sign(t, other, "key-2", with(func(c *jwt.Claims) { c.Expiry = jwt.NewNumericDate(now.Add(-time.Hour)) })), tokenForged, ""},
		{"NotYetValid", sign(t, is.key, is.kid, with(func(c *jwt.Claims) { c.NotBefore = jwt.NewNumericDate(now.Add(time.Hour)) })), tokenForged, ""},
		// The API server's audience (by default its issuer), or none (a
		// legacy token): its subject is known. Another audience (a token
		// given to a vault): only a review can tell, whatever its
		// signature.
		{"OurAudience", sign(t, is.key, is.kid, with(func(c *jwt.Claims) { c.Audience = jwt.Audience{"vault", testIssuer} })), tokenSigned, sa.Subject},
		{"OtherAudience", sign(t, is.key, is.kid, with(func(c *jwt.Claims) { c.Audience = jwt.Audience{"vault"} })), tokenOpaque, ""},
		{"OtherIssuer", sign(t, other, is.kid, with(func(c *jwt.Claims) { c.Issuer = "https://idp.example" })), tokenOpaque, ""},
		{"StaticToken", "31ada4fd-adec-460c-809a-9e56ceb75269", tokenOpaque, ""},
		{"BootstrapToken", "abcdef.0123456789abcdef", tokenOpaque, ""},
		{"ThreeDotsOfGarbage", "garbage.garbage.garbage", tokenOpaque, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kind, subject := is.keys.classify(t.Context(), tt.token)
			if kind != tt.want || subject != tt.wantSubject {
				t.Fatalf("classify = %v %q, want %v %q", kind, subject, tt.want, tt.wantSubject)
			}
		})
	}
}

// TestIssuerKeysFetched: the keys are fetched once, again after
// keysMaxAge, and for a key not among them at most every keysMinAge,
// however many tokens name one.
func TestIssuerKeysFetched(t *testing.T) {
	is := newIssuer(t)
	now := time.Now()
	is.keys.now = func() time.Time { return now }
	sa := jwt.Claims{Issuer: testIssuer, Subject: "system:serviceaccount:a:agent", Expiry: jwt.NewNumericDate(now.Add(10 * time.Hour))}
	good, forged := sign(t, is.key, is.kid, sa), sign(t, is.key, "rotated", sa)
	steps := []struct {
		after       time.Duration
		token       string
		n           int
		wantFetches int64
	}{
		{0, good, 10, 1},
		{0, forged, 100, 1},                    // Fetched just now.
		{keysMinAge, forged, 100, 2},           // Once more for the unknown key.
		{keysMinAge / 2, good, 10, 2},          // Known key: no fetch.
		{keysMaxAge, good, 10, 3},              // Too old.
		{keysMinAge / 2, forged, 100, 3},       // Not yet.
		{keysMinAge / 2, "not-a-jwt", 1000, 3}, // Opaque: none.
	}
	for i, s := range steps {
		now = now.Add(s.after)
		for range s.n {
			is.keys.classify(t.Context(), s.token)
		}
		if got := is.fetches.Load(); got != s.wantFetches {
			t.Fatalf("step %d: %d fetches, want %d", i, got, s.wantFetches)
		}
	}
}

// jwtClaims are the claims of a service-account token of sub of the test
// issuer, expiring at exp.
func jwtClaims(sub string, exp time.Time) jwt.Claims {
	return jwt.Claims{Issuer: testIssuer, Subject: sub, Expiry: jwt.NewNumericDate(exp)}
}

// mustKey returns a new signing key.
func mustKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}
