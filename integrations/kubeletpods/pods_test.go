package kubeletpods_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	podsv1alpha1 "k8s.io/kubelet/pkg/apis/pods/v1alpha1"

	"github.com/podsapi/podsapi/integrations/harness"
	"github.com/podsapi/podsapi/test/kubetest"
)

// TestKubeletPodsClient lists, gets and watches the node's pods with the
// kubelet's published client through podsapi's socket, and the same pods
// directly from the API server (a list and a watch with the spec.nodeName
// field selector, as the kubelet's own pod source reads them): the same
// pods and the same changes are expected, and the socket's consumers cost
// the API server no pod request or watch.
func TestKubeletPodsClient(t *testing.T) {
	cluster := harness.StartCluster(t)
	pa := cluster.StartPodsapi(t, "node-1")
	ctx, cancel := context.WithTimeout(context.Background(), 2*kubetest.Timeout)
	defer cancel()
	const ns = "apps"
	cluster.CreatePod(t, harness.Pod(ns, "before-a", pa.Node))
	cluster.CreatePod(t, harness.Pod(ns, "before-b", pa.Node))
	cluster.CreatePod(t, harness.Pod(ns, "elsewhere", "node-2"))
	onNode := metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", pa.Node).String()}

	// The client as the KEP documents it: grpc-go on the UNIX socket, no
	// credentials (the socket's permissions are the access control).
	conn, err := grpc.NewClient("unix://"+pa.Socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := podsv1alpha1.NewPodsClient(conn)

	direct, err := cluster.Admin.CoreV1().Pods("").List(ctx, onNode)
	if err != nil {
		t.Fatal(err)
	}
	before := cluster.APIServer(t, "pods") // After the test's own list.
	var listed []corev1.Pod
	t.Run("ListPods is the API server's pods of the node", func(t *testing.T) {
		// podsapi has synced, but a pod created just before may still be on
		// its way from the API server's watch.
		want := summaries(direct.Items)
		var got []string
		kubetest.Eventually(t, "ListPods", func() error {
			resp, err := client.ListPods(ctx, &podsv1alpha1.ListPodsRequest{})
			if err != nil {
				return err
			}
			listed = nil
			for _, b := range resp.GetPods() {
				var p corev1.Pod
				if err := p.Unmarshal(b); err != nil { // As the KEP says: v1.Pod#Unmarshal.
					t.Fatalf("pod bytes: %v", err)
				}
				listed = append(listed, p)
			}
			if got = summaries(listed); !slices.Equal(got, want) {
				return fmt.Errorf("podsapi %q, API server %q", got, want)
			}
			return nil
		})
	})
	t.Run("GetPod by UID", func(t *testing.T) {
		if len(listed) == 0 {
			t.Skip("nothing listed")
		}
		resp, err := client.GetPod(ctx, &podsv1alpha1.GetPodRequest{PodUID: string(listed[0].UID)})
		if err != nil {
			t.Fatal(err)
		}
		var p corev1.Pod
		if err := p.Unmarshal(resp.GetPod()); err != nil {
			t.Fatal(err)
		}
		if got, want := summary(&p), summary(&listed[0]); got != want {
			t.Fatalf("GetPod %q, ListPods %q", got, want)
		}
	})

	// The watch through the socket, and the API server's own.
	stream, err := client.WatchPods(ctx, &podsv1alpha1.WatchPodsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var initial []string
	for {
		ev, err := stream.Recv()
		if err != nil {
			t.Fatalf("WatchPods: %v", err)
		}
		if ev.GetType() == podsv1alpha1.EventType_INITIAL_SYNC_COMPLETE {
			break
		}
		p := decode(t, ev)
		if ev.GetType() != podsv1alpha1.EventType_ADDED {
			t.Fatalf("initial event %v %s, want ADDED", ev.GetType(), summary(p))
		}
		initial = append(initial, summary(p))
	}
	slices.Sort(initial)
	if want := summaries(listed); !slices.Equal(initial, want) {
		t.Errorf("WatchPods' initial pods %q, ListPods %q", initial, want)
	}
	after := cluster.APIServer(t, "pods")
	harness.Record(t, "k8s.io/kubelet v0.37.2 Pods API client (ListPods, GetPod, WatchPods)", "through podsapi's socket",
		fmt.Sprintf("pod watches opened %v, pod lists %v, pod gets %v",
			after.WatchesOpen-before.WatchesOpen, after.Requests["LIST"]-before.Requests["LIST"], after.Requests["GET"]-before.Requests["GET"]))
	if after.Requests["LIST"] > before.Requests["LIST"] || after.WatchesOpen > before.WatchesOpen {
		t.Errorf("the socket's consumer cost the API server: before %v, after %v", before, after)
	}

	directWatch, err := cluster.Admin.CoreV1().Pods("").Watch(ctx, metav1.ListOptions{
		FieldSelector: onNode.FieldSelector, ResourceVersion: listResourceVersion(ctx, t, cluster, onNode),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer directWatch.Stop()

	cluster.CreatePod(t, harness.Pod(ns, "elsewhere-later", "node-2")) // Never seen.
	cluster.CreatePod(t, harness.Pod(ns, "added", pa.Node))
	cluster.UpdatePod(t, ns, "added", func(p *corev1.Pod) { p.Labels["tier"] = "gold" })
	cluster.DeletePod(t, ns, "added")
	// A delete with a grace period of 0 is a MODIFIED event (the deletion
	// timestamp set), then a DELETED one.
	want := []string{"ADDED " + ns + "/added", "MODIFIED " + ns + "/added tier=gold", "MODIFIED " + ns + "/added tier=gold deleting", "DELETED " + ns + "/added tier=gold deleting"}
	var viaSocket, viaAPIServer []string
	for range want {
		ev, err := stream.Recv()
		if err != nil {
			t.Fatalf("WatchPods: %v (events so far %q)", err, viaSocket)
		}
		viaSocket = append(viaSocket, ev.GetType().String()+" "+change(decode(t, ev)))
		select {
		case e, ok := <-directWatch.ResultChan():
			if !ok {
				t.Fatalf("the API server's watch ended (events so far %q)", viaAPIServer)
			}
			p, ok := e.Object.(*corev1.Pod)
			if !ok {
				t.Fatalf("the API server's watch: %v %T", e.Type, e.Object)
			}
			viaAPIServer = append(viaAPIServer, apiType(e.Type)+" "+change(p))
		case <-time.After(kubetest.Timeout):
			t.Fatalf("no event from the API server within %v (events so far %q)", kubetest.Timeout, viaAPIServer)
		}
	}
	t.Logf("through podsapi's socket %q; from the API server %q", viaSocket, viaAPIServer)
	if !slices.Equal(viaSocket, want) {
		t.Errorf("WatchPods through podsapi: %q, want %q", viaSocket, want)
	}
	if !slices.Equal(viaSocket, viaAPIServer) {
		t.Errorf("WatchPods through podsapi %q, the API server's watch %q", viaSocket, viaAPIServer)
	}
}

// listResourceVersion returns the resource version of a list of the
// node's pods, from which the direct watch starts.
func listResourceVersion(ctx context.Context, t *testing.T, cluster *harness.Cluster, opts metav1.ListOptions) string {
	t.Helper()
	list, err := cluster.Admin.CoreV1().Pods("").List(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	return list.ResourceVersion
}

func decode(t *testing.T, ev *podsv1alpha1.WatchPodsEvent) *corev1.Pod {
	t.Helper()
	var p corev1.Pod
	if err := p.Unmarshal(ev.GetPod()); err != nil {
		t.Fatalf("%v event's pod bytes: %v", ev.GetType(), err)
	}
	return &p
}

func apiType(t watch.EventType) string {
	switch t {
	case watch.Added:
		return "ADDED"
	case watch.Modified:
		return "MODIFIED"
	case watch.Deleted:
		return "DELETED"
	}
	return string(t)
}

// summary is what both sides must agree on: namespace/name, UID,
// resourceVersion (podsapi's socket keeps its source's), node and labels.
func summary(p *corev1.Pod) string {
	return fmt.Sprintf("%s/%s uid=%s rv=%s node=%s labels=%v", p.Namespace, p.Name, p.UID, p.ResourceVersion, p.Spec.NodeName, p.Labels)
}

func summaries(pods []corev1.Pod) []string {
	var out []string
	for i := range pods {
		out = append(out, summary(&pods[i]))
	}
	slices.Sort(out)
	return out
}

// change names a pod in an event: namespace/name, its labels other than
// app, and "deleting" when its deletion timestamp is set.
func change(p *corev1.Pod) string {
	var l []string
	for k, v := range p.Labels {
		if k != "app" {
			l = append(l, k+"="+v)
		}
	}
	slices.Sort(l)
	s := strings.TrimSpace(p.Namespace + "/" + p.Name + " " + strings.Join(l, ","))
	if p.DeletionTimestamp != nil {
		s += " deleting"
	}
	return s
}
