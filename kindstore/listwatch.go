package kindstore

import (
	"context"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// Heard returns lw, whose lists and watches tell the store when the API
// server answered them (Contact), so that Age says how old the store's
// state may be: an informer of the store's feed lists and watches through
// it.
func (s *Store[T]) Heard(lw *cache.ListWatch) *cache.ListWatch {
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			obj, err := lw.ListWithContext(ctx, opts)
			if err == nil {
				s.Contact(Answered)
			}
			return obj, err
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			w, err := lw.WatchWithContext(ctx, opts)
			if err != nil {
				return nil, err
			}
			return s.heardWatch(w), nil
		},
	}
}

// heardWatch forwards the events of w, recording that the watch opened,
// each event, and its end.
func (s *Store[T]) heardWatch(w watch.Interface) watch.Interface {
	s.Contact(WatchOpened)
	hw := &heard{w: w, out: make(chan watch.Event), stop: make(chan struct{})}
	go func() {
		// The end is recorded before the channel closes.
		defer close(hw.out)
		defer s.Contact(WatchClosed)
		for ev := range w.ResultChan() {
			s.Contact(Answered)
			select {
			case hw.out <- ev:
			case <-hw.stop:
				return
			}
		}
	}()
	return hw
}

// heard is a watch whose events are forwarded by heardWatch.
type heard struct {
	w    watch.Interface
	out  chan watch.Event
	stop chan struct{}
	once sync.Once
}

func (h *heard) Stop() {
	h.once.Do(func() { close(h.stop) })
	h.w.Stop()
}

func (h *heard) ResultChan() <-chan watch.Event { return h.out }
