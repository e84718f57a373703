package kubeapi

import (
	"net/http"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podsapi/podsapi/store"
)

// serveGet answers a get of one pod: its current version, whatever the
// request's resourceVersion (the current version is never older than one
// podsapi served), as a pod, a PartialObjectMetadata or a Table of one row
// as the client asks.
func (h *Handler) serveGet(w http.ResponseWriter, r *http.Request, rt route) {
	fm, ok := h.codecs.negotiate(r)
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
	var b []byte
	var err error
	switch fm.as {
	case asPartialList:
		h.writeError(w, r, errAList())
		return
	case asTable:
		b, err = h.tableOfOne(fm, r, p)
	default:
		if b, err = h.object(fm, p, p.Version); err != nil {
			err = errInternal()
		}
	}
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	body := &body{}
	body.add(b)
	h.writeBody(w, fm, body)
}

// tableOfOne returns the encoding in fm of the Table of the pod p, with the
// table options of r.
func (h *Handler) tableOfOne(fm form, r *http.Request, p *store.Pod) ([]byte, error) {
	opts, err := parseTableOptions(r)
	if err != nil {
		return nil, err
	}
	tr, err := h.tableRowOf(fm, opts, p, p.Version)
	if err != nil {
		return nil, errInternal()
	}
	b, err := encodeTable(fm, metav1.ListMeta{ResourceVersion: h.pods.Revision(p.Version)}, []tableRow{tr}, opts.NoHeaders, time.Now())
	if err != nil {
		return nil, errInternal()
	}
	return b, nil
}
