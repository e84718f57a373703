package workload_test

import (
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/podsapi/podsapi/test/kubetest"
	"github.com/podsapi/podsapi/workload"
)

// resolverUser is the identity the Resolver asks as: RBAC allows it to get
// the objects of the node's slice (ReplicaSets and Jobs, which the
// workloads need, and Deployments, StatefulSets, DaemonSets, CronJobs and
// Namespaces, which the slice needs), and nothing else: no list, no watch.
const resolverUser = "podsapi-workload"

// clock is a settable clock for the Resolver's refresh and staleness.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// grantGets lets resolverUser get the objects of the node's slice.
func grantGets(t *testing.T, admin kubernetes.Interface) {
	t.Helper()
	ctx := t.Context()
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: resolverUser},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"apps"}, Resources: []string{"replicasets", "deployments", "statefulsets", "daemonsets"}, Verbs: []string{"get"}},
			{APIGroups: []string{"batch"}, Resources: []string{"jobs", "cronjobs"}, Verbs: []string{"get"}},
			{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get"}},
		},
	}
	if _, err := admin.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: resolverUser},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: resolverUser},
		Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: resolverUser}},
	}
	if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitGrant waits until the API server's authorizer lets resolverUser get
// ReplicaSets: RBAC takes effect once its cache has the binding.
func waitGrant(t *testing.T, cp *kubetest.ControlPlane) {
	t.Helper()
	g, err := workload.NewGetter(cp.Config(resolverUser, cp.Host()))
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := g.Get(t.Context(), schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "replicasets"}, "default", "absent")
		if apierrors.IsNotFound(err) {
			return
		}
		if !apierrors.IsForbidden(err) || time.Now().After(deadline) {
			t.Fatalf("get as %s: %v, want NotFound once RBAC allows it", resolverUser, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func controller(apiVersion, kind, name string, uid types.UID) []metav1.OwnerReference {
	yes := true
	return []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: name, UID: uid, Controller: &yes}}
}

// world creates, through client-go, the objects of one namespace and
// returns them: the test API server has no controller manager, so the test
// writes the owner references the controllers would.
type world struct {
	t     *testing.T
	admin kubernetes.Interface
	ns    string
	node  string
}

func (w world) pod(name string, labels, annotations map[string]string, owners []metav1.OwnerReference) *corev1.Pod {
	w.t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: w.ns, Labels: labels, Annotations: annotations, OwnerReferences: owners},
		Spec:       corev1.PodSpec{NodeName: w.node, Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}},
	}
	p, err := w.admin.CoreV1().Pods(w.ns).Create(w.t.Context(), p, metav1.CreateOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	return p
}

func (w world) deployment(name string) *appsv1.Deployment {
	w.t.Helper()
	labels := map[string]string{"app": name}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: w.ns},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}}},
		},
	}
	d, err := w.admin.AppsV1().Deployments(w.ns).Create(w.t.Context(), d, metav1.CreateOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	return d
}

func (w world) replicaSet(name, hash string, owners []metav1.OwnerReference) *appsv1.ReplicaSet {
	w.t.Helper()
	labels := map[string]string{"app": name, "pod-template-hash": hash}
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: w.ns, OwnerReferences: owners},
		Spec: appsv1.ReplicaSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}}},
		},
	}
	rs, err := w.admin.AppsV1().ReplicaSets(w.ns).Create(w.t.Context(), rs, metav1.CreateOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	return rs
}

func (w world) job(name string, owners []metav1.OwnerReference) *batchv1.Job {
	w.t.Helper()
	j := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: w.ns, OwnerReferences: owners},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}},
		}}},
	}
	j, err := w.admin.BatchV1().Jobs(w.ns).Create(w.t.Context(), j, metav1.CreateOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	return j
}

func (w world) statefulSet(name string) *appsv1.StatefulSet {
	w.t.Helper()
	labels := map[string]string{"app": name}
	s := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: w.ns},
		Spec: appsv1.StatefulSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}}},
		},
	}
	s, err := w.admin.AppsV1().StatefulSets(w.ns).Create(w.t.Context(), s, metav1.CreateOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	return s
}

func (w world) daemonSet(name string) *appsv1.DaemonSet {
	w.t.Helper()
	labels := map[string]string{"app": name}
	d := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: w.ns},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}}},
		},
	}
	d, err := w.admin.AppsV1().DaemonSets(w.ns).Create(w.t.Context(), d, metav1.CreateOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	return d
}

func (w world) cronJob(name string) *batchv1.CronJob {
	w.t.Helper()
	c := &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: w.ns},
		Spec: batchv1.CronJobSpec{Schedule: "*/5 * * * *", JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}},
		}}}}},
	}
	c, err := w.admin.BatchV1().CronJobs(w.ns).Create(w.t.Context(), c, metav1.CreateOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	return c
}

func newWorld(t *testing.T, cp *kubetest.ControlPlane, ns string) world {
	t.Helper()
	if _, err := cp.Admin.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return world{t: t, admin: cp.Admin, ns: ns, node: "node-1"}
}

func newResolver(t *testing.T, cp *kubetest.ControlPlane, clk *clock, opts ...workload.Option) *workload.Resolver {
	t.Helper()
	getter, err := workload.NewGetter(cp.Config(resolverUser, cp.Host()))
	if err != nil {
		t.Fatal(err)
	}
	return workload.NewResolver(append([]workload.Option{workload.WithGetter(getter), workload.WithClock(clk.Now)}, opts...)...)
}

func want(t *testing.T, r *workload.Resolver, pod *corev1.Pod, w workload.Workload) {
	t.Helper()
	got, ok := r.Workload(pod.UID)
	if !ok {
		t.Fatalf("pod %s: not observed", pod.Name)
	}
	if got != w {
		t.Errorf("pod %s: workload %+v, want %+v", pod.Name, got, w)
	}
}

// TestResolverAPIServer resolves every kind of workload against a real
// kube-apiserver, with one metadata get per ReplicaSet or Job and none for
// the owners the pod alone tells.
func TestResolverAPIServer(t *testing.T) {
	cp := kubetest.Start(t, resolverUser)
	grantGets(t, cp.Admin)
	w := newWorld(t, cp, "shop")
	ctx := t.Context()

	dep := w.deployment("web")
	rs := w.replicaSet("web-5d9f8b6c5d", "5d9f8b6c5d", controller("apps/v1", "Deployment", dep.Name, dep.UID))
	bareRS := w.replicaSet("loner-7c6d5", "7c6d5", nil)
	cron := w.cronJob("backup")
	cronJob := w.job("backup-29412345", controller("batch/v1", "CronJob", cron.Name, cron.UID))
	bareJob := w.job("migrate", nil)

	pods := []struct {
		name string
		pod  *corev1.Pod
		want workload.Workload
	}{
		{name: "deployment", pod: w.pod("web-5d9f8b6c5d-x2k4q", map[string]string{"pod-template-hash": "5d9f8b6c5d"}, nil, controller("apps/v1", "ReplicaSet", rs.Name, rs.UID)),
			want: workload.Workload{Kind: workload.KindDeployment, Name: "web", Resolution: workload.Resolved}},
		{name: "deployment second pod", pod: w.pod("web-5d9f8b6c5d-q8z7p", map[string]string{"pod-template-hash": "5d9f8b6c5d"}, nil, controller("apps/v1", "ReplicaSet", rs.Name, rs.UID)),
			want: workload.Workload{Kind: workload.KindDeployment, Name: "web", Resolution: workload.Resolved}},
		{name: "bare replicaset", pod: w.pod("loner-7c6d5-abcde", map[string]string{"pod-template-hash": "7c6d5"}, nil, controller("apps/v1", "ReplicaSet", bareRS.Name, bareRS.UID)),
			want: workload.Workload{Kind: workload.KindReplicaSet, Name: "loner-7c6d5", Resolution: workload.Resolved}},
		{name: "cronjob", pod: w.pod("backup-29412345-kq2lm", nil, nil, controller("batch/v1", "Job", cronJob.Name, cronJob.UID)),
			want: workload.Workload{Kind: workload.KindCronJob, Name: "backup", Resolution: workload.Resolved}},
		{name: "bare job", pod: w.pod("migrate-7xk2p", nil, nil, controller("batch/v1", "Job", bareJob.Name, bareJob.UID)),
			want: workload.Workload{Kind: workload.KindJob, Name: "migrate", Resolution: workload.Resolved}},
		{name: "statefulset", pod: w.pod("cache-0", nil, nil, controller("apps/v1", "StatefulSet", "cache", "00000000-0000-4000-8000-000000005501")),
			want: workload.Workload{Kind: workload.KindStatefulSet, Name: "cache", Resolution: workload.Resolved}},
		{name: "daemonset", pod: w.pod("agent-h7c2d", nil, nil, controller("apps/v1", "DaemonSet", "agent", "00000000-0000-4000-8000-00000000d501")),
			want: workload.Workload{Kind: workload.KindDaemonSet, Name: "agent", Resolution: workload.Resolved}},
		{name: "static pod", pod: w.pod("etcd-node-1", nil, map[string]string{"kubernetes.io/config.mirror": "0123abcd"}, controller("v1", "Node", "node-1", "00000000-0000-4000-8000-00000000e501")),
			want: workload.Workload{Kind: workload.KindNode, Name: "node-1", Resolution: workload.Resolved}},
		{name: "static pod without its node's reference", pod: w.pod("kube-proxy-node-1", nil, map[string]string{"kubernetes.io/config.mirror": "4567ef01"}, nil),
			want: workload.Workload{Kind: workload.KindNode, Name: "node-1", Resolution: workload.Resolved}},
		{name: "orphan", pod: w.pod("debug", nil, nil, nil),
			want: workload.Workload{Resolution: workload.Resolved}},
	}
	clk := &clock{now: time.Unix(1_800_000_000, 0)}
	var mu sync.Mutex
	var changed []types.UID
	waitGrant(t, cp)
	r := newResolver(t, cp, clk, workload.WithOnChange(func(uids []types.UID) { mu.Lock(); changed = append(changed, uids...); mu.Unlock() }))
	for _, p := range pods {
		r.Observe(p.pod)
	}
	// Before the API server answered: derived from the names.
	want(t, r, pods[0].pod, workload.Workload{Kind: workload.KindDeployment, Name: "web", Resolution: workload.Derived})
	want(t, r, pods[4].pod, workload.Workload{Kind: workload.KindJob, Name: "migrate", Resolution: workload.Unresolved})
	r.Sync(ctx)
	for _, p := range pods {
		t.Run(p.name, func(t *testing.T) { want(t, r, p.pod, p.want) })
	}
	if got := r.Gets(); got[workload.KindReplicaSet] != 2 || got[workload.KindJob] != 2 || len(got) != 2 {
		t.Errorf("gets = %v, want one per ReplicaSet and per Job: 2 and 2", got)
	}
	mu.Lock()
	// The deployment's pods went from Derived to Resolved, the bare
	// ReplicaSet's from Derived to ReplicaSet, the Jobs' from Unresolved.
	if len(changed) != 5 {
		t.Errorf("OnChange told of %d pods, want 5: %v", len(changed), changed)
	}
	mu.Unlock()

	// Nothing is due before the refresh interval: no get.
	r.Sync(ctx)
	if got := r.Gets(); got[workload.KindReplicaSet] != 2 || got[workload.KindJob] != 2 {
		t.Errorf("gets after a second Sync = %v, want no more", got)
	}
}
