package kubeapi

import (
	"net/http"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podsapi/podsapi/store"
)

// serveGet answers a get of one object of res: its current version,
// whatever the request's resourceVersion (the current version is never
// older than one podsapi served), as the object, a PartialObjectMetadata
// or a Table of one row as the client asks.
func (h *Handler) serveGet(w http.ResponseWriter, r *http.Request, res *resource, rt route) {
	fm, ok := h.codecs.negotiate(r)
	if !ok {
		h.writeError(w, r, errNotAcceptable())
		return
	}
	if !res.reader.Synced() {
		h.writeError(w, r, errNotSynced(res, h.retryAfter))
		return
	}
	p, ok := res.find(rt.namespace, rt.name)
	if !ok {
		h.writeError(w, r, errNotFound(res, rt.name))
		return
	}
	var b []byte
	var err error
	switch fm.as {
	case asPartialList:
		h.writeError(w, r, errAList(res))
		return
	case asTable:
		b, err = h.tableOfOne(res, fm, r, p)
	default:
		if b, err = h.object(res, fm, p, p.Version); err != nil {
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

// tableOfOne returns the encoding in fm of the Table of the object p of
// res, with the table options of r.
func (h *Handler) tableOfOne(res *resource, fm form, r *http.Request, p *store.Pod) ([]byte, error) {
	opts, err := parseTableOptions(r)
	if err != nil {
		return nil, err
	}
	tr, err := h.tableRowOf(res, fm, opts, p, p.Version)
	if err != nil {
		return nil, errInternal()
	}
	b, err := encodeTable(res, fm, metav1.ListMeta{ResourceVersion: res.reader.Revision(p.Version)}, []tableRow{tr}, opts.NoHeaders, time.Now())
	if err != nil {
		return nil, errInternal()
	}
	return b, nil
}
