package podstest

import (
	corev1 "k8s.io/api/core/v1"

	podsv1alpha1 "github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1"
	"github.com/podsapi/podsapi/store"
)

// Labelled returns a sample pod with the label tier and the phase given.
func Labelled(ns, name string, n int, tier string, phase corev1.PodPhase) *corev1.Pod {
	p := Pod(ns, name, n)
	p.Labels["tier"] = tier
	p.Status.Phase = phase
	return p
}

// SelectorPods are the pods of the selector tests, in List order: two of
// tier web, one of tier dns.
func SelectorPods() []*corev1.Pod {
	return []*corev1.Pod{
		Labelled("default", "web-1", 1, "web", corev1.PodRunning),
		Labelled("default", "web-2", 2, "web", corev1.PodPending),
		Labelled("kube-system", "dns-0", 3, "dns", corev1.PodRunning),
	}
}

// Step is one change of the store and the event a watcher of tier=web
// gets from it, if any.
type Step struct {
	Name   string
	Change func(st *store.Store)
	Type   podsv1alpha1.EventType // 0: no event
	Pod    *corev1.Pod            // the pod of the event
}

// MovingSteps move pods in and out of the selector tier=web, starting from
// SelectorPods.
func MovingSteps() []Step {
	pods := SelectorPods()
	web1, web2, dns := pods[0].DeepCopy(), pods[1].DeepCopy(), pods[2].DeepCopy()
	web1.Status.Phase = corev1.PodSucceeded
	web2Out := web2.DeepCopy()
	web2Out.Labels["tier"] = "cache"
	web2Again := web2Out.DeepCopy()
	web2Again.Status.Phase = corev1.PodRunning
	dnsIn := dns.DeepCopy()
	dnsIn.Labels["tier"] = "web"
	fresh := Labelled("other", "fresh", 9, "web", corev1.PodRunning)
	other := Labelled("other", "unrelated", 10, "db", corev1.PodRunning)
	upsert := func(p *corev1.Pod) func(*store.Store) { return func(st *store.Store) { st.Upsert(p) } }
	del := func(p *corev1.Pod) func(*store.Store) { return func(st *store.Store) { st.Delete(p.UID) } }
	return []Step{
		{"web-1 changes, still matching", upsert(web1), podsv1alpha1.EventType_EVENT_TYPE_MODIFIED, web1},
		{"web-2 stops matching", upsert(web2Out), podsv1alpha1.EventType_EVENT_TYPE_DELETED, web2Out},
		{"web-2 changes, not matching", upsert(web2Again), 0, nil},
		{"dns-0 starts matching", upsert(dnsIn), podsv1alpha1.EventType_EVENT_TYPE_ADDED, dnsIn},
		{"web-2 deleted, not matching", del(web2Again), 0, nil},
		{"an unrelated pod added", upsert(other), 0, nil},
		{"dns-0 deleted", del(dnsIn), podsv1alpha1.EventType_EVENT_TYPE_DELETED, dnsIn},
		{"a matching pod added", upsert(fresh), podsv1alpha1.EventType_EVENT_TYPE_ADDED, fresh},
		{"the unrelated pod deleted", del(other), 0, nil},
		{"web-1 deleted", del(web1), podsv1alpha1.EventType_EVENT_TYPE_DELETED, web1},
	}
}
