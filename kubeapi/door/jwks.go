package door

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"k8s.io/client-go/rest"
)

// The paths where the API server serves its service-account issuer's
// discovery document and public keys (ServiceAccountIssuerDiscovery, on by
// default since 1.21; the ClusterRole system:service-account-issuer-discovery
// lets every service account read them).
const (
	discoveryPath = "/.well-known/openid-configuration"
	jwksPath      = "/openid/v1/jwks"
)

// legacyIssuer is the issuer of the service-account tokens of Secrets,
// signed by the same keys.
const legacyIssuer = "kubernetes/serviceaccount"

// How often the issuer's keys are fetched again: every keysMaxAge, and at
// most every keysMinAge when a token names a key not among them (a key
// rotated in), or after a fetch failed.
const (
	keysMaxAge = time.Hour
	keysMinAge = 30 * time.Second
)

// tokenAlgorithms are the signature algorithms of the tokens the API server
// issues (RS256 or ES256 by its key) and of those an issuer may use.
var tokenAlgorithms = []jose.SignatureAlgorithm{
	jose.RS256, jose.RS384, jose.RS512, jose.ES256, jose.ES384, jose.ES512, jose.PS256, jose.PS384, jose.PS512,
}

// tokenKind is what issuerKeys tells of a bearer token before any review.
type tokenKind int

const (
	// tokenOpaque is a token that is not a JWT of the cluster's issuer
	// (a static or bootstrap token, a webhook's, another issuer's JWT), a
	// JWT of the issuer for another audience or signed by a key the door
	// does not know, or any token while the issuer's keys are unknown:
	// only a TokenReview can tell whether it is good.
	tokenOpaque tokenKind = iota
	// tokenSigned is a JWT of the cluster's issuer, signed by one of its
	// keys and not expired: a TokenReview still decides (the token may be
	// revoked, its bound pod gone), and its subject is known already.
	tokenSigned
	// tokenForged is a JWT that names the cluster's issuer and a key of
	// its but is not signed by it, or has expired: the API server would
	// refuse it.
	tokenForged
)

// issuerKeys verifies service-account tokens as the API server verifies
// them, with the public keys of the cluster's issuer (its JWKS), so that a
// forged token costs a signature check instead of a TokenReview: garbage
// from a pod cannot spend the reviews of valid callers. The keys are
// fetched from the API server with podsapi's own credentials, lazily, by
// one request at a time; the others meanwhile take tokens as opaque.
type issuerKeys struct {
	client rest.Interface
	now    func() time.Time

	// fetching is held by the request that fetches the keys.
	fetching sync.Mutex

	mu      sync.Mutex
	issuer  string
	keys    *jose.JSONWebKeySet
	fetched time.Time // when the last fetch ended, well or not
}

func newIssuerKeys(client rest.Interface) *issuerKeys {
	return &issuerKeys{client: client, now: time.Now}
}

// classify tells what token is, and the subject of a signed one.
func (k *issuerKeys) classify(ctx context.Context, token string) (tokenKind, string) {
	if k == nil || strings.Count(token, ".") != 2 {
		return tokenOpaque, ""
	}
	tok, err := jwt.ParseSigned(token, tokenAlgorithms)
	if err != nil || len(tok.Headers) != 1 {
		return tokenOpaque, ""
	}
	var unverified jwt.Claims
	if err := tok.UnsafeClaimsWithoutVerification(&unverified); err != nil {
		return tokenOpaque, ""
	}
	issuer, keys := k.current(ctx, false)
	if keys == nil || (unverified.Issuer != issuer && unverified.Issuer != legacyIssuer) {
		return tokenOpaque, ""
	}
	// The cheap claims first, before a signature is checked or a budget
	// charged. A token of another audience (one given to a vault, an
	// STS) is not for the API server unless its --api-audiences say so,
	// which only a review tells: opaque, within its address's budget,
	// never its subject's, so that whoever it was given to cannot spend
	// its subject's reviews. A token without an audience is for the API
	// server's own, as the API server takes it (a legacy token).
	if len(unverified.Audience) > 0 && !unverified.Audience.Contains(issuer) {
		return tokenOpaque, ""
	}
	// Expired, or not yet valid: the API server refuses it, signed or not.
	if err := unverified.ValidateWithLeeway(jwt.Expected{Time: k.now()}, jwt.DefaultLeeway); err != nil {
		return tokenForged, ""
	}
	kid := tok.Headers[0].KeyID
	// A token without a key ID is tried with every key, as the API server
	// tries it.
	found := keys.Keys
	if kid != "" {
		if found = keys.Key(kid); len(found) == 0 {
			// A key rotated in since the last fetch, or a forged kid:
			// fetched again at most every keysMinAge.
			if _, keys = k.current(ctx, true); keys != nil {
				found = keys.Key(kid)
			}
		}
	}
	for _, key := range found {
		var verified jwt.Claims
		if err := tok.Claims(key.Public().Key, &verified); err == nil {
			return tokenSigned, verified.Subject
		}
	}
	if kid == "" || len(found) == 0 {
		// No key of the issuer's that the door knows is named: one rotated
		// in that it has not fetched yet (the fetch waits keysMinAge, or
		// failed) would make a valid token of it, which the API server
		// accepts: only a review tells, within the address's budget.
		return tokenOpaque, ""
	}
	// The key named is the issuer's, and did not sign it.
	return tokenForged, ""
}

// current returns the issuer and its keys, fetching them when they are
// older than keysMaxAge (or keysMinAge, with stale) and no other request
// fetches them now; nil keys while none could be fetched.
func (k *issuerKeys) current(ctx context.Context, stale bool) (string, *jose.JSONWebKeySet) {
	k.mu.Lock()
	age := k.now().Sub(k.fetched)
	issuer, keys := k.issuer, k.keys
	k.mu.Unlock()
	due := age >= keysMaxAge || (age >= keysMinAge && (stale || keys == nil))
	if !due || !k.fetching.TryLock() {
		return issuer, keys
	}
	defer k.fetching.Unlock()
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), DefaultReviewTimeout)
	defer cancel()
	newIssuer, newKeys, err := k.fetch(fctx)
	k.mu.Lock()
	defer k.mu.Unlock()
	k.fetched = k.now()
	if err == nil {
		k.issuer, k.keys = newIssuer, newKeys
	}
	return k.issuer, k.keys
}

// fetch reads the issuer from the API server's discovery document and its
// keys from its JWKS.
func (k *issuerKeys) fetch(ctx context.Context) (string, *jose.JSONWebKeySet, error) {
	var discovery struct {
		Issuer string `json:"issuer"`
	}
	if err := k.get(ctx, discoveryPath, &discovery); err != nil {
		return "", nil, err
	}
	if discovery.Issuer == "" {
		return "", nil, errors.New("the API server's issuer discovery names no issuer")
	}
	var keys jose.JSONWebKeySet
	if err := k.get(ctx, jwksPath, &keys); err != nil {
		return "", nil, err
	}
	return discovery.Issuer, &keys, nil
}

// get reads the JSON document at path of the API server into out.
func (k *issuerKeys) get(ctx context.Context, path string, out any) error {
	body, err := k.client.Get().AbsPath(path).DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("GET %s: %w", path, err)
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("GET %s: %w", path, err)
	}
	return nil
}
