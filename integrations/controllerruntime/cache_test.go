package controllerruntime_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/podsapi/podsapi/integrations/harness"
	"github.com/podsapi/podsapi/test/kubetest"
)

// TestCache runs controller-runtime's cache of the node's pods, as a
// node-local controller configures it (cache.Options.ByObject with the
// spec.nodeName field selector; a kubeconfig), twice at once: directly
// against the API server and through podsapi's front door. Each runs its
// typed informer (*corev1.Pod) and its metadata-only one
// (metav1.PartialObjectMetadata of the Pod kind, as builder.OnlyMetadata
// makes it). Each informer must sync with the node's pods, then deliver
// every change (add, update, delete) of the node's pods and none of
// another node's, and the caches must hold the same objects both ways.
//
// Through the door, the metadata-only informer fails today: the door
// answers a request for the PartialObjectMetadata form
// (Accept: …;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1) with whole
// Pods, which the metadata client does not take: its watch ends at the
// first event with "unable to decode watch event: no kind \"Pod\" is
// registered for version \"v1\"", the informer relists, and the changes in
// between are lost (door/metadata/update and delete fail). The front
// door's issue; branch forms fixes the door.
//
// The test also measures what the caches' start costs the API server each
// way (logged), and fails if the door's cost it any pod list or watch.
func TestCache(t *testing.T) {
	ctrllog.SetLogger(testr.New(t)) // controller-runtime's own logs, in the test's.
	cluster := harness.StartCluster(t)
	pa := cluster.StartPodsapi(t, "node-1")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const ns = "apps"
	cluster.CreatePod(t, harness.Pod(ns, "before", pa.Node))
	cluster.CreatePod(t, harness.Pod(ns, "other-node", "node-2"))
	agent := cluster.Agent(t, "controllers", "node-controller", harness.PodReader)

	// The door's caches first, then the direct ones, so that what each
	// costs the API server is measured apart.
	ways := []string{"direct", "door"}
	forms := []string{"typed", "metadata"}
	runs := map[string]*run{}
	cost := map[string]string{}
	for _, way := range []string{"door", "direct"} {
		before, doorBefore := cluster.APIServer(t, "pods"), pa.Door(t)
		kctx := map[string]string{"direct": harness.ContextDirect, "door": harness.ContextPodsapi}[way]
		runs[way] = startCache(ctx, t, agent.Kubeconfig(t, pa, kctx), pa.Node)
		for _, form := range forms {
			_ = runs[way].waitSynced(form) // Checked below.
		}
		after := cluster.APIServer(t, "pods")
		cost[way] = fmt.Sprintf("API server: pod watches opened %v, pod lists %v", after.WatchesOpen-before.WatchesOpen, after.Requests["LIST"]-before.Requests["LIST"])
		if way == "door" {
			cost[way] += "; " + pa.Door(t).Since(doorBefore)
		}
		label := map[string]string{"direct": "directly", "door": "through podsapi's front door"}[way]
		harness.Record(t, "controller-runtime v0.25.3 cache (typed and metadata-only pod informers)", label, cost[way])
		if way == "door" && (after.WatchesOpen > before.WatchesOpen || after.Requests["LIST"] > before.Requests["LIST"]) {
			t.Errorf("through the door, the caches cost the API server %s, want none", cost[way])
		}
	}
	synced := map[string]bool{}
	for _, way := range ways {
		for _, form := range forms {
			t.Run(way+"/"+form+"/synced", func(t *testing.T) {
				r := runs[way]
				if err := r.waitSynced(form); err != nil {
					t.Fatal(err)
				}
				synced[way+"/"+form] = true
				if got := r.events[form].next(t); got != "add "+ns+"/before" {
					t.Fatalf("first event %q, want the node's pod added", got)
				}
			})
		}
	}

	// A delete with a grace period of 0 is a MODIFIED event (the deletion
	// timestamp set) and a DELETED one: both are expected.
	changes := []struct {
		name   string
		change func()
		want   []string
	}{
		{"add", func() { cluster.CreatePod(t, harness.Pod(ns, "added", pa.Node)) }, []string{"add " + ns + "/added"}},
		{"another node's add", func() { cluster.CreatePod(t, harness.Pod(ns, "added-elsewhere", "node-2")) }, nil},
		{"update", func() {
			cluster.UpdatePod(t, ns, "added", func(p *corev1.Pod) { p.Labels["tier"] = "gold" })
		}, []string{"update " + ns + "/added tier=gold"}},
		{"delete", func() { cluster.DeletePod(t, ns, "added") }, []string{"update " + ns + "/added tier=gold deleting", "delete " + ns + "/added"}},
	}
	for _, c := range changes {
		c.change()
		if c.want == nil {
			continue // The next change's event must come first.
		}
		for _, way := range ways {
			for _, form := range forms {
				t.Run(way+"/"+form+"/"+c.name, func(t *testing.T) {
					if !synced[way+"/"+form] {
						t.Skip("not synced")
					}
					for _, want := range c.want {
						if got := runs[way].events[form].next(t); got != want {
							t.Fatalf("event %q, want %q (all events: %q)", got, want, runs[way].events[form].all())
						}
					}
				})
			}
		}
	}

	t.Run("same cache contents", func(t *testing.T) {
		for _, form := range forms {
			direct, door := runs["direct"].contents(ctx, t, form), runs["door"].contents(ctx, t, form)
			if !synced["door/"+form] {
				continue
			}
			if !slices.Equal(direct, door) {
				t.Errorf("%s: direct %v, through the door %v", form, direct, door)
			}
		}
	})
	doorCounts := pa.Door(t)
	t.Logf("the door's requests (route, verb): answered %v, in flight %v", doorCounts.Answered, doorCounts.InFlight)
	for _, way := range ways {
		for _, form := range forms {
			t.Logf("%s/%s events: %q", way, form, runs[way].events[form].all())
		}
	}
}

// run is a controller-runtime cache and the events of its two informers.
type run struct {
	cache  cache.Cache
	inf    map[string]toolscache.SharedIndexInformer
	events map[string]*recorder
	errs   chan error
}

// startCache starts a cache of the node's pods from the kubeconfig, with
// both informers (startRun).
func startCache(ctx context.Context, t *testing.T, kubeconfig, node string) *run {
	t.Helper()
	c := newCache(t, kubeconfig, cache.Options{
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}: {Field: fields.OneTermEqualSelector("spec.nodeName", node)},
		},
	})
	return startRun(ctx, t, c, map[string]client.Object{"typed": &corev1.Pod{}, "metadata": podMetadata()})
}

// newCache returns a controller-runtime cache of opts, with client-go's
// scheme, reading the API server of the kubeconfig.
func newCache(t *testing.T, kubeconfig string, opts cache.Options) cache.Cache {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig) // What --kubeconfig does in controller-runtime's config.GetConfig.
	if err != nil {
		t.Fatal(err)
	}
	opts.Scheme = runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(opts.Scheme); err != nil {
		t.Fatal(err)
	}
	c, err := cache.New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// startRun gets an informer of c for each form's object, with a recorder
// of its events, and starts c; it stops c when ctx ends and the test ends.
func startRun(ctx context.Context, t *testing.T, c cache.Cache, forms map[string]client.Object) *run {
	t.Helper()
	r := &run{cache: c, inf: map[string]toolscache.SharedIndexInformer{}, events: map[string]*recorder{}, errs: make(chan error, 1)}
	for form, obj := range forms {
		inf, err := c.GetInformer(ctx, obj, cache.BlockUntilSynced(false))
		if err != nil {
			t.Fatal(err)
		}
		rec := newRecorder()
		if _, err := inf.AddEventHandler(rec); err != nil {
			t.Fatal(err)
		}
		r.inf[form] = inf.(toolscache.SharedIndexInformer)
		r.events[form] = rec
	}
	cctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		r.errs <- c.Start(cctx)
	}()
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	return r
}

// podMetadata is the metadata-only form of a pod, as builder.OnlyMetadata
// asks for it.
func podMetadata() *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Pod"))
	return m
}

// waitSynced waits until the form's informer has synced, within
// kubetest.Timeout.
func (r *run) waitSynced(form string) error {
	ctx, cancel := context.WithTimeout(context.Background(), kubetest.Timeout)
	defer cancel()
	if !toolscache.WaitForCacheSync(ctx.Done(), r.inf[form].HasSynced) {
		return fmt.Errorf("the %s informer did not sync within %v (events so far: %v)", form, kubetest.Timeout, r.events[form].all())
	}
	return nil
}

// contents lists the cache's pods of the form: namespace/name and UID
// each, sorted. Resource versions differ by design: the door's are its
// own (docs/kubeapi.md).
func (r *run) contents(ctx context.Context, t *testing.T, form string) []string {
	t.Helper()
	var out []string
	add := func(o metav1.Object) {
		out = append(out, fmt.Sprintf("%s/%s %s", o.GetNamespace(), o.GetName(), o.GetUID()))
	}
	if form == "typed" {
		var list corev1.PodList
		if err := r.cache.List(ctx, &list); err != nil {
			t.Fatal(err)
		}
		for i := range list.Items {
			add(&list.Items[i])
		}
	} else {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("PodList"))
		if err := r.cache.List(ctx, list); err != nil {
			t.Fatal(err)
		}
		for i := range list.Items {
			add(&list.Items[i])
		}
	}
	slices.Sort(out)
	return out
}

// recorder is an informer's event handler that queues its events as
// "add NS/NAME", "update NS/NAME LABELS [deleting]" (see extraLabels)
// and "delete NS/NAME".
type recorder struct {
	mu     sync.Mutex
	seen   []string
	events chan string
}

func newRecorder() *recorder { return &recorder{events: make(chan string, 1024)} }

func (r *recorder) record(s string) {
	r.mu.Lock()
	r.seen = append(r.seen, s)
	r.mu.Unlock()
	select {
	case r.events <- s:
	default: // The test fails on the events it reads first.
	}
}

func name(obj any) string {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	o, ok := obj.(metav1.Object)
	if !ok {
		return fmt.Sprintf("%T", obj)
	}
	return o.GetNamespace() + "/" + o.GetName()
}

// extraLabels returns the object's labels other than app and the API
// server's own label of a namespace (kubernetes.io/metadata.name), and
// "deleting" when its deletion timestamp is set.
func extraLabels(obj any) string {
	o, ok := obj.(metav1.Object)
	if !ok {
		return ""
	}
	var l []string
	for k, v := range o.GetLabels() {
		if k != "app" && k != corev1.LabelMetadataName {
			l = append(l, k+"="+v)
		}
	}
	slices.Sort(l)
	s := strings.Join(l, ",")
	if o.GetDeletionTimestamp() != nil {
		s += " deleting"
	}
	return s
}

// OnAdd records an add.
func (r *recorder) OnAdd(obj any, _ bool) { r.record("add " + name(obj)) }

// OnUpdate records an update.
func (r *recorder) OnUpdate(_, obj any) {
	r.record(strings.Join(strings.Fields("update "+name(obj)+" "+extraLabels(obj)), " "))
}

// OnDelete records a delete.
func (r *recorder) OnDelete(obj any) { r.record("delete " + name(obj)) }

// next returns the next event, within kubetest.Timeout.
func (r *recorder) next(t *testing.T) string {
	t.Helper()
	select {
	case e := <-r.events:
		return e
	case <-time.After(kubetest.Timeout):
		t.Fatalf("no event within %v (seen: %v)", kubetest.Timeout, r.all())
		return ""
	}
}

func (r *recorder) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.seen)
}
