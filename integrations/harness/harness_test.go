package harness_test

import (
	"context"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/podsapi/podsapi/integrations/harness"
)

// TestEnv lists the node's pods as an agent, directly and through the
// door, and checks that the counters see the door answer it locally and
// the API server not at all.
func TestEnv(t *testing.T) {
	env := harness.Start(t)
	env.CreatePod(t, harness.Pod("apps", "on-node", env.Node))
	env.CreatePod(t, harness.Pod("apps", "elsewhere", "node-2"))
	agent := env.Agent(t, "agents", "reader", harness.PodReader)
	direct, door := agent.Clients()
	opts := metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", env.Node).String()}

	beforeDoor, beforeAPI := env.Door(t), env.APIServer(t, "pods")
	list, err := door.CoreV1().Pods("").List(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 || list.Items[0].Name != "on-node" {
		t.Fatalf("through the door: %v, want [on-node]", list.Items)
	}
	afterDoor, afterAPI := env.Door(t), env.APIServer(t, "pods")
	if n := afterDoor.Answered[harness.DoorRequest{Route: "local", Verb: "list"}] - beforeDoor.Answered[harness.DoorRequest{Route: "local", Verb: "list"}]; n != 1 {
		t.Errorf("the door answered %v lists locally, want 1", n)
	}
	if n := afterAPI.Requests["LIST"] - beforeAPI.Requests["LIST"]; n != 0 {
		t.Errorf("the API server answered %v pod lists, want 0", n)
	}

	directList, err := direct.CoreV1().Pods("").List(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if got := env.APIServer(t, "pods").Requests["LIST"] - afterAPI.Requests["LIST"]; got != 1 {
		t.Errorf("the API server answered %v pod lists directly, want 1", got)
	}
	names := func(l []string) []string { slices.Sort(l); return l }
	var a, b []string
	for _, p := range list.Items {
		a = append(a, string(p.UID))
	}
	for _, p := range directList.Items {
		b = append(b, string(p.UID))
	}
	if !slices.Equal(names(a), names(b)) {
		t.Fatalf("door %v, direct %v", a, b)
	}
}
