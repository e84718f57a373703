package kubeapi

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podsapi/podsapi/store"
)

// serveList answers a list or watch of res.
func (h *Handler) serveList(w http.ResponseWriter, r *http.Request, res *resource, rt route) {
	fm, ok := h.codecs.negotiate(r)
	if !ok {
		h.writeError(w, r, errNotAcceptable())
		return
	}
	if !res.reader.Synced() {
		h.writeError(w, r, errNotSynced(res, h.retryAfter))
		return
	}
	q, err := parseQuery(r, res, rt.namespace)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	if rv := q.opts.ResourceVersion; !validRevision(rv) {
		if q.opts.Watch {
			h.writeError(w, r, errWatchRevision(rv))
		} else {
			h.writeError(w, r, errListRevision(rv))
		}
		return
	}
	var table *metav1.TableOptions
	if fm.as == asTable {
		if table, err = parseTableOptions(r); err != nil {
			h.writeError(w, r, err)
			return
		}
	}
	if q.opts.Watch {
		if fm.as == asPartialList {
			// The API server sends nothing on such a watch until it
			// ends: podsapi says why at once.
			h.writeError(w, r, errAList(res))
			return
		}
		h.serveWatch(w, r, fm, q, table)
		return
	}
	if fm.as == asPartial {
		h.writeError(w, r, errNotAList(res))
		return
	}
	var body *body
	if fm.as == asTable {
		body, err = h.table(fm, q, table)
	} else {
		body, err = h.list(fm, q)
	}
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	h.writeBody(w, fm, body)
}

// writeBody answers with body, indented when fm asks for it.
func (h *Handler) writeBody(w http.ResponseWriter, fm form, out *body) {
	if fm.pretty {
		var b bytes.Buffer
		if json.Indent(&b, bytes.TrimSuffix(out.bytes(), []byte("\n")), "", "  ") == nil {
			out = &body{}
			out.add(b.Bytes())
		}
	}
	w.Header().Set("Content-Type", fm.mediaType)
	w.Header().Set("Content-Length", strconv.Itoa(out.size))
	w.WriteHeader(http.StatusOK)
	_ = out.writeTo(w)
}

// validRevision reports whether rv is a resourceVersion a list or watch
// may carry: none, "0", one of podsapi's (store.WellFormedRevision, whether
// or not this server wrote it), or one of the API server's (a number,
// answered as the API server answers one it no longer holds).
func validRevision(rv string) bool {
	if rv == "" || store.WellFormedRevision(rv) {
		return true
	}
	_, err := strconv.ParseUint(rv, 10, 64)
	return err == nil
}

// page is the objects of the store's current version that a list selects.
type page struct {
	meta metav1.ListMeta
	pods []*store.Pod
}

// list returns the encoding in fm of the page of objects q asks for.
func (h *Handler) list(fm form, q *query) (*body, error) {
	pg, err := h.page(q)
	if err != nil {
		return nil, err
	}
	items := make([][]byte, 0, len(pg.pods))
	for _, p := range pg.pods {
		b, err := h.item(q.res, fm, p)
		if err != nil {
			return nil, errInternal()
		}
		items = append(items, b)
	}
	body, err := objectList(q.res, fm, pg.meta, items)
	if err != nil {
		return nil, errInternal()
	}
	return body, nil
}

// table returns the encoding in fm of the Table of the page of objects q
// asks for.
func (h *Handler) table(fm form, q *query, opts *metav1.TableOptions) (*body, error) {
	pg, err := h.page(q)
	if err != nil {
		return nil, err
	}
	rows := make([]tableRow, 0, len(pg.pods))
	for _, p := range pg.pods {
		tr, err := h.tableRowOf(q.res, fm, opts, p, p.Version)
		if err != nil {
			return nil, errInternal()
		}
		rows = append(rows, tr)
	}
	b, err := encodeTable(q.res, fm, pg.meta, rows, opts.NoHeaders, time.Now())
	if err != nil {
		return nil, errInternal()
	}
	body := &body{}
	body.add(b)
	return body, nil
}

// page returns the page of objects q asks for.
//
// Every list is of the store's current version: a resourceVersion of "" or
// "0", or any with resourceVersionMatch NotOlderThan (or none), is answered
// with it; resourceVersionMatch Exact only with the current revision, else
// 410 Expired (podsapi keeps no older snapshot). A continue token holds the
// revision of its first page and the last pod it listed; it is answered while
// the store's revision is still that one, else 410 Expired, on which
// client-go's pager lists again without a limit.
func (h *Handler) page(q *query) (*page, error) {
	version, pods := q.res.reader.List()
	rv := q.res.reader.Revision(version)
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
	pg := &page{meta: metav1.ListMeta{ResourceVersion: rv}}
	var last *store.Pod
	for _, p := range pods {
		if after != nil && !after.precedes(p) {
			continue
		}
		if !q.matches(p) {
			continue
		}
		if q.opts.Limit > 0 && int64(len(pg.pods)) == q.opts.Limit {
			// Another pod matches beyond the page: the client continues
			// after the last one listed.
			pg.meta.Continue = encodeContinue(continueToken{RV: rv, Namespace: last.Namespace, Name: last.Name, UID: string(last.UID)})
			break
		}
		pg.pods = append(pg.pods, p)
		last = p
	}
	return pg, nil
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
