package service

import (
	"context"
	"log/slog"
	"time"

	"github.com/podsapi/podsapi/budget"
	"github.com/podsapi/podsapi/internal/admit"
)

// Option configures the handler New returns.
type Option func(*handler)

// WithWatchQueue sets how many live events a watcher may have queued before
// it is dropped for falling behind. The default is DefaultWatchQueue.
func WithWatchQueue(n int) Option {
	return func(h *handler) { h.queue = max(n, 1) }
}

// WithMetrics sets the metrics that count dropped watch events and the use
// of shared views. By default nothing is counted.
func WithMetrics(m *Metrics) Option {
	return func(h *handler) { h.metrics = m }
}

// WithShutdown sets a channel whose closing ends every open watch with
// UNAVAILABLE. By default watches end only when their client leaves.
func WithShutdown(ch <-chan struct{}) Option {
	return func(h *handler) { h.shutdown = ch }
}

// WithProgressInterval sets the interval between the progress marks
// (EVENT_TYPE_PROGRESS) of the typed watches that set progress_notify. The
// default is DefaultProgressInterval.
func WithProgressInterval(d time.Duration) Option {
	return func(h *handler) {
		if d > 0 {
			h.progress.interval = d
		}
	}
}

// WithLogger sets the logger of errors the client cannot be told about in
// detail. The default is slog.Default().
func WithLogger(l *slog.Logger) Option {
	return func(h *handler) { h.logger = l }
}

// WithBudget sets the memory budget that the caches of the service count
// their bytes against: masked views, lists, snapshots and the replays of
// resumed watches. Half of it, besides, bounds the unary responses in
// flight (Handlers.TrackResponses). The default, nil, counts nothing and
// bounds the caches only by their fixed limits.
func WithBudget(b *budget.Budget) Option {
	return func(h *handler) { h.budget = b }
}

// WithClient sets how the handlers name the client of a request, by which
// the snapshot turns, the masks of watches and the fair shares of the
// memory budget are shared out: the server names it by its pod, its
// systemd unit or its UID (guard.Peer.Client). By default every request is
// of one client, "".
func WithClient(client func(ctx context.Context) string) Option {
	return func(h *handler) { h.client = client }
}

// WithSnapshotsPerClient sets how many watches of one client send their
// snapshot at once, each keeping its turn until it ends it or writes nothing
// for turn (DefaultSnapshotsPerClient and DefaultSnapshotTurn by default;
// n <= 0 or turn <= 0 keeps the default).
func WithSnapshotsPerClient(n int, turn time.Duration) Option {
	return func(h *handler) {
		if n > 0 {
			h.turns.perClient = n
		}
		if turn > 0 {
			h.turns.slice = turn
		}
	}
}

// WithMasksPerClient bounds the distinct field masks of the open watches of
// one client (perClient) and of all (total); DefaultMasksPerClient and
// DefaultMaxWatchMasks by default, a value <= 0 keeps its default.
func WithMasksPerClient(perClient, total int) Option {
	return func(h *handler) {
		if perClient > 0 {
			h.masks.perClient = perClient
		}
		if total > 0 {
			h.masks.total = total
		}
	}
}

// WithProcesses sets where FindPods reads the cgroups of processes (the
// keys pid and caller). The default is podcgroup.NewReader("") (/proc).
func WithProcesses(p Processes) Option {
	return func(h *handler) { h.processes = p }
}

// WithCaller sets how FindPods learns the PID of the calling process (the
// key caller): pid returns it and true, or false when the connection told
// nothing about its peer. By default the caller is unknown.
func WithCaller(pid func(ctx context.Context) (int32, bool)) Option {
	return func(h *handler) { h.caller = pid }
}

// WithStreams sets how a watch finds the Stream of its response: streams
// returns it for the context the watch is served with, or nil. With a
// Stream, a watch flushes the events that are ready together once, and
// writes the shared snapshot of a binary protobuf stream in a few large
// writes. The default is none: every event is flushed as connect sends it.
func WithStreams(streams func(context.Context) Stream) Option {
	return func(h *handler) { h.streams = streams }
}

// WithFindWait sets the cap of the wait a FindPods request may ask for
// (limit; 0 or negative turns waiting off: every call answers at once), and
// how many calls may wait at once, in all (total) and per client
// (perClient; a client's share is the smaller of perClient and half the
// total), 0 or a negative bound meaning no bound (admit.Slots). The
// defaults are DefaultMaxFindWait, DefaultMaxFindWaiters and
// DefaultMaxFindWaitersPerClient.
func WithFindWait(limit time.Duration, total, perClient int) Option {
	return func(h *handler) {
		h.waiters.max, h.waiters.slots = max(limit, 0), admit.NewSlots(total, perClient)
	}
}
