package client_test

import (
	"errors"
	"testing"

	"connectrpc.com/connect"
	corev1 "k8s.io/api/core/v1"

	"github.com/podsapi/podsapi/client"
)

// selectorPods returns default/web-1 (tier=web), default/web-2
// (tier=cache) and kube-system/dns-0 (tier=web), in the order the server
// lists them.
func selectorPods() []*corev1.Pod {
	pods := samplePods()
	pods[1].Labels["tier"] = "cache"
	return pods
}

// names returns namespace/name of each pod.
func names(pods []*corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, key(p))
	}
	return out
}

// TestSelectorsSameOnBothWires checks that List and Watch with selectors
// give the same pods and events on podsapi's typed wire, which filters on
// the server, and on the kubelet's wire, where the client filters itself.
func TestSelectorsSameOnBothWires(t *testing.T) {
	for _, pair := range wirePairs {
		t.Run(pair.name, func(t *testing.T) { testSelectorsSameOnBothWires(t, pair.start) })
	}
}

func testSelectorsSameOnBothWires(t *testing.T, start func(t *testing.T, pods []*corev1.Pod) wirePair) {
	lists := []struct {
		name string
		opts []client.CallOption
		want []string
	}{
		{"None", nil, []string{"default/web-1", "default/web-2", "kube-system/dns-0"}},
		{"Namespace", []client.CallOption{client.WithNamespace("default")}, []string{"default/web-1", "default/web-2"}},
		{"Labels", []client.CallOption{client.WithLabelSelector("tier=web")}, []string{"default/web-1", "kube-system/dns-0"}},
		{"LabelsSet", []client.CallOption{client.WithLabelSelector("tier in (cache,db),!missing")}, []string{"default/web-2"}},
		{"Fields", []client.CallOption{client.WithFieldSelector("metadata.name!=web-1,metadata.namespace=default")}, []string{"default/web-2"}},
		{"HostNetwork", []client.CallOption{client.WithFieldSelector("spec.hostNetwork=false")}, []string{"default/web-1", "default/web-2", "kube-system/dns-0"}},
		{"AllWithMask", []client.CallOption{client.WithNamespace("default"), client.WithLabelSelector("tier=web"), client.WithFieldSelector("metadata.name=web-1"), client.WithFields("metadata.name")}, []string{"default/web-1"}},
		{"Nothing", []client.CallOption{client.WithNamespace("nope")}, nil},
	}
	pair := start(t, selectorPods())
	ctx := testCtx(t)
	for _, tt := range lists {
		t.Run("List"+tt.name, func(t *testing.T) {
			want, rev, err := pair.typed.ListRevision(ctx, tt.opts...)
			if err != nil {
				t.Fatal(err)
			}
			if rev == "" {
				t.Error("podsapi's typed wire listed without a revision")
			}
			if got := names(want); !equalStrings(got, tt.want) {
				t.Fatalf("typed wire: %q, want %q", got, tt.want)
			}
			got, err := pair.kubelet.List(ctx, tt.opts...)
			if err != nil {
				t.Fatal(err)
			}
			samePods(t, "List", got, want)
		})
	}

	t.Run("Watch", func(t *testing.T) {
		opts := []client.CallOption{client.WithLabelSelector("tier=web"), client.WithFields("metadata.labels", "status.phase")}
		tw, err := pair.typed.Watch(ctx, opts...)
		if err != nil {
			t.Fatal(err)
		}
		defer tw.Close()
		kw, err := pair.kubelet.Watch(ctx, opts...)
		if err != nil {
			t.Fatal(err)
		}
		defer kw.Close()
		want := snapshot(t, tw)
		if got := names(want); !equalStrings(got, []string{"default/web-1", "kube-system/dns-0"}) {
			t.Fatalf("snapshot %q", got)
		}
		samePods(t, "Watch snapshot", snapshot(t, kw), want)

		pods := selectorPods()
		web1, web2, dns0 := pods[0], pods[1], pods[2]
		// web-2 starts to match, web-1 stops, dns-0 changes while it
		// matches, web-1 changes while it does not, then a new pod.
		in := web2.DeepCopy()
		in.ResourceVersion, in.Labels["tier"] = "2", "web"
		out := web1.DeepCopy()
		out.ResourceVersion, out.Labels["tier"] = "2", "cache"
		mod := dns0.DeepCopy()
		mod.ResourceVersion, mod.Status.Phase = "2", corev1.PodFailed
		outMod := out.DeepCopy()
		outMod.ResourceVersion, outMod.Status.Phase = "3", corev1.PodFailed
		added := selectorPods()[0].DeepCopy()
		added.Name, added.UID = "web-9", "uid-web-9"
		for _, p := range []*corev1.Pod{in, out, mod, outMod, added} {
			pair.set(p)
		}
		wantEvents := []string{"ADDED default/web-2", "DELETED default/web-1", "MODIFIED kube-system/dns-0", "ADDED default/web-9"}
		for i, w := range wantEvents {
			te, ke := next(t, tw), next(t, kw)
			if got := te.Type.String() + " " + key(te.Pod); got != w {
				t.Fatalf("typed event %d: %s, want %s", i, got, w)
			}
			if te.Revision == "" {
				t.Errorf("typed event %d without a revision", i)
			}
			if got := ke.Type.String() + " " + key(ke.Pod); got != w {
				t.Fatalf("kubelet wire event %d: %s, want %s", i, got, w)
			}
			samePods(t, "Watch", []*corev1.Pod{ke.Pod}, []*corev1.Pod{te.Pod})
		}
	})
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestInvalidSelectors checks that invalid selectors fail alike on both
// wires, with INVALID_ARGUMENT and ErrInvalidSelector.
func TestInvalidSelectors(t *testing.T) {
	tests := []struct {
		name string
		opt  client.CallOption
	}{
		{"Labels", client.WithLabelSelector("tier=(")},
		{"Fields", client.WithFieldSelector("metadata.name")},
		{"UnsupportedField", client.WithFieldSelector("spec.containers=x")},
	}
	for _, pair := range wirePairs {
		p := pair.start(t, selectorPods())
		for _, tt := range tests {
			for wire, c := range map[string]*client.Client{"typed": p.typed, "kubelet": p.kubelet} {
				t.Run(pair.name+"/"+tt.name+"/"+wire, func(t *testing.T) {
					ctx := testCtx(t)
					_, err := c.List(ctx, tt.opt)
					if !errors.Is(err, client.ErrInvalidSelector) || connect.CodeOf(err) != connect.CodeInvalidArgument {
						t.Errorf("List: %v, want INVALID_ARGUMENT wrapping ErrInvalidSelector", err)
					}
					if _, err := c.Watch(ctx, tt.opt); !errors.Is(err, client.ErrInvalidSelector) || connect.CodeOf(err) != connect.CodeInvalidArgument {
						t.Errorf("Watch: %v, want INVALID_ARGUMENT wrapping ErrInvalidSelector", err)
					}
				})
			}
		}
	}
}
