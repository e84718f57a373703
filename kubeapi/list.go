package kubeapi

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

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
	w.Header().Set("Content-Length", strconv.Itoa(body.size))
	w.WriteHeader(http.StatusOK)
	_ = body.writeTo(w)
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
func (h *Handler) list(f *format, q *query) (*body, error) {
	version, pods := h.pods.List()
	rv := h.pods.Revision(version)
	if q.opts.ResourceVersionMatch == metav1.ResourceVersionMatchExact && q.opts.ResourceVersion != rv {
		return nil, errExpired(q.opts.ResourceVersion)
	}
	var after *continueToken
	if q.opts.Continue != "" {
		tok, err := decodeContinue(q.opts.Continue)
		if err != nil {
			return nil, errBadRequest(fmt.Errorf("invalid continue token: %w", err))
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
		if after != nil && !after.precedes(p) {
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

// precedes reports whether the token's last pod sorts before p, as the store
// sorts pods (namespace, name, UID).
func (t *continueToken) precedes(p *store.Pod) bool {
	switch {
	case p.Namespace != t.Namespace:
		return p.Namespace > t.Namespace
	case p.Name != t.Name:
		return p.Name > t.Name
	}
	return string(p.UID) > t.UID
}

// maxContinue bounds the length of a continue parameter: a token of
// podsapi is short (a revision and a pod's namespace, name and UID).
const maxContinue = 2048

// errContinueInvalid is the reason a continue parameter does not parse.
var errContinueInvalid = errors.New("continue key is not valid")

func encodeContinue(t continueToken) string {
	b, _ := json.Marshal(t) // a struct of strings always encodes
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeContinue(s string) (*continueToken, error) {
	if len(s) > maxContinue {
		return nil, fmt.Errorf("%w: longer than %d bytes", errContinueInvalid, maxContinue)
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errContinueInvalid, err)
	}
	t := &continueToken{}
	if err := json.Unmarshal(b, t); err != nil {
		return nil, fmt.Errorf("%w: %w", errContinueInvalid, err)
	}
	if t.RV == "" {
		return nil, fmt.Errorf("%w: no resourceVersion", errContinueInvalid)
	}
	return t, nil
}
