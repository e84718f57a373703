package workload

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Sink takes the pods a pod source reads (source.Sink; the pod store
// implements it).
type Sink interface {
	Upsert(pod *corev1.Pod)
	Delete(uid types.UID)
	MarkSynced()
}

// Sink returns a Sink that shows the Resolver every pod written to next,
// before next takes it: the Resolver observes every pod and forgets every
// pod deleted, with no copy of the store.
func (r *Resolver) Sink(next Sink) Sink { return observed{r: r, next: next} }

type observed struct {
	r    *Resolver
	next Sink
}

func (o observed) Upsert(pod *corev1.Pod) {
	o.r.Observe(pod)
	o.next.Upsert(pod)
}

func (o observed) Delete(uid types.UID) {
	o.r.Forget(uid)
	o.next.Delete(uid)
}

func (o observed) MarkSynced() {
	o.r.markSynced()
	o.next.MarkSynced()
}
