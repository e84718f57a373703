// Package e2e holds end-to-end tests that drive the server, assembled as
// podsapi-server assembles it (a store fed by the manifest source), over its
// socket with the clients agents use: the kubelet's own generated client
// (k8s.io/kubelet/pkg/apis/pods/v1alpha1), whose messages the server's
// kubelet wire uses too, and grpc-go and connect clients of the typed API.
package e2e
