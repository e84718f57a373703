package nri

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/containerd/nri/pkg/api"

	"github.com/podsapi/podsapi/store"
)

// Sink is what the observer hands the runtime's facts to. *store.Store
// implements it. Its methods must be quick: the runtime waits for them
// (bounded by its plugin request timeout).
type Sink interface {
	// SyncRuntime replaces every fact with the runtime's full state,
	// removing what it no longer lists, and returns the number of facts
	// refused for their bound.
	SyncRuntime(pods []store.RuntimePod, containers []store.RuntimeContainer) (refused int)
	// PutRuntimePod keeps or updates a pod, and reports false when refused
	// for its bound.
	PutRuntimePod(p store.RuntimePod) bool
	// PutRuntimeContainer keeps or updates a container, and reports false
	// when refused for its bound.
	PutRuntimeContainer(c store.RuntimeContainer) bool
	// RemoveRuntimeContainer marks a container removed.
	RemoveRuntimeContainer(id string)
	// RemoveRuntimePod marks a pod and its containers removed.
	RemoveRuntimePod(sandboxID string)
}

// plugin is the NRI plugin of one connection: the handlers the stub calls,
// one per event subscribed to (the stub subscribes to the events whose
// interface a plugin implements). Each answers empty: nothing adjusted,
// updated or evicted.
type plugin struct {
	o *Observer
	// gen is the connection's number (Observer.gen).
	gen uint64
	// synced is called once the initial synchronisation is taken.
	synced func()
	// state is where the connection's configuration stands: waiting,
	// configured by the runtime, or abandoned by the watchdog (which
	// then configures the stub itself, in vain, so that it gives up).
	state atomic.Int32
}

// The states of plugin.state.
const (
	stateWaiting int32 = iota
	stateConfigured
	stateAbandoned
)

// errAbandoned is the configuration's error once the watchdog gave up the
// connection.
var errAbandoned = errors.New("the container runtime did not configure the plugin in time")

// apply runs f, what an event does to the sink, one event at a time, and
// not at all once a newer connection has started: a handler that outlived
// the runtime's timeout (the runtime then dropped the connection) never
// lands its facts after the synchronisation of the next connection.
func (p *plugin) apply(f func()) {
	p.o.mu.Lock()
	defer p.o.mu.Unlock()
	if p.gen == p.o.gen.Load() {
		f()
	}
}

// Configure logs the runtime and subscribes to the events plugin handles;
// once the watchdog abandoned the connection, it fails, and the stub stops.
func (p *plugin) Configure(ctx context.Context, _, runtime, version string) (api.EventMask, error) {
	if !p.state.CompareAndSwap(stateWaiting, stateConfigured) {
		return 0, errAbandoned
	}
	p.o.logger.Info("connected to the container runtime's NRI", "socket", p.o.socket, "runtime", runtime, "runtimeVersion", version)
	return 0, nil
}

// Synchronize takes the runtime's full state at connection.
func (p *plugin) Synchronize(ctx context.Context, pods []*api.PodSandbox, containers []*api.Container) ([]*api.ContainerUpdate, error) {
	p.o.metrics.event(eventSynchronize)
	var (
		rps     = make([]store.RuntimePod, 0, len(pods))
		rcs     = make([]store.RuntimeContainer, 0, len(containers))
		invalid int
	)
	for _, s := range pods {
		if rp, ok := podOf(s); ok {
			rps = append(rps, rp)
		} else {
			invalid++
		}
	}
	for _, c := range containers {
		if rc, ok := containerOf(c); ok {
			rcs = append(rcs, rc)
		} else {
			invalid++
		}
	}
	p.o.metrics.refuse(reasonInvalid, invalid)
	p.apply(func() {
		p.o.metrics.refuse(reasonBound, p.o.sink.SyncRuntime(rps, rcs))
		p.o.logger.Debug("synchronised with the container runtime", "pods", len(rps), "containers", len(rcs), "invalid", invalid)
		p.synced()
	})
	return nil, nil
}

// RunPodSandbox takes a new pod.
func (p *plugin) RunPodSandbox(ctx context.Context, s *api.PodSandbox) error {
	p.o.metrics.event(eventRunPodSandbox)
	p.apply(func() { p.putPod(s) })
	return nil
}

// StopPodSandbox takes a stopped pod: its network is gone, its IPs may be
// given to another pod.
func (p *plugin) StopPodSandbox(ctx context.Context, s *api.PodSandbox) error {
	p.o.metrics.event(eventStopPodSandbox)
	if rp, ok := podOf(s); ok {
		rp.IPs = nil
		p.apply(func() { p.o.metrics.refuse(reasonBound, b2i(!p.o.sink.PutRuntimePod(rp))) })
	} else {
		p.o.metrics.refuse(reasonInvalid, 1)
	}
	return nil
}

// RemovePodSandbox forgets a pod, kept as removed for the retention.
func (p *plugin) RemovePodSandbox(ctx context.Context, s *api.PodSandbox) error {
	p.o.metrics.event(eventRemovePodSandbox)
	if id := s.GetId(); validString(id, maxIDLen, true) {
		p.apply(func() { p.o.sink.RemoveRuntimePod(id) })
	}
	return nil
}

// PostCreateContainer takes a created container (its PID is 0 until it
// starts), after the runtime created it: it does not hold the creation.
func (p *plugin) PostCreateContainer(ctx context.Context, s *api.PodSandbox, c *api.Container) error {
	p.o.metrics.event(eventPostCreateContainer)
	p.apply(func() { p.putContainer(s, c) })
	return nil
}

// PostStartContainer takes a started container and its PID.
func (p *plugin) PostStartContainer(ctx context.Context, s *api.PodSandbox, c *api.Container) error {
	p.o.metrics.event(eventPostStartContainer)
	p.apply(func() { p.putContainer(s, c) })
	return nil
}

// RemoveContainer forgets a container, kept as removed for the retention.
func (p *plugin) RemoveContainer(ctx context.Context, s *api.PodSandbox, c *api.Container) error {
	p.o.metrics.event(eventRemoveContainer)
	if id := c.GetId(); validString(id, maxIDLen, true) {
		p.apply(func() { p.o.sink.RemoveRuntimeContainer(id) })
	}
	return nil
}

// Shutdown logs that the runtime is shutting down.
func (p *plugin) Shutdown(ctx context.Context) {
	p.o.logger.Info("the container runtime is shutting NRI down", "socket", p.o.socket)
}

func (p *plugin) putPod(s *api.PodSandbox) bool {
	rp, ok := podOf(s)
	if !ok {
		p.o.metrics.refuse(reasonInvalid, 1)
		return false
	}
	if !p.o.sink.PutRuntimePod(rp) {
		p.o.metrics.refuse(reasonBound, 1)
		return false
	}
	return true
}

func (p *plugin) putContainer(s *api.PodSandbox, c *api.Container) {
	// The event carries the container's pod: it is taken too, so that a
	// container is never known without its pod.
	if !p.putPod(s) {
		return
	}
	rc, ok := containerOf(c)
	if !ok || rc.SandboxID != s.GetId() {
		p.o.metrics.refuse(reasonInvalid, 1)
		return
	}
	p.o.metrics.refuse(reasonBound, b2i(!p.o.sink.PutRuntimeContainer(rc)))
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
