package workload

import (
	"log/slog"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Option configures a Resolver.
type Option func(*Resolver)

// WithGetter makes the Resolver ask the API server through g about the
// ReplicaSets and Jobs that own the node's pods. Without it (the default)
// the Resolver derives their workloads from names only (Derived).
func WithGetter(g Getter) Option { return func(r *Resolver) { r.getter = g } }

// WithRefreshInterval sets how long an owner's answer is kept before the
// Resolver asks about the owner again, which notices a ReplicaSet or Job
// adopted, orphaned or deleted. The default is 30 minutes.
func WithRefreshInterval(d time.Duration) Option { return func(r *Resolver) { r.refresh = d } }

// WithRetryInterval sets how long the Resolver waits before asking again
// after a get failed (the API server unreachable, or an error), doubled
// after each failure in a row up to the refresh interval. The default is 10
// seconds.
func WithRetryInterval(d time.Duration) Option { return func(r *Resolver) { r.retry = d } }

// WithStaleAfter sets how long after the API server last confirmed an
// owner's answer the answer is still served as Resolved: the last known
// answer is kept while gets fail, and marked Unresolved after this bound.
// The default is 1 hour (two refresh intervals).
func WithStaleAfter(d time.Duration) Option { return func(r *Resolver) { r.staleAfter = d } }

// WithGetTimeout bounds each get. The default is 10 seconds.
func WithGetTimeout(d time.Duration) Option { return func(r *Resolver) { r.timeout = d } }

// WithMaxOwners bounds the owners the Resolver keeps answers of; the pods
// of owners beyond it are answered by derivation only, until an owner kept
// leaves (its last pod gone) and makes room for theirs. The default is 4,096
// (a node runs at most a few hundred pods).
func WithMaxOwners(n int) Option { return func(r *Resolver) { r.maxOwners = n } }

// WithOnChange calls f, outside the Resolver's lock, with the UIDs of the
// pods whose workload an answer of the API server changed, or the
// stale-after bound made Unresolved. The default does nothing.
func WithOnChange(f func(pods []types.UID)) Option { return func(r *Resolver) { r.onChange = f } }

// WithLogger sets the logger of failed gets (one line per owner whose state
// changes, not per retry). The default is slog.Default().
func WithLogger(l *slog.Logger) Option { return func(r *Resolver) { r.log = l } }

// WithClock sets the Resolver's clock. The default is time.Now.
func WithClock(now func() time.Time) Option { return func(r *Resolver) { r.now = now } }
