package door_test

import (
	"net/url"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/podsapi/podsapi/kubeapi"
	"github.com/podsapi/podsapi/kubeapi/door"
	"github.com/podsapi/podsapi/store"
	"github.com/podsapi/podsapi/test/kubetest"
	"github.com/podsapi/podsapi/test/podstest"
)

// onePod may get, list and watch the pod pa-1 of namespace a only (RBAC
// resourceNames).
const onePod = "one-pod"

// TestDoorAPIServerNameSelector checks that the door authorizes a list or
// watch whose fieldSelector pins metadata.name as the API server does, as a
// request for that one pod: a caller allowed only pa-1 by name lists and
// watches it with metadata.name=pa-1 (200, through the door as from the
// API server), and is refused any other name, or no name (403, both).
func TestDoorAPIServerNameSelector(t *testing.T) {
	cp := kubetest.Start(t, onePod)
	ctx := t.Context()
	if _, err := cp.Admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: nsAllowed}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rbac := cp.Admin.RbacV1()
	if _, err := rbac.Roles(nsAllowed).Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "one-pod"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, ResourceNames: []string{"pa-1"}, Verbs: []string{"get", "list", "watch"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := rbac.RoleBindings(nsAllowed).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "one-pod"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "one-pod"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: onePod}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"pa-1", "pa-2"} {
		p := podstest.Pod(nsAllowed, name, 1)
		p.ResourceVersion, p.UID = "", ""
		if _, err := cp.Admin.CoreV1().Pods(nsAllowed).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	direct := kubernetes.NewForConfigOrDie(cp.Config(onePod, cp.Host()))
	waitUntil(t, "the role", func() bool {
		_, err := direct.CoreV1().Pods(nsAllowed).Get(ctx, "pa-1", metav1.GetOptions{})
		return err == nil
	})

	st := store.New()
	st.Upsert(podstest.Pod(nsAllowed, "pa-1", 1))
	st.Upsert(podstest.Pod(nsAllowed, "pa-2", 2))
	st.MarkSynced()
	own := cp.Config(kubetest.AdminUser, cp.Host())
	auth, err := door.NewAuth(own)
	if err != nil {
		t.Fatal(err)
	}
	pass, err := door.NewPassThrough(own)
	if err != nil {
		t.Fatal(err)
	}
	nodeName := podstest.Pod(nsAllowed, "pa-1", 1).Spec.NodeName
	s := serve(t, door.New(kubeapi.New(st, nodeName), door.WithAuth(auth), door.WithPassThrough(pass)), door.Config{})

	for _, c := range []struct {
		name, fields string
		watch        bool
		want         int
	}{
		{"list by its name", "metadata.name=pa-1,spec.nodeName=" + nodeName, false, 200},
		{"watch by its name", "metadata.name=pa-1,spec.nodeName=" + nodeName, true, 200},
		{"list by another name", "metadata.name=pa-2,spec.nodeName=" + nodeName, false, 403},
		{"list without a name", "spec.nodeName=" + nodeName, false, 403},
		{"list by a name not required", "metadata.name!=pa-2,spec.nodeName=" + nodeName, false, 403},
	} {
		t.Run(c.name, func(t *testing.T) {
			q := url.Values{"fieldSelector": {c.fields}}
			if c.watch {
				q.Set("watch", "1")
				q.Set("timeoutSeconds", "1")
			}
			path := "/api/v1/namespaces/" + nsAllowed + "/pods?" + q.Encode()
			got := get(t, s.client(), "https://"+s.addr+path, cp.Token(onePod))
			want := get(t, apiClient(t, cp), "https://"+cp.Host()+path, cp.Token(onePod))
			if got.code != c.want || want.code != c.want {
				t.Fatalf("through the door %d %s; the API server %d %s; want %d", got.code, got.body, want.code, want.body, c.want)
			}
			if c.want == 403 {
				if st := got.status(t); !apierrors.IsForbidden(apierrors.FromObject(&st)) {
					t.Fatalf("through the door: %+v", st)
				}
			}
		})
	}
}
