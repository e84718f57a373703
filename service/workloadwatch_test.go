package service_test

import (
	"strings"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	podsv1alpha1 "github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1"
	"github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1/podsv1alpha1connect"
	"github.com/podsapi/podsapi/service"
	"github.com/podsapi/podsapi/store"
	"github.com/podsapi/podsapi/test/podstest"
	"github.com/podsapi/podsapi/workload"
)

// workloadPods are pods of every shape of workload the tests below select:
// two of the Deployment web (derived from their ReplicaSet's name), one of
// the StatefulSet api, and one without a controller.
type workloadPods struct {
	webA, webB, api, debug *corev1.Pod
}

// ownedBy returns pod owned by the controller kind/name of apiVersion.
func ownedBy(pod *corev1.Pod, apiVersion, kind, name string) *corev1.Pod {
	yes := true
	pod = pod.DeepCopy()
	pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: name, UID: types.UID("uid-" + name), Controller: &yes}}
	return pod
}

// ofDeployment returns pod owned by the ReplicaSet <deployment>-<hash>, with
// its pod-template-hash label.
func ofDeployment(pod *corev1.Pod, deployment, hash string) *corev1.Pod {
	pod = ownedBy(pod, "apps/v1", "ReplicaSet", deployment+"-"+hash)
	pod.Labels = map[string]string{"pod-template-hash": hash}
	return pod
}

func newWorkloadPods() workloadPods {
	debug := podstest.Pod("shop", "debug", 4)
	debug.OwnerReferences = nil
	return workloadPods{
		webA:  ofDeployment(podstest.Pod("shop", "web-5d9f8b6c5d-aaaaa", 1), "web", "5d9f8b6c5d"),
		webB:  ofDeployment(podstest.Pod("shop", "web-5d9f8b6c5d-bbbbb", 2), "web", "5d9f8b6c5d"),
		api:   ownedBy(podstest.Pod("shop", "api-0", 3), "apps/v1", "StatefulSet", "api"),
		debug: debug,
	}
}

// workloadStore returns a synced store of pods, fed through a Resolver
// without an API server (what the pods tell), and the sink that feeds both.
func workloadStore(pods ...*corev1.Pod) (*store.Store, *workload.Resolver, workload.Sink) {
	st := store.New()
	r := workload.NewResolver()
	sink := r.Sink(st)
	for _, p := range pods {
		sink.Upsert(p)
	}
	sink.MarkSynced()
	return st, r, sink
}

var (
	webWorkload  = &podsv1alpha1.PodWorkload{Kind: "Deployment", Name: "web", Resolution: podsv1alpha1.WorkloadResolution_WORKLOAD_RESOLUTION_DERIVED}
	apiWorkload  = &podsv1alpha1.PodWorkload{Kind: "StatefulSet", Name: "api", Resolution: podsv1alpha1.WorkloadResolution_WORKLOAD_RESOLUTION_RESOLVED}
	noneWorkload = &podsv1alpha1.PodWorkload{Resolution: podsv1alpha1.WorkloadResolution_WORKLOAD_RESOLUTION_RESOLVED}
	shopWorkload = &podsv1alpha1.PodWorkload{Kind: "Deployment", Name: "shop", Resolution: podsv1alpha1.WorkloadResolution_WORKLOAD_RESOLUTION_DERIVED}
)

// TestListPodsWorkloads answers the workload of every pod listed by UID,
// whatever the field mask, and selects pods by their workload.
func TestListPodsWorkloads(t *testing.T) {
	p := newWorkloadPods()
	st, r, _ := workloadStore(p.webA, p.webB, p.api, p.debug)
	h := newHarness(t, st, true, service.WithWorkloads(r))
	c := podsv1alpha1connect.NewPodsClient(h.http, baseURL, connect.WithGRPC())
	all := map[string]*podsv1alpha1.PodWorkload{string(p.webA.UID): webWorkload, string(p.webB.UID): webWorkload, string(p.api.UID): apiWorkload, string(p.debug.UID): noneWorkload}

	tests := []struct {
		name          string
		req           *podsv1alpha1.PodListRequest
		wantPods      []string
		wantWorkloads map[string]*podsv1alpha1.PodWorkload
	}{
		{name: "include", req: &podsv1alpha1.PodListRequest{IncludeWorkloads: true},
			wantPods: []string{p.api.Name, p.debug.Name, p.webA.Name, p.webB.Name}, wantWorkloads: all},
		{name: "without include", req: &podsv1alpha1.PodListRequest{},
			wantPods: []string{p.api.Name, p.debug.Name, p.webA.Name, p.webB.Name}},
		{name: "deployment web", req: &podsv1alpha1.PodListRequest{IncludeWorkloads: true, WorkloadSelector: &podsv1alpha1.WorkloadSelector{Kind: "Deployment", Name: "web"}},
			wantPods: []string{p.webA.Name, p.webB.Name}, wantWorkloads: map[string]*podsv1alpha1.PodWorkload{string(p.webA.UID): webWorkload, string(p.webB.UID): webWorkload}},
		{name: "kind only, without include", req: &podsv1alpha1.PodListRequest{WorkloadSelector: &podsv1alpha1.WorkloadSelector{Kind: "StatefulSet"}},
			wantPods: []string{p.api.Name}},
		{name: "any workload", req: &podsv1alpha1.PodListRequest{WorkloadSelector: &podsv1alpha1.WorkloadSelector{}},
			wantPods: []string{p.api.Name, p.webA.Name, p.webB.Name}},
		{name: "and a label selector", req: &podsv1alpha1.PodListRequest{LabelSelector: "tier", WorkloadSelector: &podsv1alpha1.WorkloadSelector{Kind: "Deployment"}}},
		{name: "no such workload", req: &podsv1alpha1.PodListRequest{IncludeWorkloads: true, WorkloadSelector: &podsv1alpha1.WorkloadSelector{Kind: "Deployment", Name: "api"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := connect.NewRequest(tt.req)
			req.Header().Set("x-kubernetes-fieldmask", "status.phase")
			resp, err := c.ListPods(t.Context(), req)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, pod := range resp.Msg.Pods {
				names = append(names, pod.GetMetadata().GetName())
				if pod.GetStatus().GetPhase() == "" || pod.GetSpec() != nil {
					t.Errorf("pod %s: %v, want it trimmed by the mask", pod.GetMetadata().GetName(), pod)
				}
			}
			// The mask keeps no name: compare the count, then the UIDs
			// of the workloads.
			if len(names) != len(tt.wantPods) {
				t.Errorf("%d pods, want %v", len(names), tt.wantPods)
			}
			if len(resp.Msg.Workloads) != len(tt.wantWorkloads) {
				t.Errorf("workloads %v, want %v", resp.Msg.Workloads, tt.wantWorkloads)
			}
			for uid, w := range tt.wantWorkloads {
				if !proto.Equal(resp.Msg.Workloads[uid], w) {
					t.Errorf("workload of %s: %v, want %v", uid, resp.Msg.Workloads[uid], w)
				}
			}
		})
	}
}

// TestListPodsWorkloadSelectorRefused refuses a workload selector that is
// too long, and any workload selector of a server without workloads, whose
// lists asking to include them carry none.
func TestListPodsWorkloadSelectorRefused(t *testing.T) {
	p := newWorkloadPods()
	st, r, _ := workloadStore(p.webA, p.api)
	with := podsv1alpha1connect.NewPodsClient(newHarness(t, st, false, service.WithWorkloads(r)).http, baseURL)
	without := podsv1alpha1connect.NewPodsClient(newHarness(t, st, false).http, baseURL)

	for _, tt := range []struct {
		name       string
		c          podsv1alpha1connect.PodsClient
		sel        *podsv1alpha1.WorkloadSelector
		code       connect.Code
		reason     string
		inMessage  string
		watchToo   bool
		wantListed int
	}{
		{name: "kind too long", c: with, sel: &podsv1alpha1.WorkloadSelector{Kind: strings.Repeat("k", 254)}, code: connect.CodeInvalidArgument, reason: "INVALID_SELECTOR", inMessage: "workload_selector.kind"},
		{name: "name too long", c: with, sel: &podsv1alpha1.WorkloadSelector{Name: strings.Repeat("n", 254)}, code: connect.CodeInvalidArgument, reason: "INVALID_SELECTOR", inMessage: "workload_selector.name"},
		{name: "workloads off", c: without, sel: &podsv1alpha1.WorkloadSelector{Kind: "Deployment"}, code: connect.CodeFailedPrecondition, reason: "WORKLOADS_OFF", inMessage: "--workloads=off"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.c.ListPods(t.Context(), connect.NewRequest(&podsv1alpha1.PodListRequest{WorkloadSelector: tt.sel}))
			if podstest.ErrorCode(err) != tt.code || podstest.ErrorReason(err) != tt.reason || !strings.Contains(podstest.ErrorMessage(err), tt.inMessage) {
				t.Errorf("ListPods: %v (reason %q), want %v %s naming %q", err, podstest.ErrorReason(err), tt.code, tt.reason, tt.inMessage)
			}
			s, err := tt.c.WatchPods(t.Context(), connect.NewRequest(&podsv1alpha1.PodWatchRequest{WorkloadSelector: tt.sel}))
			if err == nil {
				for s.Receive() {
				}
				err = s.Err()
				s.Close()
			}
			if podstest.ErrorCode(err) != tt.code || podstest.ErrorReason(err) != tt.reason {
				t.Errorf("WatchPods: %v (reason %q), want %v %s", err, podstest.ErrorReason(err), tt.code, tt.reason)
			}
		})
	}
	t.Run("include without workloads", func(t *testing.T) {
		resp, err := without.ListPods(t.Context(), connect.NewRequest(&podsv1alpha1.PodListRequest{IncludeWorkloads: true}))
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Msg.Pods) != 2 || len(resp.Msg.Workloads) != 0 {
			t.Errorf("%d pods, workloads %v: want 2 pods and no workloads", len(resp.Msg.Pods), resp.Msg.Workloads)
		}
	})
}

// watchEvent is what a test expects of one event of a watch that serves
// workloads.
type watchEvent struct {
	typ      podsv1alpha1.EventType
	pod      string
	workload *podsv1alpha1.PodWorkload
}

// expectEvents receives len(want) events of s and checks them.
func expectEvents(t *testing.T, s *connect.ServerStreamForClient[podsv1alpha1.PodWatchResponse], want ...watchEvent) {
	t.Helper()
	for _, w := range want {
		if !s.Receive() {
			t.Fatalf("stream ended (%v), want %v %s", s.Err(), w.typ, w.pod)
		}
		ev := s.Msg()
		if ev.Type != w.typ || ev.Pod.GetMetadata().GetName() != w.pod || !proto.Equal(ev.Workload, w.workload) {
			t.Fatalf("event %v %s with workload %v, want %v %s with %v", ev.Type, ev.Pod.GetMetadata().GetName(), ev.Workload, w.typ, w.pod, w.workload)
		}
	}
}

// TestWatchPodsWorkloads sends each event with its pod's workload when
// asked, on both the events sent one at a time and the streamed snapshot's
// path, and follows a workload selector as the API server follows
// selectors: a pod whose workload stops matching is DELETED, one that
// starts matching ADDED, a change of a pod that does not match is not sent.
func TestWatchPodsWorkloads(t *testing.T) {
	const (
		added    = podsv1alpha1.EventType_EVENT_TYPE_ADDED
		modified = podsv1alpha1.EventType_EVENT_TYPE_MODIFIED
		deleted  = podsv1alpha1.EventType_EVENT_TYPE_DELETED
		synced   = podsv1alpha1.EventType_EVENT_TYPE_INITIAL_SYNC_COMPLETE
	)
	for _, streams := range []bool{false, true} {
		name := map[bool]string{false: "events one at a time", true: "stream of envelopes"}[streams]
		t.Run(name+"/include", func(t *testing.T) {
			p := newWorkloadPods()
			st, r, sink := workloadStore(p.webA, p.api, p.debug)
			h := newHarness(t, st, streams, service.WithWorkloads(r))
			c := podsv1alpha1connect.NewPodsClient(h.http, baseURL, connect.WithGRPC())
			req := connect.NewRequest(&podsv1alpha1.PodWatchRequest{IncludeWorkloads: true})
			req.Header().Set("x-kubernetes-fieldmask", "metadata.name")
			s, err := c.WatchPods(t.Context(), req)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			expectEvents(t, s,
				watchEvent{added, p.api.Name, apiWorkload}, watchEvent{added, p.debug.Name, noneWorkload},
				watchEvent{added, p.webA.Name, webWorkload}, watchEvent{synced, "", nil})
			// debug joins the Deployment shop: its workload changes with
			// the pod's owner, though the mask hides the change.
			sink.Upsert(ofDeployment(p.debug, "shop", "7c6b5a4d3e"))
			sink.Delete(p.webA.UID)
			expectEvents(t, s, watchEvent{modified, p.debug.Name, shopWorkload}, watchEvent{deleted, p.webA.Name, webWorkload})
		})
		t.Run(name+"/selector", func(t *testing.T) {
			p := newWorkloadPods()
			st, r, sink := workloadStore(p.webA, p.webB, p.api, p.debug)
			h := newHarness(t, st, streams, service.WithWorkloads(r))
			c := podsv1alpha1connect.NewPodsClient(h.http, baseURL, connect.WithGRPC())
			s, err := c.WatchPods(t.Context(), connect.NewRequest(&podsv1alpha1.PodWatchRequest{
				IncludeWorkloads: true, WorkloadSelector: &podsv1alpha1.WorkloadSelector{Kind: "Deployment", Name: "web"},
			}))
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			expectEvents(t, s, watchEvent{added, p.webA.Name, webWorkload}, watchEvent{added, p.webB.Name, webWorkload}, watchEvent{synced, "", nil})

			// Not selected: api's change is not sent.
			api := p.api.DeepCopy()
			api.Status.Phase = corev1.PodFailed
			sink.Upsert(api)
			// webB moves to the Deployment shop: DELETED, with the
			// workload it has now.
			sink.Upsert(ofDeployment(p.webB, "shop", "7c6b5a4d3e"))
			// debug joins web: ADDED.
			sink.Upsert(ofDeployment(p.debug, "web", "5d9f8b6c5d"))
			// webA changes: MODIFIED.
			webA := p.webA.DeepCopy()
			webA.Status.Phase = corev1.PodSucceeded
			sink.Upsert(webA)
			expectEvents(t, s,
				watchEvent{deleted, p.webB.Name, shopWorkload},
				watchEvent{added, p.debug.Name, webWorkload},
				watchEvent{modified, p.webA.Name, webWorkload})
		})
	}
}

// TestWatchPodsWorkloadSelectorResume resumes a watch with a workload
// selector: a pod that left the workload during the gap is DELETED, and,
// since the server cannot tell which pods the client holds, a change of a
// pod outside the workload may be sent as a DELETED, once.
func TestWatchPodsWorkloadSelectorResume(t *testing.T) {
	const (
		deleted = podsv1alpha1.EventType_EVENT_TYPE_DELETED
		added   = podsv1alpha1.EventType_EVENT_TYPE_ADDED
		synced  = podsv1alpha1.EventType_EVENT_TYPE_INITIAL_SYNC_COMPLETE
	)
	p := newWorkloadPods()
	st, r, sink := workloadStore(p.webA, p.webB, p.api)
	h := newHarness(t, st, true, service.WithWorkloads(r))
	c := podsv1alpha1connect.NewPodsClient(h.http, baseURL, connect.WithGRPC())
	sel := &podsv1alpha1.WorkloadSelector{Kind: "Deployment", Name: "web"}
	list, err := c.ListPods(t.Context(), connect.NewRequest(&podsv1alpha1.PodListRequest{WorkloadSelector: sel}))
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Msg.Pods) != 2 {
		t.Fatalf("%d pods of web, want 2", len(list.Msg.Pods))
	}
	// The gap: webB leaves web, debug joins it.
	sink.Upsert(ofDeployment(p.webB, "shop", "7c6b5a4d3e"))
	sink.Upsert(ofDeployment(p.debug, "web", "5d9f8b6c5d"))
	s, err := c.WatchPods(t.Context(), connect.NewRequest(&podsv1alpha1.PodWatchRequest{
		IncludeWorkloads: true, WorkloadSelector: sel, ResumeFrom: list.Msg.Revision,
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	expectEvents(t, s,
		watchEvent{deleted, p.webB.Name, shopWorkload},
		watchEvent{added, p.debug.Name, webWorkload},
		watchEvent{synced, "", nil})
	api := p.api.DeepCopy()
	api.Status.Phase = corev1.PodFailed
	sink.Upsert(api)
	webA := p.webA.DeepCopy()
	webA.Status.Phase = corev1.PodSucceeded
	sink.Upsert(webA)
	expectEvents(t, s,
		watchEvent{deleted, p.api.Name, apiWorkload},
		watchEvent{podsv1alpha1.EventType_EVENT_TYPE_MODIFIED, p.webA.Name, webWorkload})
}
