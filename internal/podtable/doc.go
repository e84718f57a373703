// Package podtable computes what the Kubernetes API server's pod table
// shows of a pod (k8s.io/kubernetes pkg/printers/internalversion, printPod
// of v1.37.2): the columns NAME, READY, STATUS, RESTARTS and AGE, and, at
// priority 1 (kubectl's -o wide), IP, NODE, NOMINATED NODE and READINESS
// GATES. The front door serves it as a meta.k8s.io Table and podsctl
// prints it.
package podtable
