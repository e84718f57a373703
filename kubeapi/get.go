package kubeapi

import "net/http"

// serveGet answers a get of one pod: its current version, whatever the
// request's resourceVersion (the current version is never older than one
// podsapi served).
func (h *Handler) serveGet(w http.ResponseWriter, r *http.Request, rt route) {
	f, ok := h.codecs.negotiate(r)
	if !ok {
		h.writeError(w, r, errNotAcceptable())
		return
	}
	if !h.pods.Synced() {
		h.writeError(w, r, errNotSynced(h.retryAfter))
		return
	}
	p, ok := h.find(rt.namespace, rt.name)
	if !ok {
		h.writeError(w, r, errPodNotFound(rt.name))
		return
	}
	b, err := h.object(f, p, p.Version)
	if err != nil {
		h.writeError(w, r, errInternal())
		return
	}
	w.Header().Set("Content-Type", f.mediaType)
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}
