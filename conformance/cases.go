package conformance

import (
	"cmp"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"

	corev1pb "github.com/podsapi/podsapi/gen/k8s.io/api/core/v1"
	podsv1alpha1 "github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1"
)

// Need is something a case needs to run.
type Need string

// What cases may need.
const (
	NeedDriver         Need = "driver"
	NeedLifecycle      Need = "lifecycle"
	NeedMetrics        Need = "metrics"
	NeedEventTypes     Need = "eventTypes"
	NeedRateLimit      Need = "rateLimit"
	NeedReflection     Need = "reflection"
	NeedHealth         Need = "health"
	NeedManifestStatus Need = "manifestStatus"
	NeedFieldMasks     Need = "fieldMasks"
	NeedSelectors      Need = "selectors"
	NeedWatchResume    Need = "watchResume"
	NeedFindPods       Need = "findPods"
	NeedFindWait       Need = "findWait"
	NeedWorkloads      Need = "workloads"
)

// Case is one conformance case.
type Case struct {
	// ID is stable: known-failing lists and --run use it.
	ID string
	// Statement is the MUST statement the case checks.
	Statement string
	// Needs lists what the case needs; without it the case is skipped.
	Needs []Need
	// Wires lists the wires the case applies to; on the others it is
	// skipped.
	Wires []Wire
	run   func(c *C)
}

// AppliesTo reports whether the case applies to wire w.
func (c *Case) AppliesTo(w Wire) bool { return slices.Contains(c.Wires, w) }

var catalogue []*Case

// register adds a case that applies to every wire.
func register(id, statement string, needs []Need, run func(c *C)) {
	registerOn(Wires, id, statement, needs, run)
}

// registerOn adds a case that applies to the wires listed.
func registerOn(wires []Wire, id, statement string, needs []Need, run func(c *C)) {
	catalogue = append(catalogue, &Case{ID: id, Statement: statement, Needs: needs, Wires: wires, run: run})
}

// The wires of the cases that apply to one wire only.
var (
	podsapiOnly = []Wire{WirePodsAPI}
	kubeletOnly = []Wire{WireKubelet}
)

// Cases returns the catalogue, in the order the cases run.
func Cases() []*Case { return slices.Clone(catalogue) }

func caseByID(id string) *Case {
	for _, c := range catalogue {
		if c.ID == id {
			return c
		}
	}
	return nil
}

func needs(n ...Need) []Need { return n }

// maskCase is a valid field mask the cases check on every RPC.
type maskCase struct {
	name, what string
	header     func() http.Header
	paths      []string
}

var validMasks = []maskCase{
	{"Scalar", "a scalar field (status.phase)", func() http.Header { return textMask("status.phase") }, []string{"status.phase"}},
	{"Nested", "nested fields (metadata.name, metadata.namespace, status.podIPs)",
		func() http.Header { return textMask("metadata.name,metadata.namespace,status.podIPs") },
		[]string{"metadata.name", "metadata.namespace", "status.podIPs"}},
	{"Repeated", "a path through repeated fields (spec.containers.image, status.containerStatuses.state.running)",
		func() http.Header { return textMask("spec.containers.image,status.containerStatuses.state.running") },
		[]string{"spec.containers.image", "status.containerStatuses.state.running"}},
	{"Map", "a map, selected whole (metadata.labels)", func() http.Header { return textMask("metadata.labels") }, []string{"metadata.labels"}},
	{"MergedHeaders", "several x-kubernetes-fieldmask values, merged, spaces ignored",
		func() http.Header { return textMask("metadata.uid", " status.phase , spec.nodeName") },
		[]string{"metadata.uid", "status.phase", "spec.nodeName"}},
	{"JSONShape", "paths in the JSON shape of a pod, where Go's inlined structs disappear (spec.volumes.emptyDir for the proto's spec.volumes.volumeSource.emptyDir)",
		func() http.Header { return textMask("spec.volumes.name,spec.volumes.emptyDir") },
		[]string{"spec.volumes.name", "spec.volumes.volumeSource.emptyDir"}},
	{"Binary", "the x-kubernetes-fieldmask-bin form, merged with the text form",
		func() http.Header {
			h := binMask("metadata.name", "spec.containers.name")
			h.Add(maskHeader, "status.phase")
			return h
		},
		[]string{"metadata.name", "spec.containers.name", "status.phase"}},
}

// invalidMasks are masks every RPC must refuse with INVALID_ARGUMENT.
var invalidMasks = []func() http.Header{
	func() http.Header { return textMask("metadata.nosuchfield") },
	func() http.Header { return textMask("metadata..name") },
	func() http.Header { return textMask("metadata.name.first") },
	func() http.Header { return textMask("metadata.labels.app") },
	func() http.Header { return textMask("spec.volumes.emptyDir.nosuchfield") },
	func() http.Header { return textMask("status.phase", "spec.nosuchfield") },
	func() http.Header { return binMask("status.nosuchfield") },
}

// identityPaths are the fields every watch event carries.
var identityPaths = []string{"metadata.namespace", "metadata.name", "metadata.uid"}

// samplePods are the pods the cases that need some pods create.
func samplePods() []podSpec {
	return []podSpec{
		{name: "web", version: 1, phase: corev1.PodRunning, labels: map[string]string{"tier": "web"}},
		{name: "batch", version: 1, namespace: "kube-system", labels: map[string]string{"tier": "batch"}},
		{name: "cache", version: 1, phase: corev1.PodPending},
	}
}

// podsForMasks makes sure there are pods to check masks on: the sample
// pods with the driver, else whatever the node has.
func (c *C) podsForMasks() []*corev1pb.Pod {
	if c.env.driver != nil {
		specs := samplePods()
		if !c.env.cfg.Features.ManifestStatus {
			for i := range specs {
				specs[i].phase = ""
			}
		}
		c.create(specs...)
	}
	pods := c.mustList(nil)
	if len(pods) == 0 {
		c.Skipf("the node has no pods to check, and there is no driver to create some (--manifest-dir)")
	}
	return pods
}

// runPods returns the pods of pods created by this run, by name.
func (c *C) runPods(pods []*corev1pb.Pod) map[string][]*corev1pb.Pod {
	out := map[string][]*corev1pb.Pod{}
	for _, p := range pods {
		if c.ofRun(p) {
			out[p.GetMetadata().GetName()] = append(out[p.GetMetadata().GetName()], p)
		}
	}
	return out
}

// checkManifest compares the fields the manifest of s set with pod.
func (c *C) checkManifest(request string, s podSpec, pod *corev1pb.Pod) {
	d := c.env.driver
	want := d.pod(s)
	m := pod.GetMetadata()
	var diffs []string
	if got := m.GetName(); got != d.served(s.name) {
		diffs = append(diffs, fmt.Sprintf("metadata.name %q, want %q", got, d.served(s.name)))
	}
	if got := m.GetNamespace(); got != want.Namespace {
		diffs = append(diffs, fmt.Sprintf("metadata.namespace %q, want %q", got, want.Namespace))
	}
	for k, v := range want.Labels {
		if got, ok := m.GetLabels()[k]; !ok || got != v {
			diffs = append(diffs, fmt.Sprintf("metadata.labels[%q] = %q, want %q", k, got, v))
		}
	}
	if got := m.GetAnnotations()[versionAnnotation]; got != want.Annotations[versionAnnotation] {
		diffs = append(diffs, fmt.Sprintf("metadata.annotations[%q] = %q, want %q", versionAnnotation, got, want.Annotations[versionAnnotation]))
	}
	var got, wantC []string
	for _, ct := range pod.GetSpec().GetContainers() {
		got = append(got, ct.GetName()+"="+ct.GetImage())
	}
	for _, ct := range want.Spec.Containers {
		wantC = append(wantC, ct.Name+"="+ct.Image)
	}
	if !slices.Equal(got, wantC) {
		diffs = append(diffs, fmt.Sprintf("spec.containers (name=image) %v, want %v", got, wantC))
	}
	if s.phase != "" && c.env.cfg.Features.ManifestStatus {
		st := pod.GetStatus()
		if st.GetPhase() != string(s.phase) {
			diffs = append(diffs, fmt.Sprintf("status.phase %q, want %q", st.GetPhase(), s.phase))
		}
		var ips []string
		for _, ip := range st.GetPodIPs() {
			ips = append(ips, ip.GetIp())
		}
		if w := []string{"10.244.0.7", "fd00::7"}; st.GetPodIP() != w[0] || !slices.Equal(ips, w) {
			diffs = append(diffs, fmt.Sprintf("status.podIP %q podIPs %v, want %q %v", st.GetPodIP(), ips, w[0], w))
		}
		var cs []string
		for _, s := range st.GetContainerStatuses() {
			cs = append(cs, fmt.Sprintf("%s ready=%t restarts=%d", s.GetName(), s.GetReady(), s.GetRestartCount()))
		}
		if w := []string{"app ready=true restarts=0", "sidecar ready=false restarts=3"}; !slices.Equal(cs, w) {
			diffs = append(diffs, fmt.Sprintf("status.containerStatuses %v, want %v", cs, w))
		}
	}
	if len(diffs) > 0 {
		c.Failf(request, "the fields of the manifest of "+d.name(s.name), strings.Join(diffs, "; "))
	}
}

func sortKey(p *corev1pb.Pod) string {
	m := p.GetMetadata()
	return m.GetNamespace() + "\x00" + m.GetName() + "\x00" + m.GetUid()
}

func names(pods []*corev1pb.Pod) []string {
	var out []string
	for _, p := range pods {
		m := p.GetMetadata()
		out = append(out, m.GetNamespace()+"/"+m.GetName())
	}
	return out
}

// equalPods compares two lists of pods, returning a description of the
// first difference.
func equalPods(got, want []*corev1pb.Pod) string {
	if len(got) != len(want) {
		return fmt.Sprintf("%d pods, want %d", len(got), len(want))
	}
	for i := range got {
		if !proto.Equal(got[i], want[i]) {
			return fmt.Sprintf("pod %d is\n      %v\n    want\n      %v", i, short(got[i]), short(want[i]))
		}
	}
	return ""
}

// short formats a pod for messages, without very long fields.
func short(p *corev1pb.Pod) string {
	p = proto.Clone(p).(*corev1pb.Pod)
	if a := p.GetMetadata().GetAnnotations(); a != nil && len(a[paddingAnnotation]) > 16 {
		a[paddingAnnotation] = a[paddingAnnotation][:16] + "..."
	}
	s := p.String()
	if len(s) > 2000 {
		s = s[:2000] + "..."
	}
	return s
}

func init() {
	register("ListPods/Pods",
		"ListPods MUST return every pod the driver created, each exactly once, with the fields its manifest set (name, namespace, labels, containers' names and images, status when set).",
		needs(NeedDriver), func(c *C) {
			specs := samplePods()
			c.create(specs...)
			pods := c.mustList(nil)
			byName := c.runPods(pods)
			for _, s := range specs {
				got := byName[c.env.driver.served(s.name)]
				if len(got) != 1 {
					c.Failf("ListPods", "one pod "+c.env.driver.served(s.name), fmt.Sprintf("%d such pods among %v", len(got), names(pods)))
				}
				c.checkManifest("ListPods", s, got[0])
			}
			if len(byName) != len(specs) {
				c.Failf("ListPods", fmt.Sprintf("the %d pods the driver created", len(specs)), fmt.Sprint(len(byName), " pods of this run"))
			}
		})
	registerOn(podsapiOnly, "ListPods/Sorted",
		"ListPods MUST return the pods sorted by namespace, then name, then UID. (The kubelet wire promises no order: a kubelet sorts by UID.)",
		nil, func(c *C) {
			pods := c.podsForMasks()
			if !slices.IsSortedFunc(pods, func(a, b *corev1pb.Pod) int { return cmp.Compare(sortKey(a), sortKey(b)) }) {
				c.Failf("ListPods", "pods sorted by namespace, name, UID", fmt.Sprint(names(pods)))
			}
		})
	register("GetPod/Pod",
		"GetPod MUST return the pod with the requested UID, with the fields its manifest set.",
		needs(NeedDriver), func(c *C) {
			specs := samplePods()
			o := c.create(specs...)
			for _, s := range specs {
				uid := o.pods[c.env.driver.served(s.name)].GetMetadata().GetUid()
				pod := c.mustGet(uid, nil)
				if pod.GetMetadata().GetUid() != uid {
					c.Failf("GetPod(podUID="+uid+")", "the pod with UID "+uid, "UID "+pod.GetMetadata().GetUid())
				}
				c.checkManifest("GetPod(podUID="+uid+")", s, pod)
			}
		})
	registerOn(podsapiOnly, "GetPod/EmptyUID",
		"GetPod with an empty podUID MUST fail with INVALID_ARGUMENT.",
		nil, func(c *C) {
			if _, err := c.get("", nil); codeOf(err) != connect.CodeInvalidArgument {
				c.Failf(`GetPod(podUID="")`, "INVALID_ARGUMENT", codeName(err))
			}
		})
	registerOn(kubeletOnly, "GetPod/EmptyUIDNotFound",
		"On the kubelet wire, GetPod with an empty podUID MUST fail with NOT_FOUND, as a kubelet does: it looks the empty UID up like any other.",
		nil, func(c *C) {
			if _, err := c.get("", nil); codeOf(err) != connect.CodeNotFound {
				c.Failf(`GetPod(podUID="")`, "NOT_FOUND", codeName(err))
			}
		})
	register("GetPod/UnknownUID",
		"GetPod of a UID the node does not have MUST fail with NOT_FOUND.",
		nil, func(c *C) {
			uid := "00000000-0000-4000-8000-" + c.env.runID + "dead"
			if _, err := c.get(uid, nil); codeOf(err) != connect.CodeNotFound {
				c.Failf("GetPod(podUID="+uid+")", "NOT_FOUND", codeName(err))
			}
		})

	// Field masks.
	register("ListPods/FieldMask/None",
		"Without a field mask, ListPods MUST return whole pods (metadata, spec and status).",
		nil, func(c *C) {
			for _, p := range c.podsForMasks() {
				if p.GetMetadata().GetName() == "" || p.GetMetadata().GetUid() == "" || len(p.GetSpec().GetContainers()) == 0 || p.GetStatus().GetPhase() == "" {
					c.Failf("ListPods", "whole pods: metadata.name, metadata.uid, spec.containers and status.phase set", short(p))
				}
			}
		})
	register("GetPod/FieldMask/None",
		"Without a field mask, GetPod MUST return the whole pod, as ListPods does.",
		nil, func(c *C) {
			pods := c.podsForMasks()
			for attempt := 0; ; attempt++ {
				pods = c.mustList(nil)
				got := c.mustGet(pods[0].GetMetadata().GetUid(), nil)
				if proto.Equal(got, pods[0]) {
					return
				}
				if c.lastAttempt(attempt) {
					c.Failf("GetPod(podUID="+pods[0].GetMetadata().GetUid()+")", "the pod ListPods returns:\n"+short(pods[0]), short(got))
				}
			}
		})
	register("WatchPods/FieldMask/None",
		"Without a field mask, the initial events of WatchPods MUST carry the whole pods, as ListPods returns them.",
		needs(NeedEventTypes), func(c *C) {
			c.podsForMasks()
			for attempt := 0; ; attempt++ {
				w := c.watch(nil)
				got := w.initial()
				w.close()
				want := c.mustList(nil)
				sortPods(got)
				sortPods(want)
				diff := equalPods(got, want)
				if diff == "" {
					return
				}
				if c.lastAttempt(attempt) {
					c.Failf("WatchPods", "the pods of ListPods", diff)
				}
			}
		})
	for _, m := range validMasks {
		register("ListPods/FieldMask/"+m.name,
			"With a field mask of "+m.what+", ListPods MUST return each pod with exactly the selected fields.",
			needs(NeedFieldMasks), func(c *C) {
				c.podsForMasks()
				h := m.header()
				for attempt := 0; ; attempt++ {
					want := c.mustList(nil)
					got := c.mustList(h)
					for i := range want {
						want[i] = project(want[i], m.paths...)
					}
					diff := equalPods(got, want)
					if diff == "" {
						return
					}
					if c.lastAttempt(attempt) {
						c.Failf(describe("ListPods", h, ""), "the pods of ListPods without a mask, trimmed to "+strings.Join(m.paths, ","), diff)
					}
				}
			})
		register("GetPod/FieldMask/"+m.name,
			"With a field mask of "+m.what+", GetPod MUST return the pod with exactly the selected fields.",
			needs(NeedFieldMasks), func(c *C) {
				pods := c.podsForMasks()
				h := m.header()
				for _, p := range pods[:min(len(pods), 3)] {
					uid := p.GetMetadata().GetUid()
					for attempt := 0; ; attempt++ {
						want := project(c.mustGet(uid, nil), m.paths...)
						got := c.mustGet(uid, h)
						if proto.Equal(got, want) {
							break
						}
						if c.lastAttempt(attempt) {
							c.Failf(describe("GetPod", h, "podUID="+uid), short(want), short(got))
						}
					}
				}
			})
	}
	register("WatchPods/FieldMask/Projection",
		"With a field mask, WatchPods events MUST carry exactly the selected fields plus metadata.namespace, metadata.name and metadata.uid.",
		needs(NeedFieldMasks, NeedEventTypes), func(c *C) {
			c.podsForMasks()
			paths := []string{"spec.containers.image", "status.phase"}
			h := textMask(strings.Join(paths, ","))
			for attempt := 0; ; attempt++ {
				w := c.watch(h)
				got := w.initial()
				w.close()
				want := c.mustList(nil)
				sortPods(got)
				sortPods(want)
				for i := range want {
					want[i] = project(want[i], append(paths, identityPaths...)...)
				}
				diff := equalPods(got, want)
				if diff == "" {
					return
				}
				if c.lastAttempt(attempt) {
					c.Failf(describe("WatchPods", h, ""), "the pods of ListPods trimmed to the mask and the identity fields", diff)
				}
			}
		})
	register("WatchPods/FieldMask/Identity",
		"WatchPods events MUST carry metadata.namespace, metadata.name and metadata.uid even when the field mask does not select them.",
		needs(NeedFieldMasks, NeedEventTypes), func(c *C) {
			c.podsForMasks()
			h := textMask("status.phase")
			w := c.watch(h)
			for _, p := range w.initial() {
				m := p.GetMetadata()
				if m.GetNamespace() == "" || m.GetName() == "" || m.GetUid() == "" || len(m.GetLabels()) > 0 {
					c.Failf(describe("WatchPods", h, ""), "events with metadata.namespace, name and uid and nothing else of the metadata", short(p))
				}
			}
		})
	register("ListPods/FieldMask/InvalidPath",
		"ListPods with an invalid field mask path (unknown field, empty element, below a scalar, into a map) MUST fail with INVALID_ARGUMENT.",
		needs(NeedFieldMasks), func(c *C) {
			for _, m := range invalidMasks {
				h := m()
				if _, err := c.list(h); codeOf(err) != connect.CodeInvalidArgument {
					c.Failf(describe("ListPods", h, ""), "INVALID_ARGUMENT", codeName(err))
				}
			}
		})
	register("GetPod/FieldMask/InvalidPath",
		"GetPod with an invalid field mask path MUST fail with INVALID_ARGUMENT.",
		needs(NeedFieldMasks), func(c *C) {
			uid := c.podsForMasks()[0].GetMetadata().GetUid()
			for _, m := range invalidMasks {
				h := m()
				if _, err := c.get(uid, h); codeOf(err) != connect.CodeInvalidArgument {
					c.Failf(describe("GetPod", h, "podUID="+uid), "INVALID_ARGUMENT", codeName(err))
				}
			}
		})
	register("WatchPods/FieldMask/InvalidPath",
		"WatchPods with an invalid field mask path MUST end with INVALID_ARGUMENT before any event.",
		needs(NeedFieldMasks), func(c *C) {
			for _, m := range invalidMasks {
				h := m()
				w := c.watch(h)
				ev := w.next(c.recvTimeout())
				if codeOf(ev.err) != connect.CodeInvalidArgument {
					c.Failf(describe("WatchPods", h, ""), "the stream ends with INVALID_ARGUMENT", ev.String())
				}
				w.close()
			}
		})
	register("WatchPods/FieldMask/UnmaskedChange",
		"With a field mask, WatchPods MUST NOT send MODIFIED when only unselected fields changed: after a label edit then a phase edit, the next event of a status.phase watcher is the phase change.",
		needs(NeedFieldMasks, NeedDriver, NeedEventTypes, NeedManifestStatus), func(c *C) {
			s := podSpec{name: "masked", version: 1, phase: corev1.PodPending}
			o := c.create(s)
			h := textMask("status.phase")
			w := c.watch(h)
			w.initial()
			s.version, s.labels = 2, map[string]string{"edited": "label"}
			c.update(o, s) // only labels and annotations change
			s.version, s.phase = 3, corev1.PodRunning
			c.update(o, s)
			ev := w.mustNext()
			if ev.typ != podsv1alpha1.EventType_EVENT_TYPE_MODIFIED || ev.pod.GetStatus().GetPhase() != string(corev1.PodRunning) {
				c.Failf(describe("WatchPods", h, "")+" while the driver edits a label, then status.phase", "EVENT_TYPE_MODIFIED with status.phase Running", ev.String())
			}
		})

	registerWatchCases()
	registerLimitCases()
	registerLifecycleCases()
	registerOptionalCases()
	registerSelectorCases()
	registerResumeCases()
	registerFindCases()
}

// sortPods sorts pods as ListPods does.
func sortPods(pods []*corev1pb.Pod) {
	slices.SortStableFunc(pods, func(a, b *corev1pb.Pod) int { return cmp.Compare(sortKey(a), sortKey(b)) })
}
