// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/containerd/nri/pkg/adaptation"
	"github.com/containerd/nri/pkg/api"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// nriRuntime is NRI's runtime side (the adaptation package, which
// containerd embeds) as this fake runtime drives it: it tells the plugins
// connected to its socket about the fake's pod sandboxes and containers at
// the moments containerd's CRI plugin does, with the facts containerd
// gives (the sandbox's pod UID, name and namespace, the container IDs, the
// cgroups paths in the cgroupfs notation the kubelet asked for, the pod's
// IPs), and synchronises a plugin that connects with what it holds. A
// plugin's adjustments and updates are never applied: the fake runs
// nothing.
//
// Like containerd, it makes one NRI call at a time (the plugins see the
// events in order). Every call is bounded by timeout, NRI's plugin
// request timeout, so that no plugin holds a CRI call longer than that.
type nriRuntime struct {
	a       *adaptation.Adaptation
	timeout time.Duration
	tmp     string

	mu         sync.Mutex
	pods       map[string]*api.PodSandbox // sandbox ID -> sandbox
	containers map[string]*api.Container  // container ID -> container
}

// startNRI starts NRI's runtime side on socket, with plugin request
// timeout; it discovers no plugin of its own, and serves the plugins that
// connect to socket.
func startNRI(socket string, timeout time.Duration) (*nriRuntime, error) {
	// An empty directory: the fake launches no pre-installed plugin.
	tmp, err := os.MkdirTemp("", "fakecri-nri")
	if err != nil {
		return nil, err
	}
	n := &nriRuntime{timeout: timeout, tmp: tmp, pods: map[string]*api.PodSandbox{}, containers: map[string]*api.Container{}}
	adaptation.SetPluginRequestTimeout(timeout)
	if err := os.MkdirAll(filepath.Dir(socket), 0o755); err != nil {
		os.RemoveAll(tmp)
		return nil, err
	}
	a, err := adaptation.New("fakecri", "v0.0.0", n.synchronize, n.update,
		adaptation.WithSocketPath(socket), adaptation.WithPluginPath(tmp), adaptation.WithPluginConfigPath(tmp))
	if err != nil {
		os.RemoveAll(tmp)
		return nil, fmt.Errorf("nri: %w", err)
	}
	if err := a.Start(); err != nil {
		os.RemoveAll(tmp)
		return nil, fmt.Errorf("nri: %w", err)
	}
	n.a = a
	return n, nil
}

// stop stops the runtime side (the plugins' connections are left to
// close).
func (n *nriRuntime) stop() {
	n.a.Stop()
	os.RemoveAll(n.tmp)
}

// synchronize lists the sandboxes and containers to a plugin that
// connects, as containerd's syncPlugin does (holding its lock, so that no
// event slips between the list and the plugin's joining).
func (n *nriRuntime) synchronize(ctx context.Context, cb adaptation.SyncCB) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	pods := make([]*api.PodSandbox, 0, len(n.pods))
	for _, p := range n.pods {
		pods = append(pods, p)
	}
	containers := make([]*api.Container, 0, len(n.containers))
	for _, c := range n.containers {
		containers = append(containers, c)
	}
	updates, err := cb(ctx, pods, containers)
	if len(updates) > 0 {
		log.Printf("fakecri: nri: %d container updates asked at synchronisation, not applied", len(updates))
	}
	return err
}

// update refuses every update a plugin asks for: the fake runs nothing.
func (n *nriRuntime) update(_ context.Context, u []*adaptation.ContainerUpdate) ([]*adaptation.ContainerUpdate, error) {
	return u, nil
}

// bounded returns a context of at most the plugin request timeout.
func (n *nriRuntime) bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), n.timeout)
}

// sandbox is the sandbox as containerd gives it to NRI (podSandboxToNRI):
// its cgroups path in the cgroupfs notation is its parent joined with its
// ID.
func sandbox(id string, cfg *runtimeapi.PodSandboxConfig, handler string, ips []string) *api.PodSandbox {
	md := cfg.GetMetadata()
	parent := cfg.GetLinux().GetCgroupParent()
	p := &api.PodSandbox{
		Id:             id,
		Name:           md.GetName(),
		Uid:            md.GetUid(),
		Namespace:      md.GetNamespace(),
		Labels:         cfg.GetLabels(),
		Annotations:    cfg.GetAnnotations(),
		RuntimeHandler: handler,
		Ips:            ips,
		Linux:          &api.LinuxPodSandbox{CgroupParent: parent},
	}
	if parent != "" {
		p.Linux.CgroupsPath = filepath.Join(parent, id)
	}
	return p
}

// runPodSandbox tells the plugins of a sandbox that runs (containerd does
// once its network is set up, with the pod's IPs).
func (n *nriRuntime) runPodSandbox(ctx context.Context, p *api.PodSandbox) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.pods[p.Id] = p
	ctx, cancel := n.bounded(ctx)
	defer cancel()
	if err := n.a.RunPodSandbox(ctx, &adaptation.RunPodSandboxRequest{Pod: p}); err != nil {
		log.Printf("fakecri: nri: RunPodSandbox %s: %v", p.Id, err)
	}
}

// stopPodSandbox tells the plugins of a sandbox stopped.
func (n *nriRuntime) stopPodSandbox(ctx context.Context, id string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	p := n.pods[id]
	if p == nil {
		return
	}
	ctx, cancel := n.bounded(ctx)
	defer cancel()
	if err := n.a.StopPodSandbox(ctx, &adaptation.StopPodSandboxRequest{Pod: p}); err != nil {
		log.Printf("fakecri: nri: StopPodSandbox %s: %v", id, err)
	}
}

// removePodSandbox tells the plugins of a sandbox removed, and forgets it
// and its containers (the fake removes them with it).
func (n *nriRuntime) removePodSandbox(ctx context.Context, id string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	p := n.pods[id]
	if p == nil {
		return
	}
	delete(n.pods, id)
	for cid, c := range n.containers {
		if c.PodSandboxId == id {
			delete(n.containers, cid)
		}
	}
	ctx, cancel := n.bounded(ctx)
	defer cancel()
	if err := n.a.RemovePodSandbox(ctx, &adaptation.RemovePodSandboxRequest{Pod: p}); err != nil {
		log.Printf("fakecri: nri: RemovePodSandbox %s: %v", id, err)
	}
}

// createContainer tells the plugins of a container being created (the
// synchronous hook, whose adjustments the fake does not apply), then of
// its creation (the post-create notification). An error of the hook is
// the creation's error, as in containerd.
func (n *nriRuntime) createContainer(ctx context.Context, id, sandboxID string, cfg *runtimeapi.ContainerConfig) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	p := n.pods[sandboxID]
	if p == nil {
		return nil
	}
	c := &api.Container{
		Id:           id,
		PodSandboxId: sandboxID,
		Name:         cfg.GetMetadata().GetName(),
		State:        api.ContainerState_CONTAINER_CREATED,
		Labels:       cfg.GetLabels(),
		Annotations:  cfg.GetAnnotations(),
		Args:         append(append([]string(nil), cfg.GetCommand()...), cfg.GetArgs()...),
		Linux:        &api.LinuxContainer{},
	}
	if p.Linux.CgroupParent != "" {
		c.Linux.CgroupsPath = filepath.Join(p.Linux.CgroupParent, id)
	}
	bctx, cancel := n.bounded(ctx)
	defer cancel()
	if _, err := n.a.CreateContainer(bctx, &adaptation.CreateContainerRequest{Pod: p, Container: c}); err != nil {
		return fmt.Errorf("nri: CreateContainer %s: %w", id, err)
	}
	n.containers[id] = c
	pctx, pcancel := n.bounded(ctx)
	defer pcancel()
	if err := n.a.PostCreateContainer(pctx, &adaptation.PostCreateContainerRequest{Pod: p, Container: c}); err != nil {
		log.Printf("fakecri: nri: PostCreateContainer %s: %v", id, err)
	}
	return nil
}

// startContainer tells the plugins of a container starting, before the
// fake starts it (containerd's StartContainer hook), and returns what
// tells them it started (the post-start notification).
func (n *nriRuntime) startContainer(ctx context.Context, id string) (started func()) {
	n.mu.Lock()
	defer n.mu.Unlock()
	c := n.containers[id]
	p := n.pods[c.GetPodSandboxId()]
	if c == nil || p == nil {
		return func() {}
	}
	bctx, cancel := n.bounded(ctx)
	defer cancel()
	if err := n.a.StartContainer(bctx, &adaptation.StartContainerRequest{Pod: p, Container: c}); err != nil {
		log.Printf("fakecri: nri: StartContainer %s: %v", id, err)
	}
	return func() {
		n.mu.Lock()
		defer n.mu.Unlock()
		if n.containers[id] != c {
			return
		}
		c.State = api.ContainerState_CONTAINER_RUNNING
		ctx, cancel := n.bounded(ctx)
		defer cancel()
		if err := n.a.PostStartContainer(ctx, &adaptation.PostStartContainerRequest{Pod: p, Container: c}); err != nil {
			log.Printf("fakecri: nri: PostStartContainer %s: %v", id, err)
		}
	}
}

// stopContainer tells the plugins of a container stopped.
func (n *nriRuntime) stopContainer(ctx context.Context, id string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	c := n.containers[id]
	p := n.pods[c.GetPodSandboxId()]
	if c == nil || p == nil {
		return
	}
	c.State = api.ContainerState_CONTAINER_STOPPED
	ctx, cancel := n.bounded(ctx)
	defer cancel()
	if _, err := n.a.StopContainer(ctx, &adaptation.StopContainerRequest{Pod: p, Container: c}); err != nil {
		log.Printf("fakecri: nri: StopContainer %s: %v", id, err)
	}
}

// removeContainer tells the plugins of a container removed, and forgets
// it.
func (n *nriRuntime) removeContainer(ctx context.Context, id string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	c := n.containers[id]
	if c == nil {
		return
	}
	delete(n.containers, id)
	p := n.pods[c.PodSandboxId]
	if p == nil {
		return
	}
	ctx, cancel := n.bounded(ctx)
	defer cancel()
	if err := n.a.RemoveContainer(ctx, &adaptation.RemoveContainerRequest{Pod: p, Container: c}); err != nil {
		log.Printf("fakecri: nri: RemoveContainer %s: %v", id, err)
	}
}
