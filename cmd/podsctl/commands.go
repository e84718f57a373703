package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podsapi/podsapi/client/printer"
	podsv1alpha1 "github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1"
)

// runList runs podsctl list.
func runList(ctx context.Context, o *options, stdout, stderr io.Writer) error {
	c, err := o.dial()
	if err != nil {
		return err
	}
	defer c.Close()
	var (
		shown []*corev1.Pod
		ws    map[types.UID]*podsv1alpha1.PodWorkload
	)
	if o.wideWorkloads() {
		shown, ws, err = c.ListWorkloads(ctx, append(o.selectors(), o.mask())...)
	} else {
		shown, err = c.List(ctx, append(o.selectors(), o.mask())...)
	}
	if err != nil {
		return fmt.Errorf("list: %w", err)
	}
	if len(shown) == 0 && (o.format == printer.Table || o.format == printer.Wide) {
		fmt.Fprintln(stderr, "No resources found.")
		return nil
	}
	return o.newPrinter(stdout).PrintListWorkloads(shown, ws)
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
	pod, w, err := c.GetWorkload(ctx, uid, o.mask())
	if err != nil {
		return fmt.Errorf("get %s: %w", ref, err)
	}
	return o.newPrinter(stdout).PrintPodWorkload(pod, w)
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
