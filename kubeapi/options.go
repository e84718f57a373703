package kubeapi

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Option configures a Handler.
type Option func(*Handler)

// WithDiscovery has the handler answer the discovery documents (/api,
// /api/v1, /apis, /version) itself, listing only pods: for a front door with
// no upstream API server. By default discovery is not local (Local reports
// false), so that a door passes it through and clients discover every
// resource of the cluster.
func WithDiscovery() Option {
	return func(h *Handler) { h.discovery = true }
}

// WithVersion sets the version the local /version answers (its gitVersion,
// "v1.37.2"). By default it is the version of the Kubernetes API the handler
// was built with (from the module version of k8s.io/api).
func WithVersion(gitVersion string) Option {
	return func(h *Handler) { h.version = gitVersion }
}

// WithWatchQueue sets how many store events a watch may have waiting before
// it is ended (the client then resumes from its last resourceVersion). The
// default is 1024.
func WithWatchQueue(n int) Option {
	return func(h *Handler) { h.queue = max(n, 1) }
}

// WithBookmarkInterval sets how often a watch that allows bookmarks is sent
// one (the API server sends them about every minute). The default is one
// minute.
func WithBookmarkInterval(d time.Duration) Option {
	return func(h *Handler) { h.bookmarkEvery = d }
}

// WithWatchTimeout sets how long a watch that names no timeoutSeconds lasts
// before the handler ends it (the API server picks between 30 and 60
// minutes); a timeoutSeconds of the request is capped at it. The default is
// 30 minutes.
func WithWatchTimeout(d time.Duration) Option {
	return func(h *Handler) { h.watchTimeout = d }
}

// WithRetryAfter sets the Retry-After, in seconds, of the 503 answered
// before the store has synced. The default is 1.
func WithRetryAfter(seconds int) Option {
	return func(h *Handler) { h.retryAfter = max(seconds, 1) }
}

// WithWriteTimeout sets how long the writes of a watch's events (a batch of
// them, or a bookmark) may take before the watch is ended: a client that
// stops reading frees its watch, and the store its queue, after it. The
// deadline is set only while a write is pending and cleared once it
// completes, so that it never ends an idle watch. The default is 30
// seconds; 0 sets no deadline.
func WithWriteTimeout(d time.Duration) Option {
	return func(h *Handler) { h.writeTimeout = max(d, 0) }
}

// WithNamespaces has the handler answer the lists, gets and watches of
// namespaces from r (a kindstore.Namespaces holding every namespace of the
// cluster, fed by one watch of the API server), once r has synced: Local
// claims them then, so that agents' namespace informers cost the API
// server nothing more. By default namespaces are not local.
func WithNamespaces(r PodReader) Option {
	return WithResource(corev1.SchemeGroupVersion.WithResource("namespaces"), r)
}

// WithNode has the handler answer the gets of the node (/api/v1/nodes/<node>)
// and its lists and watches pinned to it (fieldSelector
// metadata.name=<node>) from r (a kindstore.Nodes holding the node, fed
// by one watch of it), once r has synced. By default the node is not
// local.
func WithNode(r PodReader) Option {
	return WithResource(corev1.SchemeGroupVersion.WithResource("nodes"), r)
}

// WithResource has the handler answer the lists, gets and watches of the
// resource gvr from r (a kindstore.Store of its kind), once r has synced,
// on the API server's paths (/apis/<group>/v1/[namespaces/<ns>/]<resource>[/<name>],
// /api/v1/... for the core group): Local claims them then. gvr is one of
// the owner kinds of pods (apps/v1 replicasets, deployments, statefulsets,
// daemonsets; batch/v1 jobs, cronjobs), or v1 namespaces or nodes (as
// WithNamespaces and WithNode); any other is a programming error, and
// panics. They are answered in every form pods are, with the field
// selectors the API server supports for the kind and label selectors. By
// default no such resource is local.
func WithResource(gvr schema.GroupVersionResource, r PodReader) Option {
	newResource, ok := kindResources[gvr]
	if !ok {
		panic("kubeapi: WithResource of a resource it does not serve: " + gvr.String())
	}
	return func(h *Handler) {
		res := newResource(r)
		h.resources[res.groupResource()] = res
	}
}

// WithNodeView has every list and watch hold the node's slice, as the
// stores hold it (the node view): a list or watch of pods is answered
// from the store without a spec.nodeName field selector, one of nodes
// without a metadata.name field selector, and a get of an object a store
// does not hold is local and answered 404 NotFound (an object outside the
// slice). By default the handler answers as the API server would (the full
// view): such lists and gets are not local.
func WithNodeView() Option {
	return func(h *Handler) { h.nodeView = true }
}
