package conformance

import (
	"context"
	"fmt"
	"os"
	"syscall"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"

	corev1pb "github.com/podsapi/podsapi/gen/k8s.io/api/core/v1"
	podsv1alpha1 "github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1"
)

// readinessPods is how many pods the readiness cases create before the
// implementation starts, so that partial answers are visible.
const readinessPods = 200

// manyPods writes the manifests of n small pods, or of as many as the
// declared maxPods allows (less 10, for the node's other pods), without
// waiting.
func (c *C) manyPods(n int) []podSpec {
	if m := c.env.cfg.Features.MaxPods; m > 0 && n > m-10 {
		n = m - 10
	}
	var specs []podSpec
	for i := range n {
		s := podSpec{name: fmt.Sprintf("ready-%03d", i), version: 1}
		c.track(s.name)
		if err := c.env.driver.put(s); err != nil {
			c.Fatalf("driver: %v", err)
		}
		specs = append(specs, s)
	}
	return specs
}

func (c *C) stop() {
	ctx, cancel := context.WithTimeout(c.ctx, 30*time.Second)
	defer cancel()
	if err := c.env.cfg.Lifecycle.Stop(ctx); err != nil {
		c.env.harnessFailure = harnessErr("stop the implementation: %v", err)
		c.Fatalf("%v", c.env.harnessFailure)
	}
}

func (c *C) start() {
	if err := c.env.cfg.Lifecycle.Start(c.ctx); err != nil {
		c.env.harnessFailure = harnessErr("start the implementation: %v", err)
		c.Fatalf("%v", c.env.harnessFailure)
	}
	c.Cleanup(func() {
		// Leave the implementation reachable for the next cases.
		if err := c.env.waitReachable(context.Background(), c.env.cfg.StartTimeout); err != nil {
			c.env.harnessFailure = err
		}
	})
}

// checkReadiness calls ListPods, GetPod and WatchPods as fast as it can
// from the moment the socket answers until each gave a complete answer:
// every answer must be FAILED_PRECONDITION (or RESOURCE_EXHAUSTED for the
// rate-limited calls) or complete, never partial.
func (c *C) checkReadiness(client podsClient, specs []podSpec, what string) {
	d := c.env.driver
	want := len(specs)
	uid := string(d.uid(specs[len(specs)-1].name))
	checkGet := d.suffix == "" // a kubelet chooses the UIDs of static pods
	var listDone, getDone, watchDone bool
	var answers [3]int
	deadline := time.Now().Add(c.env.cfg.StartTimeout + 30*time.Second)
	count := func(pods []*podsPod) int {
		n := 0
		for _, p := range pods {
			if c.ofRun(p) {
				n++
			}
		}
		return n
	}
	waitingOK := func(err error, unary bool) bool {
		switch codeOf(err) {
		case connect.CodeFailedPrecondition:
			return true
		case connect.CodeResourceExhausted:
			return unary
		}
		return !answered(err) // not reachable yet
	}
	for !(listDone && (getDone || !checkGet) && watchDone) {
		if time.Now().After(deadline) || c.ctx.Err() != nil {
			c.Failf(what, "complete answers of ListPods, GetPod and WatchPods within "+c.env.cfg.StartTimeout.String(),
				fmt.Sprintf("ListPods done %t, GetPod done %t, WatchPods done %t", listDone, getDone, watchDone))
		}
		if msg, ok := c.env.defect(noAnswer); ok {
			c.Failf(what, "answers", "not attempted: "+msg)
		}
		if !listDone {
			cctx, cancel := context.WithTimeout(c.ctx, c.recvTimeout())
			pods, err := client.list(cctx, nil)
			cancel()
			switch {
			case err == nil:
				answers[0]++
				if n := count(pods); n != want {
					c.Failf(what+": ListPods", fmt.Sprintf("FAILED_PRECONDITION or all %d pods", want), fmt.Sprintf("OK with %d of the %d pods (partial data)", n, want))
				}
				listDone = true
			case !waitingOK(err, true):
				c.Failf(what+": ListPods", "FAILED_PRECONDITION or OK", codeName(err))
			}
		}
		if checkGet && !getDone {
			cctx, cancel := context.WithTimeout(c.ctx, c.recvTimeout())
			_, err := client.get(cctx, uid, nil)
			cancel()
			switch {
			case err == nil:
				answers[1]++
				getDone = true
			case codeOf(err) == connect.CodeNotFound:
				c.Failf(what+": GetPod(podUID="+uid+")", "FAILED_PRECONDITION or the pod", "NOT_FOUND (partial data)")
			case !waitingOK(err, true):
				c.Failf(what+": GetPod(podUID="+uid+")", "FAILED_PRECONDITION or OK", codeName(err))
			}
		}
		if !watchDone {
			watchDone = c.readinessWatch(client, want, what)
			if watchDone {
				answers[2]++
			}
		}
	}
}

// readinessWatch makes one WatchPods call of checkReadiness and reports
// whether it gave the complete snapshot and the sync marker.
func (c *C) readinessWatch(client podsClient, want int, what string) bool {
	if msg, ok := c.env.defect(noSyncMarker); ok {
		c.Failf(what+": WatchPods", "FAILED_PRECONDITION or the initial snapshot, then EVENT_TYPE_INITIAL_SYNC_COMPLETE", "not attempted: "+msg)
	}
	ctx, cancel := context.WithTimeout(c.ctx, c.recvTimeout())
	defer cancel()
	waitingOK := func(err error) bool {
		return codeOf(err) == connect.CodeFailedPrecondition || !answered(err)
	}
	stream, err := client.watch(ctx, nil)
	if err != nil {
		if !waitingOK(err) {
			c.Failf(what+": WatchPods", "FAILED_PRECONDITION or a stream", codeName(err))
		}
		return false
	}
	defer stream.close()
	var pods []*podsPod
	for {
		typ, pod, ok := stream.receive()
		if !ok {
			break
		}
		if typ == podsv1alpha1.EventType_EVENT_TYPE_INITIAL_SYNC_COMPLETE {
			n := 0
			for _, p := range pods {
				if c.ofRun(p) {
					n++
				}
			}
			if n != want {
				c.Failf(what+": WatchPods", fmt.Sprintf("FAILED_PRECONDITION or an initial snapshot of all %d pods", want), fmt.Sprintf("a snapshot of %d of the %d pods (partial data)", n, want))
			}
			return true
		}
		pods = append(pods, pod)
	}
	if ctx.Err() == context.DeadlineExceeded && c.ctx.Err() == nil {
		msg := fmt.Sprintf("no EVENT_TYPE_INITIAL_SYNC_COMPLETE: WatchPods sent %d events and no sync marker within %s (case %s)", len(pods), c.recvTimeout(), c.id)
		c.env.seen(noSyncMarker, msg)
		c.Failf(what+": WatchPods", "FAILED_PRECONDITION or the initial snapshot, then EVENT_TYPE_INITIAL_SYNC_COMPLETE", msg)
	}
	if err := stream.err(); !waitingOK(err) {
		c.Failf(what+": WatchPods", "FAILED_PRECONDITION or the initial snapshot", codeName(err))
	}
	return false
}

func registerLifecycleCases() {
	register("Readiness/Startup",
		"From the moment its socket appears, every ListPods, GetPod and WatchPods answer MUST be FAILED_PRECONDITION or complete (all the driver's pods), never partial.",
		needs(NeedLifecycle, NeedDriver), func(c *C) {
			c.stop()
			specs := c.manyPods(readinessPods)
			c.start()
			c.checkReadiness(c.env.newClient(c.env.newHTTPClient(nil)), specs, fmt.Sprintf("start with %d manifests", len(specs)))
		})
	register("Readiness/Restart",
		"After a restart (SIGTERM, then the same command), answers MUST again be FAILED_PRECONDITION or complete, and existing clients MUST be able to reconnect.",
		needs(NeedLifecycle, NeedDriver), func(c *C) {
			specs := c.manyPods(readinessPods)
			o := c.observe()
			for _, s := range specs {
				if _, ok := o.pods[c.env.driver.served(s.name)]; !ok {
					o.waitVersion(c.env.driver.served(s.name), 1)
				}
			}
			c.stop()
			c.start()
			// The suite's own client, whose connection the restart broke.
			c.checkReadiness(c.env.client, specs, fmt.Sprintf("restart with %d manifests", len(specs)))
		})
	register("Health/Readiness",
		"gRPC health MUST NOT report SERVING before the pods are served completely (NOT_SERVING until the sources synced).",
		needs(NeedLifecycle, NeedDriver, NeedHealth), func(c *C) {
			c.stop()
			specs := c.manyPods(readinessPods)
			c.start()
			conn := c.grpcConn()
			hc := healthpb.NewHealthClient(conn)
			client := c.env.newClient(c.env.newHTTPClient(nil))
			deadline := time.Now().Add(c.env.cfg.StartTimeout)
			for time.Now().Before(deadline) {
				cctx, cancel := context.WithTimeout(c.ctx, 2*time.Second)
				resp, err := hc.Check(cctx, &healthpb.HealthCheckRequest{Service: c.env.cfg.Wire.Service()})
				cancel()
				if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
					continue
				}
				pods, err := c.listWith(client, nil)
				if err != nil {
					c.Failf("ListPods right after health reported SERVING", "all pods", codeName(err))
				}
				n := 0
				for _, p := range pods {
					if c.ofRun(p) {
						n++
					}
				}
				if n != len(specs) {
					c.Failf("ListPods right after health reported SERVING", fmt.Sprintf("all %d pods", len(specs)), fmt.Sprint(n))
				}
				return
			}
			c.Failf("grpc.health.v1.Health/Check", "SERVING within "+c.env.cfg.StartTimeout.String(), "never SERVING")
		})
}

type podsPod = corev1pb.Pod

func registerOptionalCases() {
	register("Health/Serving",
		"gRPC health v1 MUST answer SERVING for \"\" and the service of the wire (kubelet.pods.v1alpha1.Pods, v1alpha1.Pods) once the pods are served.",
		needs(NeedHealth), func(c *C) {
			c.mustList(nil) // synced
			hc := healthpb.NewHealthClient(c.grpcConn())
			for _, svc := range []string{"", c.env.cfg.Wire.Service()} {
				resp, err := hc.Check(c.ctx, &healthpb.HealthCheckRequest{Service: svc})
				if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
					c.Failf(fmt.Sprintf("grpc.health.v1.Health/Check(service=%q)", svc), "SERVING", fmt.Sprintf("%v %v", resp.GetStatus(), err))
				}
			}
		})
	register("Reflection/ListsService",
		"gRPC reflection v1 MUST list the service of the wire (kubelet.pods.v1alpha1.Pods, v1alpha1.Pods).",
		needs(NeedReflection), func(c *C) {
			rc := reflectionpb.NewServerReflectionClient(c.grpcConn())
			stream, err := rc.ServerReflectionInfo(c.ctx)
			if err != nil {
				c.Failf("grpc.reflection.v1.ServerReflection/ServerReflectionInfo", "a stream", err.Error())
			}
			defer stream.CloseSend()
			if err := stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
				c.Failf("ServerReflectionInfo list_services", "sent", err.Error())
			}
			resp, err := stream.Recv()
			if err != nil {
				c.Failf("ServerReflectionInfo list_services", "a response", err.Error())
			}
			var services []string
			for _, s := range resp.GetListServicesResponse().GetService() {
				services = append(services, s.GetName())
				if s.GetName() == c.env.cfg.Wire.Service() {
					return
				}
			}
			c.Failf("ServerReflectionInfo list_services", c.env.cfg.Wire.Service()+" listed", fmt.Sprint(services))
		})
	register("Socket/Permissions",
		"The socket MUST NOT be readable or writable by group or others, and MUST be owned by root when the implementation runs as root.",
		nil, func(c *C) {
			if !c.env.cfg.Features.SocketPermissions {
				c.Skipf("the features declare socketPermissions: false")
			}
			st, err := os.Stat(c.env.socket)
			if err != nil {
				c.Skipf("the socket is not visible to the runner (another host or namespace?): %v", err)
			}
			if st.Mode()&os.ModeSocket == 0 {
				c.Failf("stat "+c.env.socket, "a UNIX socket", st.Mode().String())
			}
			if perm := st.Mode().Perm(); perm&0o066 != 0 {
				c.Failf("stat "+c.env.socket, "no read or write permission for group and others", fmt.Sprintf("mode %v", perm))
			}
			if sys, ok := st.Sys().(*syscall.Stat_t); ok && os.Geteuid() == 0 && sys.Uid != 0 {
				c.Failf("stat "+c.env.socket+" (the runner runs as root)", "owned by uid 0", fmt.Sprintf("owned by uid %d", sys.Uid))
			}
		})
}

// grpcConn returns a grpc-go connection to the socket, closed at the end
// of the case.
func (c *C) grpcConn() *grpc.ClientConn {
	conn, err := grpc.NewClient("unix://"+c.env.socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		c.Fatalf("grpc client: %v", err)
	}
	c.Cleanup(func() { conn.Close() })
	return conn
}
