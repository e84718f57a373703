package harness_test

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/podsapi/podsapi/integrations/harness"
)

// TestHarness lists the node's pods as an agent, directly and through the
// door, each way from its kubeconfig's context, and checks the three ways
// of counting: the door's counters see it answer locally, the API
// server's see no list through the door and one directly, and the audit
// log has the agent's direct list and none through the door.
func TestHarness(t *testing.T) {
	cluster := harness.StartCluster(t)
	pa := cluster.StartPodsapi(t, "node-1")
	cluster.CreatePod(t, harness.Pod("apps", "on-node", pa.Node))
	cluster.CreatePod(t, harness.Pod("apps", "elsewhere", "node-2"))
	agent := cluster.Agent(t, "agents", "reader", harness.PodReader)
	direct := client(t, agent.Kubeconfig(t, pa, harness.ContextDirect))
	door := client(t, agent.Kubeconfig(t, pa, harness.ContextPodsapi))
	opts := metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", pa.Node).String()}
	local := harness.DoorRequest{Route: "local", Verb: "list"}

	beforeDoor, beforeAPI := pa.Door(t), cluster.APIServer(t, "pods")
	list, err := door.CoreV1().Pods("").List(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 || list.Items[0].Name != "on-node" {
		t.Fatalf("through the door: %v, want [on-node]", list.Items)
	}
	afterDoor, afterAPI := pa.Door(t), cluster.APIServer(t, "pods")
	if n := afterDoor.Answered[local] - beforeDoor.Answered[local]; n != 1 {
		t.Errorf("the door answered %v lists locally, want 1", n)
	}
	if n := afterAPI.Requests["LIST"] - beforeAPI.Requests["LIST"]; n != 0 {
		t.Errorf("the API server answered %v pod lists, want 0", n)
	}
	if n := harness.Count(cluster.Requests(t, agent.User()), "list", "pods"); n != 0 {
		t.Errorf("the audit log has %d pod lists of %s, want 0", n, agent.User())
	}

	directList, err := direct.CoreV1().Pods("").List(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if got := cluster.APIServer(t, "pods").Requests["LIST"] - afterAPI.Requests["LIST"]; got != 1 {
		t.Errorf("the API server answered %v pod lists directly, want 1", got)
	}
	if n := harness.Count(cluster.Requests(t, agent.User()), "list", "pods"); n != 1 {
		t.Errorf("the audit log has %d pod lists of %s, want 1", n, agent.User())
	}
	if a, b := uids(list.Items), uids(directList.Items); !slices.Equal(a, b) {
		t.Fatalf("door %v, direct %v", a, b)
	}
}

// client is a clientset of the kubeconfig's current context, as an agent
// makes it from --kubeconfig.
func client(t *testing.T, kubeconfig string) *kubernetes.Clientset {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	return kubernetes.NewForConfigOrDie(cfg)
}

// uids returns the pods' UIDs, sorted.
func uids(pods []corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, string(p.UID))
	}
	slices.Sort(out)
	return out
}
