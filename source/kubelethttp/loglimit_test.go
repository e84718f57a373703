package kubelethttp_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podsapi/podsapi/source/internal/sourcelog"
	"github.com/podsapi/podsapi/source/kubelethttp"
	"github.com/podsapi/podsapi/test/sourcetest"
)

// TestManyInvalidPodsLogged: a /pods listing 1,000 pods without a UID
// (issue 25: 10,000 lines per poll) has each counted, and at most one
// warning written every sourcelog.Interval.
func TestManyInvalidPodsLogged(t *testing.T) {
	const n = 1000
	list := corev1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"}, Items: []corev1.Pod{*sourcetest.Pod("default", "valid", uidWeb, corev1.PodRunning)}}
	for i := range n {
		list.Items = append(list.Items, *sourcetest.Pod("default", fmt.Sprintf("no-uid-%d", i), "", corev1.PodRunning))
	}
	body, err := json.Marshal(list)
	if err != nil {
		t.Fatal(err)
	}
	k := newFakeKubelet(t, "", "podlist-1.json", httptest.NewServer)
	k.set(func(k *fakeKubelet) { k.status, k.body = http.StatusOK, body })
	began := time.Now()
	h := start(t, kubelethttp.WithURL(k.url()))
	h.rec.WaitPods(t, nil, uidWeb)
	allowed := 1 + int(time.Since(began)/sourcelog.Interval)
	if got := h.errors(t, "invalid"); got != n {
		t.Errorf(`podsapi_source_errors_total{reason="invalid"} = %v, want %d`, got, n)
	}
	if got := h.logs.Count(slog.LevelWarn, "kubelet listed a pod without a UID"); got < 1 || got > allowed {
		t.Errorf("%d warnings for %d pods without a UID, want 1 to %d", got, n, allowed)
	}
}
