// Package door is the front door of podsapi's Kubernetes API: the
// listeners, who may call, and the pass-through to the real API server.
//
// A Door answers every request of a client-go informer, kubectl or a /pods
// poller whose kubeconfig points at podsapi. Requests that its Local side
// (kubeapi.Handler) claims, the node's own pods, are authenticated and
// authorized as the kubelet authorizes its own API: the bearer token with a
// TokenReview and the request with a SubjectAccessReview sent to the API
// server with podsapi's own credentials, as k8s.io/apiserver's webhook
// authenticator and delegating authorizer send them, with their answers
// cached (Auth; k8s.io/apiserver's token cache).
// Every other request is passed to the API server unchanged, with the
// caller's own Authorization header and nothing of podsapi's (PassThrough),
// so that the API server decides with the caller's own rights.
//
// Who the caller is, by how it came in:
//
//   - HTTPS (Server's TLS listener) with a bearer token: the user the
//     TokenReview names; local requests need a SubjectAccessReview allowing
//     one of the accesses Local names; passed-through requests carry the
//     token.
//   - HTTPS with a client certificate signed by the client CA and no token:
//     the user the certificate names (CN, groups O), authorized by a
//     SubjectAccessReview like a token's user; it cannot be passed through,
//     since podsapi cannot present the caller's certificate to the API
//     server and will not lend it its own rights (such requests are refused
//     401 with a Status that says so).
//   - The UNIX socket (Server's socket listener), from a peer that the
//     gRPC socket's access policy allows (root by default): local requests
//     are served without a token, as the gRPC socket serves them, in the
//     name of the node itself; passed-through requests carry the caller's
//     Authorization header if it sent one, and are otherwise anonymous to the
//     API server.
//   - Anything else (no credentials, a token the API server rejects, or a
//     token that cannot be verified because the API server is unreachable
//     and no decision is cached): 401 for local requests. Passed-through
//     requests are the API server's to answer.
package door
