package kubeapi

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podsapi/podsapi/store"
)

// serveList answers a list or watch of the node's pods.
func (h *Handler) serveList(w http.ResponseWriter, r *http.Request, rt route) {
	f, ok := h.codecs.negotiate(r)
	if !ok {
		h.writeError(w, r, errNotAcceptable())
		return
	}
	if !h.pods.Synced() {
		h.writeError(w, r, errNotSynced(h.retryAfter))
		return
	}
	q, err := parseQuery(r, rt.namespace)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	if q.opts.Watch {
		h.serveWatch(w, r, f, q)
		return
	}
	body, err := h.list(f, q)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	w.Header().Set("Content-Type", f.mediaType)
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}

// list returns the encoding in f of the page of pods q asks for.
//
// Every list is of the store's current version: a resourceVersion of "" or
// "0", or any with resourceVersionMatch NotOlderThan (or none), is answered
// with it; resourceVersionMatch Exact only with the current revision, else
// 410 Expired (podsapi keeps no older snapshot). A continue token holds the
// revision of its first page and the last pod it listed; it is answered while
// the store's revision is still that one, else 410 Expired, on which
// client-go's pager lists again without a limit.
func (h *Handler) list(f *format, q *query) ([]byte, error) {
	version, pods := h.pods.List()
	rv := h.pods.Revision(version)
	if q.opts.ResourceVersionMatch == metav1.ResourceVersionMatchExact && q.opts.ResourceVersion != rv {
		return nil, errExpired(q.opts.ResourceVersion)
	}
	var after *continueToken
	if q.opts.Continue != "" {
		tok, err := decodeContinue(q.opts.Continue)
		if err != nil {
			return nil, errBadRequest(err)
		}
		if tok.RV != rv {
			return nil, errContinueExpired()
		}
		after = tok
	}
	meta := metav1.ListMeta{ResourceVersion: rv}
	var items [][]byte
	var last *store.Pod
	for _, p := range pods {
		if after != nil && !after.before(p) {
			continue
		}
		if !q.matches(p) {
			continue
		}
		if q.opts.Limit > 0 && int64(len(items)) == q.opts.Limit {
			// Another pod matches beyond the page: the client continues
			// after the last one listed.
			meta.Continue = encodeContinue(continueToken{RV: rv, Namespace: last.Namespace, Name: last.Name, UID: string(last.UID)})
			break
		}
		b, err := h.item(f, p)
		if err != nil {
			return nil, errInternal()
		}
		items = append(items, b)
		last = p
	}
	body, err := podList(f, meta, items)
	if err != nil {
		return nil, errInternal()
	}
	return body, nil
}

// continueToken is what a continue parameter holds: the revision of the
// list's first page and the last pod listed (namespace, name, UID).
type continueToken struct {
	RV        string `json:"rv"`
	Namespace string `json:"ns"`
	Name      string `json:"name"`
	UID       string `json:"uid"`
}

// before reports whether p sorts after the token's last pod, as the store
// sorts pods (namespace, name, UID).
func (t *continueToken) before(p *store.Pod) bool {
	switch {
	case p.Namespace != t.Namespace:
		return p.Namespace > t.Namespace
	case p.Name != t.Name:
		return p.Name > t.Name
	}
	return string(p.UID) > t.UID
}

// errContinueInvalid is the reason a continue parameter does not parse.
var errContinueInvalid = errors.New("continue key is not valid")

func encodeContinue(t continueToken) string {
	b, _ := json.Marshal(t) // a struct of strings always encodes
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeContinue(s string) (*continueToken, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) > 4096 {
		return nil, errContinueInvalid
	}
	t := &continueToken{}
	if err := json.Unmarshal(b, t); err != nil || t.RV == "" {
		return nil, errContinueInvalid
	}
	return t, nil
}
