// SPDX-License-Identifier: Apache-2.0

// Command fakecri serves upstream's fake CRI runtime and image services
// (k8s.io/cri-client/pkg/fake, the runtime kubemark's hollow kubelet uses)
// on a UNIX socket, for the tests that run a real kubelet without a
// container runtime. It adds what a kubelet needs of a runtime that the
// fake leaves out: images with a non-zero size, an image filesystem, a
// cgroupfs RuntimeConfig and a real container log path (with an empty one
// a kubelet deletes files in its working directory). It stops on SIGINT or
// SIGTERM.
//
// With --nri-socket it also serves NRI's runtime side on that socket (the
// adaptation package containerd embeds), telling the plugins that connect
// of its sandboxes and containers as containerd does (see nriRuntime);
// with --events-file it records when it created each container, for the
// measurements of how long after that a pod source reports it.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/containerd/nri/pkg/adaptation"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/cri-client/pkg/fake"
)

func main() {
	socket := flag.String("socket", "", "the UNIX socket to serve the CRI on (required)")
	imageFS := flag.String("image-fs", "", "the directory reported as the image and container filesystem (required)")
	imageSize := flag.Uint64("image-size", 1<<20, "the size in bytes of every image (the kubelet's image manager needs a non-zero size)")
	var o options
	flag.StringVar(&o.nriSocket, "nri-socket", "", "serve NRI's runtime side on this UNIX socket (off when empty)")
	flag.DurationVar(&o.nriTimeout, "nri-plugin-timeout", adaptation.DefaultPluginRequestTimeout, "NRI's plugin request timeout: the longest an NRI call holds a CRI call")
	flag.StringVar(&o.eventsFile, "events-file", "", "record each container created, a JSON line {container_id, pod_uid, name, created_unix_nano}, in this file (off when empty)")
	flag.IntVar(&o.eventsMax, "events-max", 100000, "the most lines the events file takes")
	flag.Parse()
	if *socket == "" || *imageFS == "" {
		fmt.Fprintln(os.Stderr, "fakecri: --socket and --image-fs are required")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *socket, *imageFS, *imageSize, o); err != nil {
		log.Fatalf("fakecri: %v", err)
	}
}

// options are the optional parts of the fake.
type options struct {
	nriSocket  string
	nriTimeout time.Duration
	eventsFile string
	eventsMax  int
}

func run(ctx context.Context, socket, imageFS string, imageSize uint64, o options) error {
	f := fake.NewFakeRemoteRuntime()
	f.ImageService.SetFakeImageSize(imageSize)
	now := time.Now().UnixNano()
	usage := []*runtimeapi.FilesystemUsage{{
		Timestamp:  now,
		FsId:       &runtimeapi.FilesystemIdentifier{Mountpoint: imageFS},
		UsedBytes:  &runtimeapi.UInt64Value{Value: imageSize},
		InodesUsed: &runtimeapi.UInt64Value{Value: 1},
	}}
	f.ImageService.SetFakeFilesystemUsage(usage)
	f.ImageService.SetFakeContainerFilesystemUsage(usage)
	f.RuntimeService.FakeLinuxConfiguration = &runtimeapi.LinuxRuntimeConfiguration{CgroupDriver: runtimeapi.CgroupDriver_CGROUPFS}
	f.RuntimeService.FakeStatus = &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{
		{Type: runtimeapi.RuntimeReady, Status: true},
		{Type: runtimeapi.NetworkReady, Status: true},
	}}

	rt := &runtime{RemoteRuntime: f, logs: map[string]string{}}
	if o.eventsFile != "" {
		e, err := openEvents(o.eventsFile, o.eventsMax)
		if err != nil {
			return err
		}
		defer e.close()
		rt.events = e
	}
	if o.nriSocket != "" {
		n, err := startNRI(o.nriSocket, o.nriTimeout)
		if err != nil {
			return err
		}
		defer n.stop()
		rt.nri = n
	}
	srv := grpc.NewServer()
	runtimeapi.RegisterRuntimeServiceServer(srv, rt)
	runtimeapi.RegisterImageServiceServer(srv, rt)

	if err := os.Remove(socket); err != nil && !os.IsNotExist(err) {
		return err
	}
	l, err := (&netListenConfig{}).listen(ctx, socket)
	if err != nil {
		return err
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(l) }()
	go rt.trim(ctx)
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		srv.Stop()
		return nil
	}
}

// runtime is the fake with the container log paths the fake forgets, and
// NRI's runtime side when nri is not nil.
type runtime struct {
	*fake.RemoteRuntime
	mu   sync.Mutex
	logs map[string]string // container ID -> log path

	nri    *nriRuntime // nil without --nri-socket
	events *eventsFile // nil without --events-file
}

// RunPodSandbox runs the sandbox, then tells NRI's plugins, with the IPs
// the fake reports.
func (r *runtime) RunPodSandbox(ctx context.Context, req *runtimeapi.RunPodSandboxRequest) (*runtimeapi.RunPodSandboxResponse, error) {
	resp, err := r.RemoteRuntime.RunPodSandbox(ctx, req)
	if err != nil || r.nri == nil {
		return resp, err
	}
	var ips []string
	if st, err := r.RemoteRuntime.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: resp.GetPodSandboxId()}); err == nil {
		if ip := st.GetStatus().GetNetwork().GetIp(); ip != "" {
			ips = append(ips, ip)
		}
		for _, ip := range st.GetStatus().GetNetwork().GetAdditionalIps() {
			ips = append(ips, ip.GetIp())
		}
	}
	r.nri.runPodSandbox(ctx, sandbox(resp.GetPodSandboxId(), req.GetConfig(), req.GetRuntimeHandler(), ips))
	return resp, nil
}

// StopPodSandbox stops the sandbox, then tells NRI's plugins.
func (r *runtime) StopPodSandbox(ctx context.Context, req *runtimeapi.StopPodSandboxRequest) (*runtimeapi.StopPodSandboxResponse, error) {
	resp, err := r.RemoteRuntime.StopPodSandbox(ctx, req)
	if err == nil && r.nri != nil {
		r.nri.stopPodSandbox(ctx, req.GetPodSandboxId())
	}
	return resp, err
}

// RemovePodSandbox removes the sandbox, then tells NRI's plugins.
func (r *runtime) RemovePodSandbox(ctx context.Context, req *runtimeapi.RemovePodSandboxRequest) (*runtimeapi.RemovePodSandboxResponse, error) {
	resp, err := r.RemoteRuntime.RemovePodSandbox(ctx, req)
	if err == nil && r.nri != nil {
		r.nri.removePodSandbox(ctx, req.GetPodSandboxId())
	}
	return resp, err
}

// StartContainer tells NRI's plugins of the start, starts the container,
// then tells them it started.
func (r *runtime) StartContainer(ctx context.Context, req *runtimeapi.StartContainerRequest) (*runtimeapi.StartContainerResponse, error) {
	if r.nri == nil {
		return r.RemoteRuntime.StartContainer(ctx, req)
	}
	started := r.nri.startContainer(ctx, req.GetContainerId())
	resp, err := r.RemoteRuntime.StartContainer(ctx, req)
	if err == nil {
		started()
	}
	return resp, err
}

// StopContainer stops the container, then tells NRI's plugins.
func (r *runtime) StopContainer(ctx context.Context, req *runtimeapi.StopContainerRequest) (*runtimeapi.StopContainerResponse, error) {
	resp, err := r.RemoteRuntime.StopContainer(ctx, req)
	if err == nil && r.nri != nil {
		r.nri.stopContainer(ctx, req.GetContainerId())
	}
	return resp, err
}

// CreateContainer creates the container and its log file, under the log
// directory of its sandbox, and remembers the path; it records the
// creation in the events file and tells NRI's plugins (the create hook,
// then the post-create notification).
func (r *runtime) CreateContainer(ctx context.Context, req *runtimeapi.CreateContainerRequest) (*runtimeapi.CreateContainerResponse, error) {
	resp, err := r.RemoteRuntime.CreateContainer(ctx, req)
	if err != nil {
		return nil, err
	}
	r.events.created(resp.GetContainerId(), req.GetSandboxConfig().GetMetadata().GetUid(), req.GetConfig().GetMetadata().GetName(), time.Now())
	if r.nri != nil {
		if err := r.nri.createContainer(ctx, resp.GetContainerId(), req.GetPodSandboxId(), req.GetConfig()); err != nil {
			_, _ = r.RemoteRuntime.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: resp.GetContainerId()})
			return nil, err
		}
	}
	dir := req.GetSandboxConfig().GetLogDirectory()
	if dir != "" && req.GetConfig().GetLogPath() != "" {
		p := filepath.Join(dir, req.GetConfig().GetLogPath())
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err == nil {
			if lf, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY, 0o640); err == nil {
				lf.Close()
			}
		}
		r.mu.Lock()
		r.logs[resp.GetContainerId()] = p
		r.mu.Unlock()
	}
	return resp, nil
}

// RemoveContainer removes the container and forgets its log path, then
// tells NRI's plugins.
func (r *runtime) RemoveContainer(ctx context.Context, req *runtimeapi.RemoveContainerRequest) (*runtimeapi.RemoveContainerResponse, error) {
	r.mu.Lock()
	delete(r.logs, req.GetContainerId())
	r.mu.Unlock()
	resp, err := r.RemoteRuntime.RemoveContainer(ctx, req)
	if err == nil && r.nri != nil {
		r.nri.removeContainer(ctx, req.GetContainerId())
	}
	return resp, err
}

// ContainerStatus is the fake's status with the container's log path.
func (r *runtime) ContainerStatus(ctx context.Context, req *runtimeapi.ContainerStatusRequest) (*runtimeapi.ContainerStatusResponse, error) {
	resp, err := r.RemoteRuntime.ContainerStatus(ctx, req)
	if err != nil || resp.GetStatus() == nil {
		return resp, err
	}
	r.mu.Lock()
	p := r.logs[req.GetContainerId()]
	r.mu.Unlock()
	if p != "" {
		// A copy: the fake's own status may be shared.
		st := proto.Clone(resp.GetStatus()).(*runtimeapi.ContainerStatus)
		st.LogPath = p
		resp.Status = st
	}
	return resp, nil
}

// trim empties the fake's records of calls every few seconds: the fake
// appends every call to them, which would grow without bound.
func (r *runtime) trim(ctx context.Context) {
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			r.RuntimeService.Lock()
			r.RuntimeService.Called = r.RuntimeService.Called[:0]
			r.RuntimeService.Unlock()
			r.ImageService.Lock()
			r.ImageService.Called = r.ImageService.Called[:0]
			r.ImageService.Unlock()
		}
	}
}

// netListenConfig listens on a UNIX socket that only its owner may use.
type netListenConfig struct{}

func (netListenConfig) listen(ctx context.Context, path string) (net.Listener, error) {
	var lc net.ListenConfig
	l, err := lc.Listen(ctx, "unix", path)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, 0o600); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}
