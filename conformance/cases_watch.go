package conformance

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"slices"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"
	corev1 "k8s.io/api/core/v1"

	corev1pb "github.com/podsapi/podsapi/gen/k8s.io/api/core/v1"
	podsv1alpha1 "github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1"
)

const (
	added    = podsv1alpha1.EventType_EVENT_TYPE_ADDED
	modified = podsv1alpha1.EventType_EVENT_TYPE_MODIFIED
	deleted  = podsv1alpha1.EventType_EVENT_TYPE_DELETED
)

// step is an event of the run's pods, as the suite compares them.
func step(ev event) string {
	return fmt.Sprintf("%s %s v%s", ev.typ, ev.pod.GetMetadata().GetName(), ev.pod.GetMetadata().GetAnnotations()[versionAnnotation])
}

// seqStep is step with a digest of the pod's status, as checkSequence
// reads it.
func seqStep(ev event) string { return step(ev) + " s" + statusKey(ev.pod) }

// statusKey is a short digest of the status of p, to tell an
// implementation's own status events (the same version, another status)
// from duplicates (the same version and status).
func statusKey(p *corev1pb.Pod) string {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(p.GetStatus())
	if err != nil {
		return "?"
	}
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:4])
}

// ownStatusEvent reports whether ev, an event of the pod whose previous
// event was prev, is an implementation's own status change (a kubelet's
// Pending to Running, a termination): a MODIFIED at the same version with
// another status. The same version with the same status is a duplicate.
func ownStatusEvent(prev, ev event) bool {
	v := func(e event) string { return e.pod.GetMetadata().GetAnnotations()[versionAnnotation] }
	return ev.typ == modified && prev.pod != nil && prev.typ != deleted && v(ev) == v(prev) && statusKey(ev.pod) != statusKey(prev.pod)
}

// collectRun reads w until the pod named end is added, returning the steps
// of the run's pods.
func (c *C) collectRun(w *watch, end string) []string {
	var steps []string
	for {
		ev := w.mustNext()
		if !c.ofRun(ev.pod) {
			continue
		}
		if ev.pod.GetMetadata().GetName() == end {
			return steps
		}
		steps = append(steps, seqStep(ev))
	}
}

// checkSequence checks that steps, per pod, start with ADDED, have every
// version once and in order (MODIFIED events at the same version are
// allowed only with another status: the implementation's own status
// changes), nothing after DELETED (which carries the last version when
// lastState), and end at final.
func checkSequence(steps []string, final map[string]string, lastState bool) string {
	type state struct {
		version int
		status  string
		gone    bool
		seen    bool
	}
	pods := map[string]*state{}
	for i, s := range steps {
		f := strings.Fields(s)
		if len(f) != 4 {
			return fmt.Sprintf("event %d %q: malformed step", i, s)
		}
		typ, name, status := f[0], f[1], f[3]
		v, _ := strconv.Atoi(strings.TrimPrefix(f[2], "v"))
		st := pods[name]
		if st == nil {
			st = &state{}
			pods[name] = st
		}
		switch {
		case !st.seen && typ != added.String():
			return fmt.Sprintf("event %d %q: the first event of a pod must be EVENT_TYPE_ADDED", i, s)
		case st.gone:
			return fmt.Sprintf("event %d %q: an event after EVENT_TYPE_DELETED", i, s)
		case typ == deleted.String():
			if lastState && v != st.version {
				return fmt.Sprintf("event %d %q: EVENT_TYPE_DELETED must carry the last state, version %d", i, s, st.version)
			}
			st.gone = true
		case st.seen && typ == added.String():
			return fmt.Sprintf("event %d %q: a second EVENT_TYPE_ADDED", i, s)
		case st.seen && v == st.version && status != st.status:
			// The implementation's own status change.
		case st.seen && v <= st.version:
			return fmt.Sprintf("event %d %q: version %d after %d: out of order or duplicate", i, s, v, st.version)
		case st.seen && v != st.version+1:
			return fmt.Sprintf("event %d %q: version %d after %d: the versions between are missing", i, s, v, st.version)
		}
		st.seen = true
		if typ != deleted.String() {
			st.version, st.status = v, status
		}
	}
	for name, want := range final {
		st := pods[name]
		got := "never seen"
		if st != nil {
			got = "v" + strconv.Itoa(st.version)
			if st.gone {
				got = "deleted"
			}
		}
		if got != want {
			return fmt.Sprintf("pod %s ends %s, want %s", name, got, want)
		}
	}
	return ""
}

func registerWatchCases() {
	register("WatchPods/InitialSnapshot",
		"WatchPods MUST start with one EVENT_TYPE_ADDED per current pod (the pods of ListPods), then one EVENT_TYPE_INITIAL_SYNC_COMPLETE without a pod.",
		needs(NeedEventTypes), func(c *C) {
			if c.env.driver != nil {
				c.create(samplePods()...)
			}
			for attempt := 0; ; attempt++ {
				w := c.watch(nil)
				got := w.initial() // checks the form
				w.close()
				want := c.mustList(nil)
				sortPods(got)
				sortPods(want)
				if slices.Equal(names(got), names(want)) {
					return
				}
				if c.lastAttempt(attempt) {
					c.Failf("WatchPods", fmt.Sprintf("ADDED for the pods of ListPods %v", names(want)), fmt.Sprint(names(got)))
				}
			}
		})
	register("WatchPods/Events",
		"WatchPods MUST send EVENT_TYPE_ADDED, EVENT_TYPE_MODIFIED and EVENT_TYPE_DELETED as the driver creates, edits and deletes a manifest; DELETED carries the pod's name, namespace and UID, and its last state when the features declare deletedLastState.",
		needs(NeedDriver, NeedEventTypes), func(c *C) {
			o := c.observe()
			w := c.watch(nil)
			w.initial()
			d := c.env.driver
			s := podSpec{name: "events", version: 1, phase: corev1.PodPending}
			if !c.env.cfg.Features.ManifestStatus {
				s.phase = ""
			}
			c.track(s.name)
			if err := d.put(s); err != nil {
				c.Fatalf("driver: %v", err)
			}
			o.waitVersion(d.served(s.name), 1)
			// prev is the latest event of the pod: events of the same
			// version with another status are the implementation's own
			// (a kubelet's Pending to Running, a termination), and events of
			// other pods are not the case's.
			var prev event
			next := func(what string, typ podsv1alpha1.EventType, version int) event {
				for {
					ev := w.mustNext()
					if !c.ofRun(ev.pod) || ev.pod.GetMetadata().GetName() != d.served(s.name) {
						continue
					}
					if ownStatusEvent(prev, ev) {
						prev = ev
						continue
					}
					prev = ev
					wrongVersion := ev.pod.GetMetadata().GetAnnotations()[versionAnnotation] != strconv.Itoa(version)
					if typ == deleted && !c.env.cfg.Features.DeletedLastState {
						// Only the identity is promised.
						wrongVersion = ev.pod.GetMetadata().GetUid() == "" || ev.pod.GetMetadata().GetNamespace() == ""
					}
					if ev.typ != typ || ev.pod.GetMetadata().GetName() != d.served(s.name) || wrongVersion {
						c.Failf("WatchPods while the driver "+what, fmt.Sprintf("%s %s version %d", typ, d.served(s.name), version), ev.String())
					}
					return ev
				}
			}
			c.checkManifest("WatchPods (EVENT_TYPE_ADDED)", s, next("creates a manifest", added, 1).pod)
			s.version = 2
			c.update(o, s)
			c.checkManifest("WatchPods (EVENT_TYPE_MODIFIED)", s, next("edits the manifest", modified, 2).pod)
			c.delete(o, s.name)
			next("deletes the manifest", deleted, 2)
		})
	register("WatchPods/Order",
		"WatchPods MUST deliver the changes of every pod in order, without duplicates, ending at the pod's latest state.",
		needs(NeedDriver, NeedEventTypes), func(c *C) {
			o := c.observe()
			w := c.watch(nil)
			w.initial()
			steps, final := c.churn(o)
			got := c.collectRun(w, c.env.driver.served("end"))
			if diff := checkSequence(got, final, c.env.cfg.Features.DeletedLastState); diff != "" {
				c.Failf("WatchPods while the driver creates, edits and deletes pods ("+fmt.Sprint(steps)+" changes)", "every pod's changes in order, once", diff+"\nevents: "+strings.Join(got, ", "))
			}
		})
	register("WatchPods/ConcurrentWatchers",
		"Concurrent WatchPods streams MUST all see the same sequence of events.",
		needs(NeedDriver, NeedEventTypes), func(c *C) {
			o := c.observe()
			var ws []*watch
			for range 3 {
				w := c.watch(nil)
				w.initial()
				ws = append(ws, w)
			}
			c.churn(o)
			first := c.collectRun(ws[0], c.env.driver.served("end"))
			for i, w := range ws[1:] {
				if got := c.collectRun(w, c.env.driver.served("end")); !slices.Equal(got, first) {
					c.Failf(fmt.Sprintf("WatchPods, watcher %d of 3", i+2), "the sequence of watcher 1: "+strings.Join(first, ", "), strings.Join(got, ", "))
				}
			}
		})
	register("WatchPods/SlowConsumer",
		"A watcher that stops reading MUST be dropped (its stream ends with RESOURCE_EXHAUSTED once it reads again) while a healthy watcher receives every change; with metrics, kubelet_pod_watch_events_dropped_total MUST grow.",
		needs(NeedDriver, NeedEventTypes), slowConsumer)
	register("WatchPods/NotRateLimited",
		"WatchPods MUST NOT be rate limited: watches opened beyond the ListPods/GetPod burst all start.",
		needs(NeedRateLimit), func(c *C) {
			// A stream shows it started with its first event: on a node
			// without pods, the sync marker.
			if msg, ok := c.env.defect(noSyncMarker); ok {
				c.Failf("WatchPods", "a first event (on a node without pods, EVENT_TYPE_INITIAL_SYNC_COMPLETE)", "not attempted: "+msg)
			}
			c.exhaust()
			// All at once, right after the bucket was emptied.
			n := c.env.cfg.Features.RateLimit.Burst + 5
			codes := make(chan error, n)
			ctx, cancel := context.WithTimeout(c.ctx, c.recvTimeout())
			defer cancel()
			for range n {
				go func() {
					stream, err := c.env.client.watch(ctx, nil)
					if err == nil {
						if _, _, ok := stream.receive(); !ok {
							err = stream.err()
						}
						stream.close()
					}
					codes <- err
				}()
			}
			for i := range n {
				if err := <-codes; err != nil {
					c.Failf(fmt.Sprintf("%d WatchPods at once, right after ListPods exhausted the rate limit", n), "every stream starts", fmt.Sprintf("stream %d: %s", i+1, codeName(err)))
				}
			}
		})
}

// churn creates, edits and deletes pods of the run, then creates the pod
// "end"; it returns the number of changes and the final state of each pod
// ("vN" or "deleted").
func (c *C) churn(o *observer) (int, map[string]string) {
	d := c.env.driver
	specs := []podSpec{{name: "a", version: 1}, {name: "b", version: 1}, {name: "c", version: 1}}
	changes := 0
	for _, s := range specs {
		c.track(s.name)
		if err := d.put(s); err != nil {
			c.Fatalf("driver: %v", err)
		}
		o.waitVersion(d.served(s.name), 1)
		changes++
	}
	for k := 0; k < 12; k++ {
		s := &specs[k%len(specs)]
		s.version++
		c.update(o, *s)
		changes++
	}
	c.delete(o, "b")
	changes++
	c.track("end")
	if err := d.put(podSpec{name: "end", version: 1}); err != nil {
		c.Fatalf("driver: %v", err)
	}
	o.waitVersion(d.served("end"), 1)
	final := map[string]string{d.served("a"): "v" + strconv.Itoa(specs[0].version), d.served("b"): "deleted", d.served("c"): "v" + strconv.Itoa(specs[2].version)}
	return changes, final
}

// slowConsumer stalls a watcher with small HTTP/2 windows while the driver
// changes a large pod, pacing on a healthy watcher.
func slowConsumer(c *C) {
	d := c.env.driver
	s := podSpec{name: "large", version: 1, padding: 64 << 10}
	o := c.create(s)
	name := d.served(s.name)
	before, haveMetrics := 0.0, c.env.cfg.MetricsURL != ""
	if haveMetrics {
		before = c.scrape().value("kubelet_pod_watch_events_dropped_total", nil)
	}
	conn, err := grpc.NewClient("unix://"+c.env.socket, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10), grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMessageBytes)))
	if err != nil {
		c.Fatalf("grpc client: %v", err)
	}
	defer conn.Close()
	sctx, scancel := context.WithCancel(c.ctx)
	defer scancel()
	wire := c.env.cfg.Wire
	req, newResp, decode := wire.rawWatch()
	gs, err := conn.NewStream(sctx, &grpc.StreamDesc{ServerStreams: true}, wire.watchProcedure())
	if err != nil {
		c.Failf("WatchPods", "a stream", err.Error())
	}
	if err := gs.SendMsg(req); err != nil {
		c.Failf("WatchPods", "a stream", err.Error())
	}
	gs.CloseSend()
	// The pod as the snapshot has it, to tell the implementation's own
	// status events from the changes.
	var snap event
	// The snapshot is bounded like any wait for an event.
	snapshot := time.AfterFunc(c.recvTimeout(), scancel)
	for {
		m := newResp()
		if err := gs.RecvMsg(m); err != nil {
			c.Failf("WatchPods", "the initial snapshot within "+c.recvTimeout().String(), err.Error())
		}
		typ, pod, err := decode(m)
		if err != nil {
			c.Failf("WatchPods", "the initial snapshot", err.Error())
		}
		if typ == podsv1alpha1.EventType_EVENT_TYPE_INITIAL_SYNC_COMPLETE {
			break
		}
		if pod.GetMetadata().GetName() == name {
			snap = event{typ: typ, pod: pod}
		}
	}
	if !snapshot.Stop() {
		c.Failf("WatchPods", "the initial snapshot within "+c.recvTimeout().String(), "the stream was cancelled")
	}
	// The observer is the healthy watcher: it must receive every change.
	queue := c.env.cfg.Features.WatchQueue
	if queue == 0 {
		queue = 1000
	}
	// Enough changes to fill the queue and what HTTP/2 and the sockets can
	// hold (a few MiB) many times over.
	bound := queue + 128
	start := time.Now()
	k := 1
	for k < bound+1 {
		k++
		s.version = k
		c.update(o, s)
		if haveMetrics && k%8 == 0 && c.scrape().value("kubelet_pod_watch_events_dropped_total", nil) > before {
			break
		}
	}
	c.Logf("%d changes in %s", k-1, time.Since(start).Round(time.Millisecond))
	// The stalled watcher reads again: it gets a prefix of the changes, in
	// order, then RESOURCE_EXHAUSTED.
	last := 1
	prev := snap
	events := make(chan event)
	go func() {
		for {
			m := newResp()
			err := gs.RecvMsg(m)
			var ev event
			if err != nil {
				ev = event{err: connect.NewError(connect.Code(status.Code(err)), err)}
			} else if ev.typ, ev.pod, err = decode(m); err != nil {
				ev = event{err: err}
			}
			select {
			case events <- ev:
			case <-sctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	for {
		var ev event
		ok := true
		select {
		case ev = <-events:
		case <-time.After(c.recvTimeout()):
			ok = false
		}
		if !ok {
			c.Failf("WatchPods stalled (small HTTP/2 windows) while the driver made "+strconv.Itoa(k-1)+" changes of a 64 KiB pod, then read again",
				"the stream ends with RESOURCE_EXHAUSTED", fmt.Sprintf("no event and no end within %s after version %d", c.recvTimeout(), last))
		}
		if ev.err != nil {
			if codeOf(ev.err) != connect.CodeResourceExhausted {
				c.Failf("WatchPods stalled, then read again", "the stream ends with RESOURCE_EXHAUSTED", ev.String())
			}
			break
		}
		if ev.pod.GetMetadata().GetName() != name {
			continue
		}
		own := ownStatusEvent(prev, ev)
		prev = ev
		if own {
			// The implementation's own status change.
			continue
		}
		v, _ := strconv.Atoi(ev.pod.GetMetadata().GetAnnotations()[versionAnnotation])
		if v <= last {
			c.Failf("WatchPods stalled, then read again", "the changes in order, then RESOURCE_EXHAUSTED", fmt.Sprintf("version %d after %d", v, last))
		}
		last = v
		if v == k {
			c.Failf("WatchPods stalled (small HTTP/2 windows, a watch queue of "+strconv.Itoa(queue)+" declared) while the driver made "+strconv.Itoa(k-1)+" changes of a 64 KiB pod, then read again",
				"the watcher is dropped: its stream ends with RESOURCE_EXHAUSTED", "every change was delivered: the watcher was never dropped")
		}
	}
	// The healthy watcher goes on.
	s.version = k + 1
	c.update(o, s)
	if haveMetrics {
		if after := c.scrape().value("kubelet_pod_watch_events_dropped_total", nil); after <= before {
			c.Failf("scrape "+c.env.cfg.MetricsURL+" after a watcher was dropped", "kubelet_pod_watch_events_dropped_total grew", fmt.Sprintf("%v, then %v", before, after))
		}
	}
}
