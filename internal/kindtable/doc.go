// Package kindtable computes what the Kubernetes API server's tables of
// namespaces and nodes show (k8s.io/kubernetes pkg/printers/internalversion
// of v1.37.2, printNamespace and printNode, with every column as the API
// server sends them): NAME, STATUS and AGE of a namespace; NAME, STATUS,
// ROLES, AGE and VERSION of a node and, at priority 1 (kubectl's -o wide),
// INTERNAL-IP, EXTERNAL-IP, OS-IMAGE, KERNEL-VERSION and CONTAINER-RUNTIME.
// The front door serves them as meta.k8s.io Tables, as internal/podtable's
// rows of pods.
package kindtable
