package kubeapi

import (
	"net/http"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Handler serves the node's pods through the Kubernetes API's paths (an
// http.Handler). Create one with New.
type Handler struct {
	pods PodReader
	node string
	// resources are what lists, gets and watches read, by group and
	// resource: the pods, and the kinds of WithResource.
	resources map[schema.GroupResource]*resource
	// nodeView has lists hold what the stores hold (WithNodeView).
	nodeView      bool
	discovery     bool
	version       string
	queue         int
	bookmarkEvery time.Duration
	watchTimeout  time.Duration
	writeTimeout  time.Duration
	retryAfter    int
	watchEnded    func(*http.Request, WatchEnd)
	codecs        *codecs
	// kubelet caches the body of the kubelet's /pods for one store version.
	kubelet atomic.Pointer[kubeletBody]
	// encodes counts the pod encodings computed (Encodes).
	encodes atomic.Uint64
}

// New returns a Handler serving the pods of node from pods.
func New(pods PodReader, node string, opts ...Option) *Handler {
	h := &Handler{
		pods:          pods,
		node:          node,
		version:       defaultVersion(),
		queue:         1024,
		bookmarkEvery: time.Minute,
		watchTimeout:  30 * time.Minute,
		writeTimeout:  30 * time.Second,
		retryAfter:    1,
		codecs:        newCodecs(),
		resources:     map[schema.GroupResource]*resource{podsGR: podsResource(pods)},
	}
	for _, opt := range opts {
		opt(h)
	}
	return h
}

// ServeHTTP answers the requests Local reports local. Called for others (a
// door with no upstream may call it for every request), it answers a get of
// a pod the store does not hold with 404 NotFound, a list or watch of pods
// not pinned to the node with 503 ServiceUnavailable (only the API server
// can answer it; with WithNodeView it is the store's pods), and a path it does not serve (or of a kind it does not
// hold) with 404 NotFound ("the server could not find the requested
// resource"), as the API server answers a path it does not know.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rt := routeOf(r)
	res := h.resources[rt.groupResource()]
	if (rt.kind == kindGet || rt.kind == kindList) && res == nil {
		h.writeError(w, r, errNotServed())
		return
	}
	switch rt.kind {
	case kindKubeletPods:
		h.serveKubeletPods(w, r)
	case kindDiscovery:
		if !h.discovery {
			h.writeError(w, r, errNotServed())
			return
		}
		h.serveDiscovery(w, r, rt.path)
	case kindGet:
		if IsTrue(r.URL.Query(), "watch") {
			h.writeError(w, r, errNotServed())
			return
		}
		h.serveGet(w, r, res, rt)
	case kindList:
		fs := r.URL.Query().Get("fieldSelector")
		switch {
		case h.nodeView:
		case res.groupResource() == podsGR && !h.pinned(fs):
			h.writeError(w, r, errNotPinned(h.node))
			return
		case res.groupResource() == nodesGR && !requires(fs, h.node, "metadata.name"):
			h.writeError(w, r, errNotServed())
			return
		}
		h.serveList(w, r, res, rt)
	default:
		h.writeError(w, r, errNotServed())
	}
}
