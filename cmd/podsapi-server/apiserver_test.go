package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"

	"github.com/podsapi/podsapi/errinfo"
	v1 "github.com/podsapi/podsapi/gen/k8s.io/api/core/v1"
	podsv1alpha1 "github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1"
	"github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1/podsv1alpha1connect"
	"github.com/podsapi/podsapi/test/kubetest"
	"github.com/podsapi/podsapi/test/podstest"
)

// The end-to-end test of --source=apiserver: a real kube-apiserver and etcd
// (test/kubetest), podsapi-server's Run with a least-privilege
// kubeconfig that reaches the API server through a loopback proxy the test
// can cut, and a WatchPods client over the socket whose stream is replayed
// and checked event by event.

const (
	e2eNode      = "node-a"
	e2eOtherNode = "node-b"
	e2eNamespace = "e2e"
	e2eReader    = "podsapi-reader" // Allowed get, list and watch on pods only.
	e2eNobody    = "nobody"         // Allowed nothing.
	staticUID    = "0123456789abcdef0123456789abcdef"

	// e2eTimeout bounds each wait of the test for the server: a reflector
	// retrying after an outage waits up to twice its backoff.
	e2eTimeout = 90 * time.Second
)

func TestAPIServerSource(t *testing.T) {
	cp := kubetest.Start(t, e2eReader, e2eNobody)
	ctx := t.Context()
	admin := cp.Admin
	grantPodReader(t, cp)
	mustCreate(t, admin, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e2eNamespace}})
	for _, p := range []*corev1.Pod{
		newPod("a1", e2eNode, nil), newPod("a2", e2eNode, nil), newPod("b1", e2eOtherNode, nil),
		newPod("static-node-a", e2eNode, map[string]string{corev1.MirrorPodAnnotationKey: staticUID}),
	} {
		mustCreate(t, admin, p)
	}

	// The API server starts unreachable: the server answers
	// FAILED_PRECONDITION and does not exit.
	proxy := kubetest.NewProxy(t, cp.Host())
	proxy.Cut()
	sock := podstest.SocketPath(t)
	conn, logs := runServing(t, sock, false, "--source", "apiserver", "--node-name", e2eNode, "--log-level", "debug",
		"--kubeconfig", cp.Kubeconfig(t, e2eReader, proxy.Addr()))
	client := podstest.ConnectClient(t, sock)
	waitLog(t, logs, "API server unavailable: not synced yet")
	if _, err := client.ListPods(ctx, connect.NewRequest(&podsv1alpha1.PodListRequest{})); connect.CodeOf(err) != connect.CodeFailedPrecondition || errinfo.Reason(err) != errinfo.NotSynced {
		t.Fatalf("ListPods before the first list = %v (reason %q), want FAILED_PRECONDITION %s", err, errinfo.Reason(err), errinfo.NotSynced)
	}
	proxy.Restore(t)
	pods := waitList(t, conn, logs, client)
	checkNodePods(t, admin, pods)
	if p := findPod(pods, "static-node-a"); p == nil || p.GetMetadata().GetUid() != staticUID {
		t.Errorf("the mirror pod is served as %v, want UID %s (its %s annotation)", p.GetMetadata(), staticUID, corev1.MirrorPodAnnotationKey)
	}

	w := watch(t, client, func(name string) { mustCreate(t, admin, newPod(name, e2eNode, nil)) })
	t.Logf("watch snapshot: %d pods", len(w.pods))

	// Live changes, and the time each takes from the API server's answer
	// to the event on the socket.
	w.expect(t, "ADDED a3", func() { mustCreate(t, admin, newPod("a3", e2eNode, nil)) }, ev(added, "a3"))
	mustCreate(t, admin, newPod("b2", e2eOtherNode, nil)) // Never appears; the sentinels prove it.
	w.expect(t, "MODIFIED a1 (status subresource)", func() { setPhase(t, admin, "a1", corev1.PodRunning) }, ev(modified, "a1"))
	// A pod bound to a node is deleted in two steps even with a grace
	// period of zero: its deletion timestamp is set, then it is removed.
	w.expect(t, "DELETED a2", func() { mustDelete(t, admin, "a2") }, ev(modified, "a2"), ev(deleted, "a2"))

	// An outage: the API server stops, the server keeps answering, and
	// after the restart the watch resumes with no event for the pods that
	// did not change.
	stop := cp.StopAPIServer(t)
	t.Logf("the API server stopped in %v", stop.Round(time.Millisecond))
	waitLog(t, logs, "API server unavailable: serving the last known pods")
	during := waitList(t, conn, logs, client)
	if got, want := uids(during), slices.Sorted(maps.Keys(w.pods)); !slices.Equal(got, want) {
		t.Errorf("ListPods during the outage = %v, want the pods known before it, %v", got, want)
	}
	checkHealth(t, sock)
	cp.StartAPIServer(t)
	w.expect(t, "MODIFIED a3 after the outage", func() { setPhase(t, admin, "a3", corev1.PodRunning) }, ev(modified, "a3"))
	waitLog(t, logs, "API server available again")

	// A forced 410 Gone: while the source's watch is cut, pods change, etcd
	// is compacted and the API server restarts with an empty watch cache;
	// the relist brings exactly those changes.
	proxy.Cut()
	mustDelete(t, admin, "a1")
	mustCreate(t, admin, newPod("a4", e2eNode, nil))
	setPhase(t, admin, "a3", corev1.PodSucceeded)
	mustCreate(t, admin, newPod("b3", e2eOtherNode, nil))
	rev := cp.CompactEtcd(t)
	t.Logf("etcd compacted at revision %d", rev)
	cp.StopAPIServer(t)
	cp.StartAPIServer(t)
	relists := strings.Count(logs.String(), "relisted the node's pods")
	w.expect(t, "the changes made while the watch was down", func() { proxy.Restore(t) },
		ev(deleted, "a1"), ev(added, "a4"), ev(modified, "a3"))
	if got := strings.Count(logs.String(), "relisted the node's pods"); got != relists+1 {
		t.Errorf("the source logged %d relists after the 410, want 1:\n%s", got-relists, logs.String())
	}
	// Three outages (the unreachable start, the stop, the cut), each logged
	// once at warning level however many retries it took.
	if got := strings.Count(logs.String(), "level=WARN msg=\"API server unavailable"); got > 3 {
		t.Errorf("outages logged %d times at warning level, want at most 3 (once each):\n%s", got, logs.String())
	}

	checkNodePods(t, admin, waitList(t, conn, logs, client))
	if err := w.equal(waitList(t, conn, logs, client)); err != nil {
		t.Error(err)
	}
}

// TestAPIServerSourceForbidden runs the source with a user allowed nothing:
// the server stays FAILED_PRECONDITION and running.
func TestAPIServerSourceForbidden(t *testing.T) {
	cp := kubetest.Start(t, e2eNobody)
	sock := podstest.SocketPath(t)
	_, logs := runServing(t, sock, false, "--source", "apiserver", "--node-name", e2eNode,
		"--kubeconfig", cp.Kubeconfig(t, e2eNobody, cp.Host()))
	waitLog(t, logs, "forbidden")
	_, err := podstest.ConnectClient(t, sock).ListPods(t.Context(), connect.NewRequest(&podsv1alpha1.PodListRequest{}))
	if connect.CodeOf(err) != connect.CodeFailedPrecondition {
		t.Errorf("ListPods with a forbidden source = %v, want FAILED_PRECONDITION", err)
	}
}

// grantPodReader gives e2eReader get, list and watch on pods, and nothing
// else, and checks that it has no more.
func grantPodReader(t *testing.T, cp *kubetest.ControlPlane) {
	t.Helper()
	mustCreate(t, cp.Admin, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "podsapi"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"}}},
	})
	mustCreate(t, cp.Admin, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "podsapi"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "podsapi"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: e2eReader}},
	})
	reader := kubernetes.NewForConfigOrDie(cp.Config(e2eReader, cp.Host()))
	if _, err := reader.CoreV1().Secrets("").List(t.Context(), metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("the pod reader lists secrets: %v, want Forbidden", err)
	}
	// RBAC takes effect once the API server's authorizer cache has it.
	waitFor(t, "the pod reader's role", func() (bool, error) {
		_, err := reader.CoreV1().Pods("").List(t.Context(), metav1.ListOptions{Limit: 1})
		return err == nil, nil
	})
}

func newPod(name, node string, annotations map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: e2eNamespace, Name: name, Labels: map[string]string{"app": name}, Annotations: annotations},
		Spec: corev1.PodSpec{
			NodeName:   node,
			Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}},
		},
	}
}

// mustCreate creates obj, a namespace, cluster role or binding, or pod.
func mustCreate[T any](t *testing.T, c *kubernetes.Clientset, obj T) T {
	t.Helper()
	ctx := t.Context()
	var (
		out any
		err error
	)
	switch o := any(obj).(type) {
	case *corev1.Namespace:
		out, err = c.CoreV1().Namespaces().Create(ctx, o, metav1.CreateOptions{})
	case *corev1.Pod:
		out, err = c.CoreV1().Pods(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
	case *rbacv1.ClusterRole:
		out, err = c.RbacV1().ClusterRoles().Create(ctx, o, metav1.CreateOptions{})
	case *rbacv1.ClusterRoleBinding:
		out, err = c.RbacV1().ClusterRoleBindings().Create(ctx, o, metav1.CreateOptions{})
	case *appsv1.Deployment:
		out, err = c.AppsV1().Deployments(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
	case *appsv1.ReplicaSet:
		out, err = c.AppsV1().ReplicaSets(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
	default:
		t.Fatalf("mustCreate: %T", obj)
	}
	if err != nil {
		t.Fatalf("create %T: %v", obj, err)
	}
	return out.(T)
}

// mustDelete deletes a pod at once: there is no kubelet to finish it.
func mustDelete(t *testing.T, c *kubernetes.Clientset, name string) {
	t.Helper()
	if err := c.CoreV1().Pods(e2eNamespace).Delete(t.Context(), name, *metav1.NewDeleteOptions(0)); err != nil {
		t.Fatalf("delete pod %s: %v", name, err)
	}
}

// setPhase writes a pod's phase through the status subresource, as a
// kubelet does.
func setPhase(t *testing.T, c *kubernetes.Clientset, name string, phase corev1.PodPhase) {
	t.Helper()
	pods := c.CoreV1().Pods(e2eNamespace)
	pod, err := pods.Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod.Status.Phase = phase
	pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{
		Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now(),
	})
	if _, err := pods.UpdateStatus(t.Context(), pod, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update the status of pod %s: %v", name, err)
	}
}

// waitFor waits until cond holds, polling: the condition is the API
// server's (its authorizer's cache), which sends no signal.
func waitFor(t *testing.T, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(e2eTimeout)
	ticker := time.NewTicker(20 * time.Millisecond)
	defer ticker.Stop()
	for {
		ok, err := cond()
		if err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, e2eTimeout)
		}
		<-ticker.C
	}
}

// waitLog waits until the server's logs hold msg.
func waitLog(t *testing.T, logs *syncBuffer, msg string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), e2eTimeout)
	defer cancel()
	if !logs.wait(ctx, msg) {
		t.Fatalf("the server did not log %q within %v; its logs:\n%s", msg, e2eTimeout, logs.String())
	}
}

// waitList returns the pods of ListPods once the server on conn is synced,
// which its health says.
func waitList(t *testing.T, conn *grpc.ClientConn, logs *syncBuffer, client podsv1alpha1connect.PodsClient) []*podv1 {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), e2eTimeout)
	defer cancel()
	waitHealth(ctx, t, conn, logs, true)
	resp, err := client.ListPods(ctx, connect.NewRequest(&podsv1alpha1.PodListRequest{}))
	if err != nil {
		t.Fatalf("ListPods of a server whose health says SERVING: %v", err)
	}
	return resp.Msg.GetPods()
}

// checkNodePods checks that pods are exactly the API server's pods of
// e2eNode, mirror pods under their static UIDs.
func checkNodePods(t *testing.T, admin *kubernetes.Clientset, pods []*podv1) {
	t.Helper()
	list, err := admin.CoreV1().Pods("").List(t.Context(), metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", e2eNode).String(),
	})
	if err != nil {
		t.Fatal(err)
	}
	want := make([]string, 0, len(list.Items))
	for _, p := range list.Items {
		uid := string(p.UID)
		if m := p.Annotations[corev1.MirrorPodAnnotationKey]; m != "" {
			uid = m
		}
		want = append(want, p.Namespace+"/"+p.Name+" "+uid+" "+p.ResourceVersion)
	}
	got := make([]string, 0, len(pods))
	for _, p := range pods {
		m := p.GetMetadata()
		got = append(got, m.GetNamespace()+"/"+m.GetName()+" "+m.GetUid()+" "+m.GetResourceVersion())
		if p.GetSpec().GetNodeName() != e2eNode {
			t.Errorf("pod %s/%s of node %q served", m.GetNamespace(), m.GetName(), p.GetSpec().GetNodeName())
		}
	}
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("served pods:\n%s\nwant the API server's pods of %s:\n%s", strings.Join(got, "\n"), e2eNode, strings.Join(want, "\n"))
	}
}

func findPod(pods []*podv1, name string) *podv1 {
	for _, p := range pods {
		if p.GetMetadata().GetName() == name {
			return p
		}
	}
	return nil
}

func uids(pods []*podv1) []string {
	out := make([]string, 0, len(pods))
	for _, p := range pods {
		out = append(out, p.GetMetadata().GetUid())
	}
	slices.Sort(out)
	return out
}

// checkHealth checks that the server's health says SERVING.
func checkHealth(t *testing.T, sock string) {
	t.Helper()
	var out, errs syncBuffer
	if err := Probe(t.Context(), []string{"--socket", sock, "--serving"}, &out, &errs); err != nil {
		t.Errorf("health: %v %s", err, errs.String())
	}
}

// The event types of the typed wire.
const (
	added    = podsv1alpha1.EventType_EVENT_TYPE_ADDED
	modified = podsv1alpha1.EventType_EVENT_TYPE_MODIFIED
	deleted  = podsv1alpha1.EventType_EVENT_TYPE_DELETED
)

// event is an expected event: its type and its pod's name.
type event struct {
	typ  podsv1alpha1.EventType
	name string
}

func ev(typ podsv1alpha1.EventType, name string) event { return event{typ, name} }

func (e event) String() string {
	return fmt.Sprintf("%s %s", strings.TrimPrefix(e.typ.String(), "EVENT_TYPE_"), e.name)
}

// watcher is a WatchPods stream replayed onto its snapshot: the store's
// promise (store/doc.go) checked on the wire. An ADDED of a pod it has, a
// MODIFIED or DELETED of a pod it has not, and a MODIFIED that changes
// nothing fail the test.
type watcher struct {
	sentinel  func(name string) // Creates a pod of the node.
	sentinels int
	pods      map[string]*podv1 // By UID.
	events    chan *podsv1alpha1.PodWatchResponse
	errs      chan error
	counter   int
}

// podv1 is a pod of the typed wire.
type podv1 = v1.Pod

// watch opens a WatchPods stream and reads its snapshot; sentinel creates a
// pod of the node.
func watch(t *testing.T, client podsv1alpha1connect.PodsClient, sentinel func(name string)) *watcher {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stream, err := client.WatchPods(ctx, connect.NewRequest(&podsv1alpha1.PodWatchRequest{}))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	w := &watcher{sentinel: sentinel, pods: make(map[string]*podv1), events: make(chan *podsv1alpha1.PodWatchResponse, 64), errs: make(chan error, 1)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for stream.Receive() {
			select {
			case w.events <- stream.Msg():
			case <-ctx.Done():
				return
			}
		}
		w.errs <- stream.Err()
	}()
	t.Cleanup(func() {
		cancel()
		_ = stream.Close()
		<-done
	})
	for {
		msg := w.next(t, "the snapshot")
		if msg.GetType() == podsv1alpha1.EventType_EVENT_TYPE_INITIAL_SYNC_COMPLETE {
			return w
		}
		if err := w.apply(msg); err != nil {
			t.Fatal(err)
		}
	}
}

// next returns the next event of the stream.
func (w *watcher) next(t *testing.T, what string) *podsv1alpha1.PodWatchResponse {
	t.Helper()
	timer := time.NewTimer(e2eTimeout)
	defer timer.Stop()
	select {
	case msg := <-w.events:
		return msg
	case err := <-w.errs:
		t.Fatalf("the watch ended while waiting for %s: %v", what, err)
	case <-timer.C:
		t.Fatalf("no event within %v while waiting for %s", e2eTimeout, what)
	}
	return nil
}

// apply applies an event, or says how it breaks the promise.
func (w *watcher) apply(msg *podsv1alpha1.PodWatchResponse) error {
	w.counter++
	pod := msg.GetPod()
	uid := pod.GetMetadata().GetUid()
	known := w.pods[uid]
	switch msg.GetType() {
	case added:
		if known != nil {
			return fmt.Errorf("event %d: ADDED %s, which the watcher has", w.counter, uid)
		}
		w.pods[uid] = pod
	case modified:
		if known == nil {
			return fmt.Errorf("event %d: MODIFIED %s, which the watcher has not", w.counter, uid)
		}
		if proto.Equal(known, pod) {
			return fmt.Errorf("event %d: MODIFIED %s/%s that changes nothing", w.counter, pod.GetMetadata().GetNamespace(), pod.GetMetadata().GetName())
		}
		w.pods[uid] = pod
	case deleted:
		if known == nil {
			return fmt.Errorf("event %d: DELETED %s, which the watcher has not", w.counter, uid)
		}
		delete(w.pods, uid)
	default:
		return fmt.Errorf("event %d: type %v", w.counter, msg.GetType())
	}
	return nil
}

// expect runs change, then checks that the next events are exactly want, in
// any order, logging how long they took, and that no other event comes
// before the ADDED of a sentinel pod created afterwards.
func (w *watcher) expect(t *testing.T, what string, change func(), want ...event) {
	t.Helper()
	start := time.Now()
	change()
	got := w.collect(t, what, len(want))
	t.Logf("%s: %v in %v", what, got, time.Since(start).Round(time.Millisecond))
	if !sameEvents(got, want) {
		t.Errorf("%s: events %v, want %v", what, got, want)
	}
	w.sentinels++
	name := fmt.Sprintf("sentinel-%d", w.sentinels)
	w.sentinel(name)
	if got := w.collect(t, "the sentinel "+name, 1); got[0] != ev(added, name) {
		t.Errorf("after %s: event %v before the sentinel's ADDED", what, got[0])
		w.collect(t, "the sentinel "+name, 1)
	}
}

// collect reads n events, applying each.
func (w *watcher) collect(t *testing.T, what string, n int) []event {
	t.Helper()
	var got []event
	for len(got) < n {
		msg := w.next(t, what)
		if err := w.apply(msg); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		got = append(got, ev(msg.GetType(), msg.GetPod().GetMetadata().GetName()))
	}
	return got
}

func sameEvents(got, want []event) bool {
	key := func(e event) string { return e.String() }
	g, w := make([]string, 0, len(got)), make([]string, 0, len(want))
	for _, e := range got {
		g = append(g, key(e))
	}
	for _, e := range want {
		w = append(w, key(e))
	}
	slices.Sort(g)
	slices.Sort(w)
	return slices.Equal(g, w)
}

// equal says how the watcher's pods differ from pods.
func (w *watcher) equal(pods []*podv1) error {
	if len(pods) != len(w.pods) {
		return fmt.Errorf("the watcher has %d pods, ListPods %d", len(w.pods), len(pods))
	}
	for _, p := range pods {
		if !proto.Equal(w.pods[p.GetMetadata().GetUid()], p) {
			return fmt.Errorf("pod %s: the watcher's version differs from ListPods'", p.GetMetadata().GetUid())
		}
	}
	return nil
}
