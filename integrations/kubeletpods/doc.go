// Package kubeletpods runs a consumer of the kubelet's own Pods API
// (KEP-4188): the kubelet's published gRPC client,
// k8s.io/kubelet/pkg/apis/pods/v1alpha1 v0.37.2, used as the KEP and
// upstream's node e2e tests use it (grpc-go over the UNIX socket, pods as
// the bytes of v1.Pod's protobuf encoding), against podsapi's socket on a
// node whose kubelet has no Pods API (podsapi with --source=apiserver).
// Inspektor Gadget, the API's named consumer, is not served by the module
// proxy here (403 for github.com/inspektor-gadget/inspektor-gadget). The
// package has tests only.
package kubeletpods
