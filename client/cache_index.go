package client

import (
	"cmp"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// index holds the cache's pods and their indexes. It is not safe for
// concurrent use; the Cache guards it.
type index struct {
	pods   map[types.UID]*corev1.Pod
	byName map[types.NamespacedName]types.UID
	byIP   map[string]map[types.UID]struct{}
}

// newIndex returns an empty index.
func newIndex() *index {
	return &index{
		pods:   make(map[types.UID]*corev1.Pod),
		byName: make(map[types.NamespacedName]types.UID),
		byIP:   make(map[string]map[types.UID]struct{}),
	}
}

// set adds pod, or replaces the pod with the same UID.
func (x *index) set(pod *corev1.Pod) {
	x.remove(pod.UID)
	x.pods[pod.UID] = pod
	x.byName[types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}] = pod.UID
	for _, ip := range podIPs(pod) {
		uids := x.byIP[ip]
		if uids == nil {
			uids = make(map[types.UID]struct{})
			x.byIP[ip] = uids
		}
		uids[pod.UID] = struct{}{}
	}
}

// remove removes the pod with the given UID, if any.
func (x *index) remove(uid types.UID) {
	old, ok := x.pods[uid]
	if !ok {
		return
	}
	delete(x.pods, uid)
	key := types.NamespacedName{Namespace: old.Namespace, Name: old.Name}
	if x.byName[key] == uid {
		delete(x.byName, key)
	}
	for _, ip := range podIPs(old) {
		delete(x.byIP[ip], uid)
		if len(x.byIP[ip]) == 0 {
			delete(x.byIP, ip)
		}
	}
}

// podIPs returns the IPs of pod: status.podIPs, and status.podIP when
// podIPs is empty (a field mask may select only podIP).
func podIPs(pod *corev1.Pod) []string {
	var ips []string
	for _, ip := range pod.Status.PodIPs {
		if ip.IP != "" {
			ips = append(ips, ip.IP)
		}
	}
	if len(ips) == 0 && pod.Status.PodIP != "" {
		ips = append(ips, pod.Status.PodIP)
	}
	return ips
}

// sortPods sorts pods by namespace, name and UID, as the server lists them.
func sortPods(pods []*corev1.Pod) {
	slices.SortFunc(pods, func(a, b *corev1.Pod) int {
		return cmp.Or(
			cmp.Compare(a.Namespace, b.Namespace),
			cmp.Compare(a.Name, b.Name),
			cmp.Compare(a.UID, b.UID),
		)
	})
}
