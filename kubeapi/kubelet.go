package kubeapi

import (
	"bytes"
	"net/http"

	"github.com/podsapi/podsapi/store"
)

// kubeletBody is the body of the kubelet's /pods for one store version.
type kubeletBody struct {
	version uint64
	body    []byte
}

// serveKubeletPods answers the kubelet's GET /pods: a v1.PodList of every
// pod of the node in the kubelet's JSON (its items with neither kind nor
// apiVersion, the pods as their source gave them: the kubelet's UIDs and
// resourceVersions). The body is encoded once per store version, from the
// pods' own cached encodings, and shared by every poll.
func (h *Handler) serveKubeletPods(w http.ResponseWriter, r *http.Request) {
	if !h.pods.Synced() {
		h.writeError(w, r, errNotSynced(h.resources[podsGR], h.retryAfter))
		return
	}
	version, pods := h.pods.List()
	kb := h.kubelet.Load()
	if kb == nil || kb.version != version {
		body, err := h.kubeletList(pods)
		if err != nil {
			h.writeError(w, r, errInternal())
			return
		}
		kb = &kubeletBody{version: version, body: body}
		h.kubelet.Store(kb)
	}
	w.Header().Set("Content-Type", mediaJSON)
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(kb.body)
}

// kubeletList returns the kubelet's encoding of the PodList of pods.
func (h *Handler) kubeletList(pods []*store.Pod) ([]byte, error) {
	f := h.codecs.json
	if len(pods) == 0 {
		// The kubelet encodes a PodList of no pods with "items":null.
		return []byte(`{"kind":"PodList","apiVersion":"v1","metadata":{},"items":null}` + "\n"), nil
	}
	var items [][]byte
	for _, p := range pods {
		item, err := p.View("kubeapi/kubelet", func(raw []byte) ([]byte, error) {
			h.encodes.Add(1)
			pod, _, err := decodeStored(raw)
			if err != nil {
				return nil, err
			}
			var out bytes.Buffer
			if err := f.plain.Encode(pod, &out); err != nil {
				return nil, err
			}
			return bytes.TrimSuffix(out.Bytes(), []byte("\n")), nil
		})
		if err != nil {
			return nil, err
		}
		items = append(items, item)
	}
	b := &body{}
	b.add([]byte(`{"kind":"PodList","apiVersion":"v1","metadata":{},"items":[`))
	for i, it := range items {
		if i > 0 {
			b.add(comma)
		}
		b.add(it)
	}
	b.add(listEnd)
	return b.bytes(), nil
}
