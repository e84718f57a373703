// Package e2e holds end-to-end tests that run the podsapi-server binary as a
// child process and talk to it over its socket with clients that cannot share
// a process with it: the kubelet's own generated client
// (k8s.io/kubelet/pkg/apis/pods/v1alpha1) registers the same protobuf names as
// our gen/v1alpha1, and protobuf-go refuses both in one binary.
package e2e
