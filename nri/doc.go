// Package nri observes the container runtime through NRI, the Node
// Resource Interface of containerd and CRI-O, as an external plugin on the
// runtime's NRI socket: it learns every pod sandbox and container the
// runtime runs (their IDs, the pod's UID, name, namespace and IPs, the
// containers' cgroups and PIDs) the moment the runtime runs them, before
// the kubelet reports them, and hands these facts to a Sink (the store)
// for FindPods.
//
// It is an observer, never a resource manager: NRI's registration carries
// only a plugin name and index, so this shows in what it subscribes to and
// what it answers. It subscribes to the events that do not hold a
// container's creation (RunPodSandbox, PostCreateContainer,
// PostStartContainer, RemoveContainer, StopPodSandbox, RemovePodSandbox)
// and the synchronisation at connection, never to CreateContainer,
// UpdateContainer or StopContainer, and every answer it gives is empty: no
// adjustment, no update, no eviction. The runtime bounds each of its calls
// by its plugin request timeout (2 s by default) and closes a plugin that
// misses it, so that a stalled observer never holds a container beyond it;
// the observer then connects again and resynchronises.
//
// What it keeps is bounded: a fact's strings are bounded in length (longer
// ones are refused, not truncated), the labels, annotations, environment
// and mounts the runtime sends are never kept, and the Sink bounds the
// bytes of the facts (store.WithRuntimeFacts, and the server's memory
// budget).
package nri
