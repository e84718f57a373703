package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podsapi/podsapi/client"
	"github.com/podsapi/podsapi/client/printer"
)

// runList runs podsctl list.
func runList(ctx context.Context, o *options, stdout, stderr io.Writer) error {
	c, err := o.dial()
	if err != nil {
		return err
	}
	defer c.Close()
	shown, err := c.List(ctx, append(o.selectors(), o.mask())...)
	if err != nil {
		return fmt.Errorf("list: %w", err)
	}
	if len(shown) == 0 && (o.format == printer.Table || o.format == printer.Wide) {
		fmt.Fprintln(stderr, "No resources found.")
		return nil
	}
	return printer.New(stdout, o.format, printer.WithNow(now)).PrintList(shown)
}

// runGet runs podsctl get UID or podsctl get NAMESPACE/NAME.
func runGet(ctx context.Context, o *options, ref string, stdout io.Writer) error {
	c, err := o.dial()
	if err != nil {
		return err
	}
	defer c.Close()
	uid, err := resolve(ctx, c, ref)
	if err != nil {
		return fmt.Errorf("get %s: %w", ref, err)
	}
	pod, err := c.Get(ctx, uid, o.mask())
	if err != nil {
		return fmt.Errorf("get %s: %w", ref, err)
	}
	return printer.New(stdout, o.format, printer.WithNow(now)).PrintPod(pod)
}

// runWatch runs podsctl watch until ctx is done or the watch fails.
func runWatch(ctx context.Context, o *options, stdout io.Writer) error {
	c, err := o.dial()
	if err != nil {
		return err
	}
	defer c.Close()
	w, err := c.Watch(ctx, append(o.selectors(), o.mask())...)
	if err != nil {
		return fmt.Errorf("watch: %w", err)
	}
	defer w.Close()
	p := printer.New(stdout, o.format, printer.WithNow(now))
	f := filter{shown: make(map[types.UID]*corev1.Pod)}
	// The snapshot is printed at the Synced event, sorted whatever the
	// server's order (a kubelet's is not podsapi's), with what changed
	// before the marker folded in (a kubelet may send such changes).
	snapshot := make(map[types.UID]*corev1.Pod)
	synced := false
	for {
		ev, err := w.Next()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("watch: %w", err)
		}
		ev, ok := f.event(ev)
		switch {
		case !ok:
			continue
		case !synced && ev.Type == client.Deleted:
			delete(snapshot, ev.Pod.UID)
			continue
		case !synced && ev.Pod != nil:
			snapshot[ev.Pod.UID] = ev.Pod
			continue
		case !synced && ev.Type == client.Synced:
			synced = true
			pods := slices.Collect(maps.Values(snapshot))
			sortPods(pods)
			for _, pod := range pods {
				if err := p.PrintEvent(client.Event{Type: client.Added, Pod: pod}); err != nil {
					return err
				}
			}
			snapshot = nil
		}
		if err := p.PrintEvent(ev); err != nil {
			return err
		}
	}
}

// sortPods sorts pods by namespace, name and UID, as podsapi lists them.
func sortPods(pods []*corev1.Pod) {
	slices.SortFunc(pods, func(a, b *corev1.Pod) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name), cmp.Compare(a.UID, b.UID))
	})
}

// identityOnly reports whether pod carries nothing but its namespace, name
// and UID.
func identityOnly(pod *corev1.Pod) bool {
	id := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID}}
	return equality.Semantic.DeepEqual(pod, id)
}

// filter gives DELETED events the last state shown when they carry only
// the pod's identity, as a kubelet's do. (The selectors are applied by the
// server, or by the client on a server without them.)
type filter struct {
	shown map[types.UID]*corev1.Pod // the last state shown of each pod
}

// event returns the event to print for ev, if any.
func (f *filter) event(ev client.Event) (client.Event, bool) {
	if ev.Pod == nil {
		return ev, true
	}
	uid := ev.Pod.UID
	last, was := f.shown[uid]
	if ev.Type == client.Deleted {
		delete(f.shown, uid)
		if was && identityOnly(ev.Pod) {
			ev.Pod = last
		}
		return ev, was
	}
	f.shown[uid] = ev.Pod
	return ev, true
}
