package manifest_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podsapi/podsapi/source/manifest"
)

// countingSink counts the pods it holds and closes full when it holds want.
type countingSink struct {
	mu     sync.Mutex
	pods   map[types.UID]struct{}
	want   int
	full   chan struct{}
	synced chan struct{}
}

func (s *countingSink) Upsert(pod *corev1.Pod) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pods[pod.UID] = struct{}{}
	if len(s.pods) == s.want {
		close(s.full)
	}
}

func (s *countingSink) Delete(uid types.UID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.pods, uid)
}

func (s *countingSink) MarkSynced() { close(s.synced) }

// BenchmarkRenameBurst renames n manifests into a watched directory at once
// and waits until the sink has all their pods: the end-to-end cost of a
// burst of file events (issue 12, finding 8: 20,000 files took about 61 s).
//
//	go test -run '^$' -bench RenameBurst -benchtime 1x ./source/manifest
func BenchmarkRenameBurst(b *testing.B) {
	for _, n := range []int{2000, 20000} {
		b.Run(fmt.Sprintf("files=%d", n), func(b *testing.B) {
			staging := b.TempDir()
			for i := range n {
				name := fmt.Sprintf("p-%05d", i)
				if err := os.WriteFile(filepath.Join(staging, name+".yaml"), []byte(podYAML("", name, "", "i")), 0o644); err != nil {
					b.Fatal(err)
				}
			}
			for b.Loop() {
				b.StopTimer()
				dir := b.TempDir()
				sink := &countingSink{pods: make(map[types.UID]struct{}), want: n, full: make(chan struct{}), synced: make(chan struct{})}
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan error, 1)
				go func() {
					done <- manifest.New(dir, testNode, manifest.WithResyncInterval(-1),
						manifest.WithLogger(slog.New(slog.DiscardHandler))).Run(ctx, sink)
				}()
				<-sink.synced
				b.StartTimer()
				for i := range n {
					name := fmt.Sprintf("p-%05d.yaml", i)
					if err := os.Rename(filepath.Join(staging, name), filepath.Join(dir, name)); err != nil {
						b.Fatal(err)
					}
				}
				<-sink.full
				b.StopTimer()
				cancel()
				if err := <-done; err != nil {
					b.Fatal(err)
				}
				for i := range n {
					name := fmt.Sprintf("p-%05d.yaml", i)
					if err := os.Rename(filepath.Join(dir, name), filepath.Join(staging, name)); err != nil {
						b.Fatal(err)
					}
				}
				b.StartTimer()
			}
		})
	}
}
