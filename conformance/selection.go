package conformance

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"

	corev1pb "github.com/podsapi/podsapi/gen/k8s.io/api/core/v1"
	podsv1alpha1 "github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1"
)

// selection is what the typed wire's ListPods and WatchPods requests may
// carry besides a field mask: selectors, and for a watch where to resume.
type selection struct {
	namespace, label, field string
	resumeFrom              string
}

func (s selection) String() string {
	var parts []string
	for _, f := range []struct{ name, v string }{
		{"namespace", s.namespace}, {"label_selector", s.label}, {"field_selector", s.field}, {"resume_from", s.resumeFrom},
	} {
		if f.v != "" {
			parts = append(parts, fmt.Sprintf("%s=%q", f.name, f.v))
		}
	}
	return strings.Join(parts, ", ")
}

// selectingClient is the typed client with a selection on every ListPods
// and WatchPods.
type selectingClient struct {
	typedClient
	sel selection
}

// selecting returns the suite's client with sel. Only the cases of the
// typed wire call it.
func (c *C) selecting(sel selection) selectingClient {
	t, ok := c.env.client.(typedClient)
	if !ok {
		c.Fatalf("internal: a selection on the %s wire", c.env.cfg.Wire)
	}
	return selectingClient{t, sel}
}

func (s selectingClient) listRevision(ctx context.Context, h http.Header) ([]*corev1pb.Pod, string, error) {
	resp, err := s.c.ListPods(ctx, withHeader(&podsv1alpha1.PodListRequest{
		Namespace: s.sel.namespace, LabelSelector: s.sel.label, FieldSelector: s.sel.field,
	}, h))
	if err != nil {
		return nil, "", err
	}
	return resp.Msg.GetPods(), resp.Msg.GetRevision(), nil
}

func (s selectingClient) list(ctx context.Context, h http.Header) ([]*corev1pb.Pod, error) {
	pods, _, err := s.listRevision(ctx, h)
	return pods, err
}

func (s selectingClient) watch(ctx context.Context, h http.Header) (podStream, error) {
	st, err := s.c.WatchPods(ctx, withHeader(&podsv1alpha1.PodWatchRequest{
		Namespace: s.sel.namespace, LabelSelector: s.sel.label, FieldSelector: s.sel.field, ResumeFrom: s.sel.resumeFrom,
	}, h))
	if err != nil {
		return nil, err
	}
	return typedStream{st}, nil
}

// listSelected calls ListPods with sel and h, paced and retried when rate
// limited, and returns the pods and the revision of the response.
func (c *C) listSelected(sel selection, h http.Header) ([]*corev1pb.Pod, string, error) {
	client := c.selecting(sel)
	var pods []*corev1pb.Pod
	var rev string
	err := retryRateLimited(c, describe("ListPods", h, sel.String()), func(ctx context.Context) error {
		var err error
		pods, rev, err = client.listRevision(ctx, h)
		return err
	})
	return pods, rev, err
}

// mustListSelected is listSelected that fails the case on an error.
func (c *C) mustListSelected(sel selection, h http.Header) ([]*corev1pb.Pod, string) {
	pods, rev, err := c.listSelected(sel, h)
	if err != nil {
		c.Failf(describe("ListPods", h, sel.String()), "OK", codeName(err))
	}
	return pods, rev
}

// watchSelected returns a WatchPods stream with sel and h.
func (c *C) watchSelected(sel selection, h http.Header) *watch {
	w := c.watchWith(c.selecting(sel), h)
	w.desc = describe("WatchPods", h, sel.String())
	return w
}

// reasonOf returns the reason of the google.rpc.ErrorInfo err carries, of
// whatever domain, or "".
func reasonOf(err error) string {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return ""
	}
	for _, d := range ce.Details() {
		v, derr := d.Value()
		if info, ok := v.(*errdetails.ErrorInfo); derr == nil && ok {
			return info.GetReason()
		}
	}
	return ""
}

// first returns the first event of a watch expected to end at once with an
// error, or to start with its snapshot. An implementation seen to send
// nothing on a stream before its sync marker fails the case at once: the
// wait would be in vain.
func (w *watch) first(what string) event {
	if msg, ok := w.c.env.defect(noSyncMarker); ok {
		w.c.Failf(w.desc, what, "not attempted: "+msg)
	}
	return w.next(w.c.recvTimeout())
}
