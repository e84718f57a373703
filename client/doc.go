// Package client is a Go client of the Kubelet Pods API.
//
// A Client speaks gRPC over h2c to the node's Pods API socket and returns
// pods as k8s.io/api *corev1.Pod values, decoded straight from the wire with
// k8s.io/api's own generated Unmarshal:
//
//	c, err := client.New("") // the standard socket path
//	pods, err := c.List(ctx, client.WithFields("metadata.name", "status.phase"))
//
// A Client speaks to either implementation of the API: podsapi's typed
// service kubelet.pods.v1alpha1.Pods, or the kubelet's own v1alpha1.Pods
// (pods as Kubernetes protobuf bytes), which kubelets with the PodsAPI
// feature gate serve. By default (WireAuto) it detects which one the socket
// serves with gRPC reflection, once, at no rate-limit cost; WithWire chooses
// one instead:
//
//	c, err := client.New("/var/lib/kubelet/pods-api/pods-api.sock", client.WithWire(client.WireKubelet))
//
// Either way it returns the same *corev1.Pod values, events and errors, and
// WithFields gives the same pods: on the kubelet's wire, which ignores field
// masks, the client applies the mask itself.
//
// Watch streams pod changes, and a Cache keeps a local, indexed copy of the
// node's pods for agents, with event handlers, that survives server
// restarts.
//
// Errors keep their gRPC code (connect.CodeOf works on them) and wrap the
// sentinel errors of this package (ErrNotSynced, ErrRateLimited,
// ErrNotFound, ErrFellBehind, ErrServerGone, ErrTooManyWatches,
// ErrPermissionDenied) for
// errors.Is, chosen by the reason of the server's google.rpc.ErrorInfo
// (package errinfo), or by the code when the server sends none. Errors the
// client raises itself wrap none.
package client
