// Package workload resolves, on the node, the workload each pod of the node
// is part of: a Deployment (through its ReplicaSet), a StatefulSet, a
// DaemonSet, a CronJob (through its Job), a bare Job or ReplicaSet, another
// controller that owns the pod, the node of a static (mirror) pod, or none.
//
// A pod names only its immediate controller. The Resolver looks one level
// up only where that owner is a ReplicaSet or a Job, and only for the owners
// of the node's own pods: one metadata-only get (a PartialObjectMetadata,
// k8s.io/client-go/metadata) per owner it does not know yet, kept while a pod
// of the node references it and checked again every refresh interval. It
// never lists or watches a resource across the cluster, so its cost grows
// with the node, not with the cluster.
//
// Without an API server, or until it answers, the Resolver derives what the
// pod alone tells, and says so (Derived): a ReplicaSet named
// "<deployment>-<pod-template-hash>" whose pod carries that
// pod-template-hash label is a Deployment's, and a Job named
// "<cronjob>-<minutes>", where minutes is the 8 to 10 digits of a
// CronJob's scheduled time in minutes since the Unix epoch, is a CronJob's.
//
// With WithSlice, the same entries keep the node's slice for the front
// door's node view: the whole objects (NewObjectGetter) of every owner of
// the node's pods up the chain (Pod → ReplicaSet → Deployment, Pod → Job →
// CronJob, Pod → StatefulSet, Pod → DaemonSet) and of the namespaces that
// hold them, one get each, asked again every refresh interval, kept while a
// pod of the node holds them and through the API server's outages, and told
// to client-go event handlers (AddEventHandler) as an informer tells them:
// added when the first pod lands, updated within the refresh interval of a
// change, deleted when the last pod leaves.
package workload
