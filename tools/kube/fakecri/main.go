// SPDX-License-Identifier: Apache-2.0

// Command fakecri serves upstream's fake CRI runtime and image services
// (k8s.io/cri-client/pkg/fake, the runtime kubemark's hollow kubelet uses)
// on a UNIX socket, for the tests that run a real kubelet without a
// container runtime. It adds what a kubelet needs of a runtime that the
// fake leaves out: images with a non-zero size, an image filesystem, a
// cgroupfs RuntimeConfig and a real container log path (with an empty one
// a kubelet deletes files in its working directory). It stops on SIGINT or
// SIGTERM.
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

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/cri-client/pkg/fake"
)

func main() {
	socket := flag.String("socket", "", "the UNIX socket to serve the CRI on (required)")
	imageFS := flag.String("image-fs", "", "the directory reported as the image and container filesystem (required)")
	imageSize := flag.Uint64("image-size", 1<<20, "the size in bytes of every image (the kubelet's image manager needs a non-zero size)")
	flag.Parse()
	if *socket == "" || *imageFS == "" {
		fmt.Fprintln(os.Stderr, "fakecri: --socket and --image-fs are required")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *socket, *imageFS, *imageSize); err != nil {
		log.Fatalf("fakecri: %v", err)
	}
}

func run(ctx context.Context, socket, imageFS string, imageSize uint64) error {
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

// runtime is the fake with the container log paths the fake forgets.
type runtime struct {
	*fake.RemoteRuntime
	mu   sync.Mutex
	logs map[string]string // container ID -> log path
}

// CreateContainer creates the container and its log file, under the log
// directory of its sandbox, and remembers the path.
func (r *runtime) CreateContainer(ctx context.Context, req *runtimeapi.CreateContainerRequest) (*runtimeapi.CreateContainerResponse, error) {
	resp, err := r.RemoteRuntime.CreateContainer(ctx, req)
	if err != nil {
		return nil, err
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

// RemoveContainer removes the container and forgets its log path.
func (r *runtime) RemoveContainer(ctx context.Context, req *runtimeapi.RemoveContainerRequest) (*runtimeapi.RemoveContainerResponse, error) {
	r.mu.Lock()
	delete(r.logs, req.GetContainerId())
	r.mu.Unlock()
	return r.RemoteRuntime.RemoveContainer(ctx, req)
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
