// Package kindtable computes what the Kubernetes API server's tables of
// the kinds other than pods show (k8s.io/kubernetes
// pkg/printers/internalversion of v1.37.2, with every column as the API
// server sends them): printNamespace (NAME, STATUS, AGE), printNode (NAME,
// STATUS, ROLES, AGE, VERSION and, at priority 1, kubectl's -o wide,
// INTERNAL-IP, EXTERNAL-IP, OS-IMAGE, KERNEL-VERSION, CONTAINER-RUNTIME),
// and the owner kinds' printReplicaSet, printDeployment, printStatefulSet,
// printDaemonSet, printJob and printCronJob (their columns, then the pod
// template's CONTAINERS and IMAGES and the SELECTOR at priority 1). One
// file per kind. The front door serves them as meta.k8s.io Tables, as
// internal/podtable's rows of pods.
package kindtable
