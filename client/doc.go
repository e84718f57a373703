// Package client is a Go client of the Kubelet Pods API.
//
// A Client speaks gRPC over h2c to the node's Pods API socket and returns
// pods as k8s.io/api *corev1.Pod values, decoded straight from the wire with
// k8s.io/api's own generated Unmarshal:
//
//	c, err := client.New("") // the standard socket path
//	pods, err := c.List(ctx, client.WithFields("metadata.name", "status.phase"))
//
// Watch streams pod changes, and a Cache keeps a local, indexed copy of the
// node's pods for agents, with event handlers, that survives server
// restarts.
//
// Errors keep their gRPC code (connect.CodeOf works on them) and wrap the
// sentinel errors of this package (ErrNotSynced, ErrRateLimited,
// ErrNotFound, ErrFellBehind) for errors.Is.
package client
