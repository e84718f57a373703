// Package source is the contract between the pod sources and the rest of
// the server: a Source reads the pods of the node from somewhere and writes
// them to a Sink, which the pod store implements. The server core never
// knows which source feeds it, and a source knows nothing but its Sink.
//
// The data path:
//
//	manifest directory ─► manifest.Source    ─┐
//	kubelet /pods      ─► kubelethttp.Source ─┼─► Sink (store.Store) ─► service ─► server ─► socket
//	kubelet socket     ─► kubeletgrpc.Source ─┘
//
// Every source calls its Sink from the single goroutine that runs Run, so the
// sink sees one well-ordered sequence of calls: the pods of the source's
// initial, complete state, then MarkSynced once, then every change. A source
// keeps serving what it last knew when what it reads from fails, and says so
// in its logs and metrics.
//
// The options every source shares (a logger, a registerer of metrics, the
// backoff between retries) are kept in Options, which each source embeds; the
// With* functions of each package set them with the rules of the methods
// below.
//
// The zero rule of every option of the module: a zero value means the
// default; a negative value turns the feature off where that makes sense
// (and is documented so), and otherwise means the default too.
package source

import (
	"context"
	"flag"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Sink receives the pods a Source reads. The pod store implements it.
type Sink interface {
	// Upsert adds the pod or replaces the pod with the same UID. The sink
	// owns the pod afterwards; the source must not mutate it again.
	Upsert(pod *corev1.Pod)
	// Delete removes the pod with the given UID, if present.
	Delete(uid types.UID)
	// MarkSynced reports that the source has delivered its initial,
	// complete state.
	MarkSynced()
}

// Source reads the pods of the node and writes them to a Sink.
type Source interface {
	// Name names the source in logs and metrics, such as
	// "manifest:/etc/kubernetes/manifests".
	Name() string
	// Run writes the source's pods to sink until ctx is done, then returns
	// nil; it returns an error only when it cannot start at all.
	Run(ctx context.Context, sink Sink) error
}

// Options are the options every source has. The zero value is not ready:
// sources start from their defaults and apply their options with the methods.
type Options struct {
	// Logger receives the source's logs.
	Logger *slog.Logger
	// Registerer registers the source's metrics; nil registers none (the
	// metrics are still kept, but nothing exports them).
	Registerer prometheus.Registerer
	// MinBackoff and MaxBackoff are the first and the longest wait before
	// a retry, for sources that retry.
	MinBackoff, MaxBackoff time.Duration
}

// SetLogger sets the logger; a nil logger keeps the current one.
func (o *Options) SetLogger(logger *slog.Logger) {
	if logger != nil {
		o.Logger = logger
	}
}

// SetBackoff sets the first and the longest wait before a retry. Each
// failure doubles the wait up to maxWait, with up to half of it randomly
// taken off (jitter); a success resets it. Zero or negative values keep the
// current ones; maxWait is raised to minWait if smaller.
func (o *Options) SetBackoff(minWait, maxWait time.Duration) {
	if minWait > 0 {
		o.MinBackoff = minWait
	}
	if maxWait > 0 {
		o.MaxBackoff = maxWait
	}
	o.MaxBackoff = max(o.MaxBackoff, o.MinBackoff)
}

// Registration offers a source on podsapi-server's command line: --source
// chooses it by Name, and it is configured by the flags Flags defines. A new
// source is its package, with its Registration, plus one line in the list
// of cmd/podsapi-server.
type Registration struct {
	// Name is the value of --source that chooses the source.
	Name string
	// Help says in a few words what the source reads, for the help of
	// --source.
	Help string
	// Flags defines the source's flags on fs and returns the constructor
	// of the Source they configure. The constructor is called after the
	// command line is parsed, only when the source is chosen; its error is
	// a usage error, which names the flag to change.
	Flags func(fs *flag.FlagSet) func(Env) (Source, error)
}

// Env is what the constructor of a Registration is given beside its flags.
type Env struct {
	// NodeName is the name of the node, --node-name.
	NodeName string
	// Socket is the path of the socket the server serves on, --socket.
	Socket string
	// MaxPodBytes is the largest encoding of one pod the store takes,
	// --max-pod-bytes (negative: any size; 0: the store's default): a
	// source need not read a larger one whole.
	MaxPodBytes int
	// Logger receives the source's logs; Registerer registers its metrics.
	Logger     *slog.Logger
	Registerer prometheus.Registerer
}
