package conformance

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"connectrpc.com/connect"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	corev1pb "github.com/podsapi/podsapi/gen/k8s.io/api/core/v1"
	podsv1alpha1 "github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1"
)

// The label and annotations of the pods the suite creates.
const (
	runLabel          = "conformance.podsapi.io/run"
	caseLabel         = "conformance.podsapi.io/case"
	versionAnnotation = "conformance.podsapi.io/version"
	paddingAnnotation = "conformance.podsapi.io/padding"
)

// manifestDriver makes pods appear, change and vanish by writing static pod
// manifests, atomically (a dotfile renamed into place), into a directory.
type manifestDriver struct {
	dir    string
	runID  string
	suffix string
	// tag is the case's own part of the names, UIDs and files of its
	// pods, so that no two cases share a pod's name or UID: an
	// implementation that remembers a pod by its UID (a kubelet) must not
	// see a deleted pod come back.
	tag string
	// statusOnly: the implementation's watch reports status changes only
	// (Features.WatchReports "status"); every version of a pod then
	// changes the image of its app container too, which a kubelet
	// reports (it restarts the container, and its status changes).
	statusOnly bool
}

// podSpec describes a pod the suite creates.
type podSpec struct {
	name      string // short name, unique in the run
	namespace string
	version   int
	phase     corev1.PodPhase // empty: no status in the manifest
	labels    map[string]string
	padding   int // bytes of an annotation to make the pod large
	// findable gives the status (phase must be set) container IDs and an
	// IP of the pod's own, for the FindPods cases (cases_find.go).
	findable bool
	// statefulSet, when set, names the StatefulSet the manifest says
	// controls the pod (an ownerReference), for the case of workloads.
	statefulSet string
}

// name is the pod's metadata.name in the manifest.
func (d *manifestDriver) name(short string) string {
	return "cf-" + d.runID + "-" + d.tag + "-" + short
}

// served is the name the implementation serves the pod under.
func (d *manifestDriver) served(short string) string { return d.name(short) + d.suffix }

func (d *manifestDriver) uid(short string) types.UID {
	h := sha256.Sum256([]byte(d.runID + "/" + d.tag + "/" + short))
	return types.UID(fmt.Sprintf("%x-%x-4%x-8%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])[:36])
}

func (d *manifestDriver) file(short string) string {
	return filepath.Join(d.dir, "conformance-"+d.runID+"-"+d.tag+"-"+short+".yaml")
}

// pod returns the manifest of s.
func (d *manifestDriver) pod(s podSpec) *corev1.Pod {
	ns := s.namespace
	if ns == "" {
		ns = "default"
	}
	labels := map[string]string{runLabel: d.runID, caseLabel: d.tag, "app.kubernetes.io/name": s.name}
	for k, v := range s.labels {
		labels[k] = v
	}
	annotations := map[string]string{versionAnnotation: fmt.Sprint(s.version)}
	if s.padding > 0 {
		annotations[paddingAnnotation] = strings.Repeat("x", s.padding)
	}
	image := "registry.k8s.io/pause:3.10"
	if d.statusOnly {
		image = fmt.Sprintf("registry.k8s.io/pause:3.10-v%d", s.version)
	}
	p := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name: d.name(s.name), Namespace: ns, UID: d.uid(s.name),
			Labels: labels, Annotations: annotations,
		},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{
				{Name: "app", Image: image, Args: []string{"--version", fmt.Sprint(s.version)}},
				{Name: "sidecar", Image: "registry.k8s.io/busybox:1.36", Command: []string{"sleep", "infinity"}},
			},
			// A volume of an inlined Go struct (VolumeSource), for the
			// JSON-shape field mask cases; harmless on a real kubelet.
			Volumes:       []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
			RestartPolicy: corev1.RestartPolicyAlways,
		},
	}
	if s.statefulSet != "" {
		yes := true
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: s.statefulSet, UID: d.uid("sts-" + s.statefulSet), Controller: &yes}}
	}
	if s.phase != "" {
		p.Status = corev1.PodStatus{
			Phase:  s.phase,
			PodIP:  "10.244.0.7",
			PodIPs: []corev1.PodIP{{IP: "10.244.0.7"}, {IP: "fd00::7"}},
			ContainerStatuses: []corev1.ContainerStatus{
				{Name: "app", Image: image, Ready: true, RestartCount: 0,
					State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Unix(1767225600, 0)}}},
				{Name: "sidecar", Image: "registry.k8s.io/busybox:1.36", Ready: false, RestartCount: 3,
					State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}},
			},
		}
		if s.findable {
			d.findKeys(p, s.name)
		}
	}
	return p
}

// put writes the manifest of s, atomically.
func (d *manifestDriver) put(s podSpec) error {
	data, err := yaml.Marshal(d.pod(s))
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(d.dir, ".conformance-*.tmp")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Rename(tmp.Name(), d.file(s.name)); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return nil
}

// remove deletes the manifest of the pod short.
func (d *manifestDriver) remove(short string) error {
	err := os.Remove(d.file(short))
	if os.IsNotExist(err) {
		return nil
	}
	return err
}

// create writes the manifests of specs and waits, through an observer, for
// their pods to be served at their versions. The pods are deleted at the
// end of the case. It returns the observer, ready for more.
func (c *C) create(specs ...podSpec) *observer {
	o := c.observe()
	d := c.env.driver
	for _, s := range specs {
		if err := d.put(s); err != nil {
			c.Fatalf("driver: write manifest of %s: %v", s.name, err)
		}
		c.track(s.name)
	}
	for _, s := range specs {
		o.waitVersion(d.served(s.name), s.version)
	}
	return o
}

// update rewrites the manifest of s and waits for o to see it.
func (c *C) update(o *observer, s podSpec) event {
	if err := c.env.driver.put(s); err != nil {
		c.Fatalf("driver: write manifest of %s: %v", s.name, err)
	}
	return o.waitVersion(c.env.driver.served(s.name), s.version)
}

// delete removes the manifest of the pod short and waits for o to see it.
func (c *C) delete(o *observer, short string) event {
	if err := c.env.driver.remove(short); err != nil {
		c.Fatalf("driver: remove manifest of %s: %v", short, err)
	}
	return o.waitDeleted(c.env.driver.served(short))
}

// track registers the pod short for deletion at the end of the case.
func (c *C) track(short string) {
	if c.created == nil {
		c.created = map[string]bool{}
		c.Cleanup(c.cleanupPods)
	}
	c.created[short] = true
}

// ofRun reports whether p is a pod of this case: by its name, which every
// event carries (DELETED on the kubelet wire carries only the pod's
// identity), or, when a field mask left the name out, by its label. Pods of
// earlier cases (a kubelet may still be terminating them, and reports it)
// are not the case's.
func (c *C) ofRun(p *corev1pb.Pod) bool {
	m := p.GetMetadata()
	if name := m.GetName(); name != "" && c.env.driver != nil {
		return strings.HasPrefix(name, c.env.driver.name(""))
	}
	return m.GetLabels()[runLabel] == c.env.runID
}

// cleanupPods removes the manifests of the case's pods and waits (bounded)
// until the implementation no longer serves them, so that the next case
// starts from a known state. It does not wait on an implementation seen
// to lack what the wait needs (answers, the sync marker).
func (c *C) cleanupPods() {
	d := c.env.driver
	left := map[string]bool{}
	for short := range c.created {
		if err := d.remove(short); err != nil {
			c.Logf("cleanup: %v", err)
		}
		left[d.served(short)] = true
	}
	if msg, ok := c.env.defect(noAnswer); ok {
		c.Logf("cleanup: not waiting for the pods to go: %s", msg)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.recvTimeout())
	defer cancel()
	for _, def := range []defect{noSyncMarker, stalledWatch} {
		if msg, ok := c.env.defect(def); ok {
			c.Logf("cleanup: waiting for the pods to go with ListPods, not WatchPods: %s", msg)
			c.env.pollGone(ctx, left)
			return
		}
	}
	var err error
	for ctx.Err() == nil {
		var present map[string]bool
		if present, err = c.env.waitGone(ctx, left); err == nil {
			return
		}
		if codeOf(err) != connect.CodeResourceExhausted {
			c.Logf("cleanup: %v (pods still served: %d)", err, len(present))
		}
	}
	c.Logf("cleanup: pods still served after their manifests were removed: %v", err)
}

// pollGone calls ListPods until none of the pods named in names is served,
// or ctx is done.
func (e *env) pollGone(ctx context.Context, names map[string]bool) {
	for ctx.Err() == nil {
		if e.pacer != nil && e.pacer.Wait(ctx) != nil {
			return
		}
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		pods, err := e.client.list(cctx, nil)
		cancel()
		if err == nil && !slices.ContainsFunc(pods, func(p *corev1pb.Pod) bool { return names[p.GetMetadata().GetName()] }) {
			return
		}
	}
}

// waitGone watches until none of the pods named in names is served.
func (e *env) waitGone(ctx context.Context, names map[string]bool) (map[string]bool, error) {
	stream, err := e.client.watch(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer stream.close()
	present := map[string]bool{}
	synced := false
	for {
		typ, pod, ok := stream.receive()
		if !ok {
			break
		}
		name := pod.GetMetadata().GetName()
		switch typ {
		case podsv1alpha1.EventType_EVENT_TYPE_INITIAL_SYNC_COMPLETE:
			synced = true
		case podsv1alpha1.EventType_EVENT_TYPE_DELETED:
			delete(present, name)
		default:
			if names[name] {
				present[name] = true
			}
		}
		if synced && len(present) == 0 {
			return nil, nil
		}
	}
	return present, stream.err()
}
