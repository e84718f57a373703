package stress

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	corev1 "k8s.io/api/core/v1"

	"github.com/podsapi/podsapi/server"
	"github.com/podsapi/podsapi/store"
	"github.com/podsapi/podsapi/test/childproc"
	"github.com/podsapi/podsapi/test/podstest"
)

// SentAnnotation carries the time (Unix nanoseconds) a change was written to
// the store, so that watchers can measure the delivery latency.
const SentAnnotation = "stress.podsapi.io/sent"

// MaybeChild serves as the stress server, or runs the clients of the flood
// (see runFlood), the root attacker (runRootAttacker) or the victim
// (runVictim), and exits when the process is one of the stress harness's
// children (childproc.Role); otherwise it returns at once. Call it first in
// main (or TestMain).
func MaybeChild() {
	switch childproc.Role() {
	case roleServer:
		if err := runChild(os.Args[1:], os.Stdin, os.Stdout, os.Stderr); err != nil {
			fmt.Fprintln(os.Stderr, "stress child:", err)
			os.Exit(1)
		}
	case roleFlood:
		if err := runFlood(os.Args[1:], os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "stress flood:", err)
			os.Exit(1)
		}
	case roleRootAttacker:
		if err := runRootAttacker(os.Args[1:], os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "stress root attacker:", err)
			os.Exit(1)
		}
	case roleVictim:
		if err := runVictim(os.Args[1:], os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "stress victim:", err)
			os.Exit(1)
		}
	default:
		return
	}
	os.Exit(0)
}

// childPods is the number of pods the child serves unless told (--pods).
const childPods = 50

// runChild is the stress server: the real server (package server) on a
// store the child changes when told to on stdin, with logs on stderr and
// metrics on a loopback port. Commands, one a line:
//
//	churn N RATE   N changes at RATE per second; answers "churned N"
//	gc             runtime.GC and debug.FreeOSMemory; answers "ok"
//
// It prints "ready SOCKET METRICS" once serving, and stops on SIGTERM.
func runChild(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("stress-child", flag.ContinueOnError)
	sock := fs.String("socket", "", "socket")
	qps := fs.Float64("qps", server.DefaultQPS, "")
	burst := fs.Int("burst", server.DefaultBurst, "")
	queue := fs.Int("watch-queue", 0, "")
	stall := fs.Duration("write-stall-timeout", 0, "")
	delay := fs.Duration("rate-limit-delay", 0, "")
	padding := fs.Int("padding", 1024, "bytes of annotation per pod")
	npods := fs.Int("pods", childPods, "pods served")
	maxConns := fs.Int("max-connections", 0, "")
	readTimeout := fs.Duration("request-read-timeout", 0, "")
	hostProc := fs.String("host-proc", "", "where the cgroups of the clients' processes are read")
	watchersPerClient := fs.Int("max-watchers-per-client", 0, "")
	perClientQPS := fs.Float64("per-client-qps", 0, "")
	perClientBurst := fs.Int("per-client-burst", 0, "")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	st := store.New()
	pods := make([]*corev1.Pod, *npods)
	for i := range pods {
		pods[i] = podstest.Pod("stress", fmt.Sprintf("pod-%03d", i), i)
		pods[i].ResourceVersion = "1"
		pods[i].Annotations["padding"] = strings.Repeat("p", *padding)
		st.Upsert(pods[i])
	}
	st.MarkSynced()
	srv, err := server.New(st, server.Config{
		Socket:   *sock,
		Logger:   logger,
		Registry: reg,
		HostProc: *hostProc,
		Limits: server.LimitsConfig{QPS: *qps, Burst: *burst, RateLimitDelay: *delay, MaxConnections: *maxConns,
			MaxWatchersPerClient: *watchersPerClient, PerClientQPS: *perClientQPS, PerClientBurst: *perClientBurst},
		Watch:     server.WatchConfig{Queue: *queue},
		Transport: server.TransportConfig{WriteStallTimeout: *stall, RequestReadTimeout: *readTimeout, ShutdownTimeout: 5 * time.Second},
		Metrics:   server.MetricsConfig{Address: "127.0.0.1:0"},
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "ready %s %s\n", srv.SocketPath(), srv.MetricsAddr())
	go func() {
		sc := bufio.NewScanner(stdin)
		next := 0
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			switch {
			case len(f) == 3 && f[0] == "churn":
				n, _ := strconv.Atoi(f[1])
				rate, _ := strconv.Atoi(f[2])
				next = churnStore(st, pods, next, n, rate)
				fmt.Fprintf(stdout, "churned %d\n", n)
			case len(f) == 1 && f[0] == "gc":
				runtime.GC()
				debug.FreeOSMemory()
				fmt.Fprintln(stdout, "ok")
			}
		}
	}()
	return srv.Serve(ctx)
}

// churnStore makes n changes, round robin over pods from next, at rate per second
// (in batches every 10 ms), and returns the next pod to change.
func churnStore(st *store.Store, pods []*corev1.Pod, next, n, rate int) int {
	const step = 10 * time.Millisecond
	perStep := max(rate*int(step)/int(time.Second), 1)
	start := time.Now()
	for done := 0; done < n; {
		for i := 0; i < perStep && done < n; i++ {
			p := pods[next%len(pods)].DeepCopy()
			rv, _ := strconv.Atoi(p.ResourceVersion)
			p.ResourceVersion = strconv.Itoa(rv + 1)
			p.Annotations[SentAnnotation] = strconv.FormatInt(time.Now().UnixNano(), 10)
			st.Upsert(p)
			pods[next%len(pods)] = p
			next++
			done++
		}
		if wait := time.Until(start.Add(time.Duration(done/perStep) * step)); wait > 0 {
			time.Sleep(wait) // pacing the load, not synchronisation
		}
	}
	return next
}
