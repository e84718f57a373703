package kubeletgrpc_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kubelet/pkg/apis/pods/v1alpha1"

	"github.com/podsapi/podsapi/source/kubeletgrpc"
	"github.com/podsapi/podsapi/test/sourcetest"
)

// statusOnlyKubelet is a grpc-go server of the kubelet's wire whose watch,
// as a v1.37 kubelet's, reports a pod once and never its edits, while its
// ListPods shows the pod as it is now (or, with refuse, answers
// RESOURCE_EXHAUSTED as the kubelet's rate limit does).
type statusOnlyKubelet struct {
	mu     sync.Mutex
	pod    *corev1.Pod // nil: ListPods lists none
	refuse bool
	lists  atomic.Int32
	// events are sent on the watch after the sync marker, when
	// withEvents; serve makes the channel inside the bubble (a channel
	// made outside is not durably blocking).
	withEvents bool
	events     chan *v1alpha1.WatchPodsEvent
}

func (k *statusOnlyKubelet) encoded() []byte {
	k.mu.Lock()
	defer k.mu.Unlock()
	b, err := k.pod.Marshal()
	if err != nil {
		panic(err)
	}
	return b
}

func (k *statusOnlyKubelet) serve(l *pipeListener) *grpc.Server {
	if k.withEvents {
		k.events = make(chan *v1alpha1.WatchPodsEvent)
	}
	srv := grpc.NewServer(grpc.UnknownServiceHandler(func(_ any, stream grpc.ServerStream) error {
		method, _ := grpc.MethodFromServerStream(stream)
		switch method {
		case "/v1alpha1.Pods/WatchPods":
			if err := stream.RecvMsg(new(v1alpha1.WatchPodsRequest)); err != nil {
				return err
			}
			for _, ev := range []*v1alpha1.WatchPodsEvent{{Type: v1alpha1.EventType_ADDED, Pod: k.encoded()}, {Type: v1alpha1.EventType_INITIAL_SYNC_COMPLETE}} {
				if err := stream.SendMsg(ev); err != nil {
					return err
				}
			}
			for {
				select {
				case <-stream.Context().Done():
					return nil
				case ev := <-k.events:
					if err := stream.SendMsg(ev); err != nil {
						return err
					}
				}
			}
		case "/v1alpha1.Pods/ListPods":
			if err := stream.RecvMsg(new(v1alpha1.ListPodsRequest)); err != nil {
				return err
			}
			k.lists.Add(1)
			k.mu.Lock()
			refuse := k.refuse
			k.mu.Unlock()
			if refuse {
				return status.Error(codes.ResourceExhausted, "rejected by rate limit")
			}
			k.mu.Lock()
			listed := k.pod != nil
			k.mu.Unlock()
			if !listed {
				return stream.SendMsg(&v1alpha1.ListPodsResponse{})
			}
			return stream.SendMsg(&v1alpha1.ListPodsResponse{Pods: [][]byte{k.encoded()}})
		}
		return errors.New("unexpected method " + method)
	}))
	go srv.Serve(l)
	return srv
}

// runResync runs a Source with opts against k in a synctest bubble, calls
// during once the Source synced, and stops everything.
func runResync(t *testing.T, k *statusOnlyKubelet, during func(rec *sourcetest.Recorder), opts ...kubeletgrpc.Option) {
	synctest.Test(t, func(t *testing.T) {
		l := newPipeListener()
		srv := k.serve(l)
		rec := sourcetest.NewRecorder()
		src := kubeletgrpc.New(append([]kubeletgrpc.Option{
			kubeletgrpc.WithDialer(l.dial),
			kubeletgrpc.WithLogger(sourcetest.NewLogs(t).Logger()),
		}, opts...)...)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- src.Run(ctx, rec) }()
		rec.Wait(t, "synced", func(s sourcetest.State) bool { return s.Synced })
		during(rec)
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		srv.Stop()
		l.Close()
	})
}

func resyncPod(labels map[string]string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-node-a", UID: "00000000-0000-4000-8000-0000000000a1", Labels: labels}}
}

// TestResyncFindsUnreportedEdits edits a pod's labels on a kubelet whose
// watch never reports it: the resync's ListPods finds the edit within one
// interval, and an unchanged list sends the sink nothing.
func TestResyncFindsUnreportedEdits(t *testing.T) {
	k := &statusOnlyKubelet{pod: resyncPod(map[string]string{"v": "1"})}
	runResync(t, k, func(rec *sourcetest.Recorder) {
		start := time.Now()
		before := len(rec.Snapshot().Calls)
		time.Sleep(35 * time.Second) // fake time: three resyncs of an unchanged pod
		synctest.Wait()
		if calls := since(rec.Snapshot(), before); len(calls) != 0 {
			t.Errorf("three resyncs of an unchanged pod sent the sink %v", calls)
		}
		k.mu.Lock()
		k.pod = resyncPod(map[string]string{"v": "2"})
		k.mu.Unlock()
		edited := time.Now()
		rec.WaitPods(t, func(p *corev1.Pod) bool { return p.Labels["v"] == "2" }, k.pod.UID)
		if d := time.Since(edited); d > kubeletgrpc.DefaultResyncInterval {
			t.Errorf("the edit reached the sink %s after it was made, want within %s", d, kubeletgrpc.DefaultResyncInterval)
		}
		// One ListPods per interval: the tokens it costs.
		if n, want := k.lists.Load(), int32(time.Since(start)/kubeletgrpc.DefaultResyncInterval); n > want+1 {
			t.Errorf("%d ListPods in %s, want at most %d", n, time.Since(start), want+1)
		}
	})
}

// TestResyncBacksOffWhenRateLimited refuses every resync with the
// kubelet's RESOURCE_EXHAUSTED: the Source waits twice as long after each,
// up to 8 intervals, and keeps its watch.
func TestResyncBacksOffWhenRateLimited(t *testing.T) {
	k := &statusOnlyKubelet{pod: resyncPod(nil), refuse: true}
	runResync(t, k, func(rec *sourcetest.Recorder) {
		time.Sleep(10 * time.Minute) // fake time
		synctest.Wait()
		// Refused at 10, 30, 70, 150 s, then every 80 s: 10 lists in 10
		// minutes, where 60 would be made without the backoff.
		if n := k.lists.Load(); n < 8 || n > 11 {
			t.Errorf("%d ListPods refused in 10 minutes, want about 10 (backing off to 8 intervals)", n)
		}
		if st := rec.Snapshot(); len(st.Pods) != 1 {
			t.Errorf("the sink holds %d pods, want the one the watch reported", len(st.Pods))
		}
	})
}

// TestResyncIgnoresLateReAdd removes a pod from the kubelet's list, then has
// its watch send ADDED and DELETED for it, as a v1.37 kubelet does for a
// static pod it deletes: the resync deleted the pod, and the late ADDED
// does not bring it back.
func TestResyncIgnoresLateReAdd(t *testing.T) {
	pod := resyncPod(map[string]string{"v": "1"})
	k := &statusOnlyKubelet{pod: pod, withEvents: true}
	raw, err := pod.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	runResync(t, k, func(rec *sourcetest.Recorder) {
		k.mu.Lock()
		k.pod = nil
		k.mu.Unlock()
		time.Sleep(kubeletgrpc.DefaultResyncInterval + time.Second) // fake time: a resync
		rec.Wait(t, "the pod deleted by a resync", func(s sourcetest.State) bool { return len(s.Pods) == 0 })
		before := len(rec.Snapshot().Calls)
		k.events <- &v1alpha1.WatchPodsEvent{Type: v1alpha1.EventType_ADDED, Pod: raw}
		k.events <- &v1alpha1.WatchPodsEvent{Type: v1alpha1.EventType_DELETED, Pod: raw}
		time.Sleep(time.Second) // fake time: the events are applied
		synctest.Wait()
		if calls := since(rec.Snapshot(), before); len(calls) != 0 {
			t.Errorf("the late ADDED and DELETED of a pod the resync deleted sent the sink %v", calls)
		}
		// A pod that comes back for real is listed again.
		k.mu.Lock()
		k.pod = pod
		k.mu.Unlock()
		time.Sleep(kubeletgrpc.DefaultResyncInterval + time.Second) // fake time: a resync
		rec.WaitPods(t, func(p *corev1.Pod) bool { return true }, pod.UID)
	})
}
