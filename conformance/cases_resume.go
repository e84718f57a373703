package conformance

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"connectrpc.com/connect"

	podsv1alpha1 "github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1"
)

// revisionTooOld is the ErrorInfo reason of a resume_from the history no
// longer holds.
const revisionTooOld = "REVISION_TOO_OLD"

// replay reads a resumed watch up to INITIAL_SYNC_COMPLETE and returns the
// steps of the run's pods, the revision and the event of each, and the
// revision of the sync marker. The implementation's own status events
// (ownStatusEvent: the same version as the pod's previous event, another
// status) are left out; seed holds the previous event of the pods, by
// name, from before the revision resumed from.
func (c *C) replay(w *watch, seed map[string]event) (steps, revs []string, syncRev string, kept []event) {
	prev := maps.Clone(seed)
	if prev == nil {
		prev = map[string]event{}
	}
	for i := 0; ; i++ {
		var ev event
		if i == 0 {
			ev = w.first("the changes after the revision, then EVENT_TYPE_INITIAL_SYNC_COMPLETE")
		} else {
			ev = w.next(c.recvTimeout())
		}
		if ev.err != nil {
			c.Failf(w.desc, "the changes after the revision, then EVENT_TYPE_INITIAL_SYNC_COMPLETE", ev.String())
		}
		switch ev.typ {
		case podsv1alpha1.EventType_EVENT_TYPE_INITIAL_SYNC_COMPLETE:
			if ev.rev == "" {
				c.Failf(w.desc, "EVENT_TYPE_INITIAL_SYNC_COMPLETE with a revision", "none")
			}
			return steps, revs, ev.rev, kept
		case added, modified, deleted:
			if ev.rev == "" {
				c.Failf(w.desc, "events with a revision", ev.String()+" without")
			}
			if !c.ofRun(ev.pod) {
				break
			}
			name := ev.pod.GetMetadata().GetName()
			own := ownStatusEvent(prev[name], ev)
			prev[name] = ev
			if !own {
				steps = append(steps, step(ev))
				revs = append(revs, ev.rev)
				kept = append(kept, ev)
			}
		default:
			c.Failf(w.desc, "the changes after the revision, then EVENT_TYPE_INITIAL_SYNC_COMPLETE", ev.String())
		}
	}
}

// checkTooOld checks that a watch resumed from rev ends with OUT_OF_RANGE,
// reason REVISION_TOO_OLD.
func (c *C) checkTooOld(rev, what string) {
	w := c.watchSelected(selection{resumeFrom: rev}, nil)
	ev := w.first("the stream ends with OUT_OF_RANGE, reason " + revisionTooOld)
	if codeOf(ev.err) != connect.CodeOutOfRange || reasonOf(ev.err) != revisionTooOld {
		got := ev.String()
		if ev.err != nil {
			got += fmt.Sprintf(" (reason %q)", reasonOf(ev.err))
		}
		c.Failf(w.desc+": "+what, "the stream ends with OUT_OF_RANGE, reason "+revisionTooOld, got)
	}
	w.close()
}

// otherInstance returns rev, of the documented form <instance>.<version>,
// with another instance.
func (c *C) otherInstance(rev string) string {
	i := strings.LastIndex(rev, ".")
	if i <= 0 {
		c.Failf("ListPods", "a revision of the documented form <instance>.<version>", fmt.Sprintf("%q", rev))
	}
	other := []byte(rev[:i])
	for k, b := range other {
		switch {
		case b == '9':
			other[k] = 'a'
		case b == 'f' || b == 'z':
			other[k] = '0'
		case b == 'F' || b == 'Z':
			other[k] = 'A'
		default:
			other[k] = b + 1
		}
	}
	return string(other) + rev[i:]
}

func registerResumeCases() {
	registerOn(podsapiOnly, "WatchPods/Resume/History",
		"WatchPods with resume_from a revision of ListPods or of an event MUST send exactly the changes made after it, in order, each with its revision, then EVENT_TYPE_INITIAL_SYNC_COMPLETE with a revision, then live events.",
		needs(NeedDriver, NeedEventTypes, NeedWatchResume), func(c *C) {
			o := c.observe()
			_, rev := c.mustListSelected(selection{}, nil)
			if rev == "" {
				c.Failf("ListPods", "a response with a revision", "none")
			}
			d := c.env.driver
			c.track("a")
			c.track("b")
			put := func(s podSpec) {
				if err := d.put(s); err != nil {
					c.Fatalf("driver: %v", err)
				}
				o.waitVersion(d.served(s.name), s.version)
			}
			put(podSpec{name: "a", version: 1})
			put(podSpec{name: "a", version: 2})
			put(podSpec{name: "b", version: 1})
			c.delete(o, "a")
			a, b := d.served("a"), d.served("b")
			want := []string{"EVENT_TYPE_ADDED " + a + " v1", "EVENT_TYPE_MODIFIED " + a + " v2", "EVENT_TYPE_ADDED " + b + " v1", "EVENT_TYPE_DELETED " + a + " v2"}
			w := c.watchSelected(selection{resumeFrom: rev}, nil)
			got, revs, _, kept := c.replay(w, nil)
			if !slices.Equal(got, want) {
				c.Failf(w.desc+" (the revision of ListPods) after the driver changed pods", strings.Join(want, ", "), strings.Join(got, ", "))
			}
			// Live events follow.
			last := map[string]event{}
			for _, ev := range kept {
				last[ev.pod.GetMetadata().GetName()] = ev
			}
			put(podSpec{name: "b", version: 2})
			for {
				ev := w.mustNext()
				if !c.ofRun(ev.pod) {
					continue
				}
				if own := ownStatusEvent(last[ev.pod.GetMetadata().GetName()], ev); own {
					last[ev.pod.GetMetadata().GetName()] = ev
					continue
				}
				if s := step(ev); s != "EVENT_TYPE_MODIFIED "+b+" v2" {
					c.Failf(w.desc+" after EVENT_TYPE_INITIAL_SYNC_COMPLETE", "the live EVENT_TYPE_MODIFIED "+b+" v2", ev.String())
				}
				break
			}
			w.close()
			// From the revision of an event: the changes after it.
			from := revs[2]
			seed := map[string]event{}
			for _, ev := range kept[:3] {
				seed[ev.pod.GetMetadata().GetName()] = ev
			}
			w = c.watchSelected(selection{resumeFrom: from}, nil)
			want = []string{"EVENT_TYPE_DELETED " + a + " v2", "EVENT_TYPE_MODIFIED " + b + " v2"}
			if got, _, _, _ := c.replay(w, seed); !slices.Equal(got, want) {
				c.Failf(w.desc+" (the revision of "+b+"'s EVENT_TYPE_ADDED)", strings.Join(want, ", "), strings.Join(got, ", "))
			}
		})
	registerOn(podsapiOnly, "WatchPods/Resume/TooOld",
		"WatchPods with resume_from a revision of another instance of the implementation (a revision it no longer holds the changes after) MUST fail with OUT_OF_RANGE, reason REVISION_TOO_OLD.",
		needs(NeedWatchResume), func(c *C) {
			_, rev := c.mustListSelected(selection{}, nil)
			c.checkTooOld(c.otherInstance(rev), "a revision of another instance, made from "+rev)
		})
	registerOn(podsapiOnly, "WatchPods/Resume/Restart",
		"After a restart, WatchPods with resume_from a revision from before it MUST fail with OUT_OF_RANGE, reason REVISION_TOO_OLD, and resume from a revision of the new instance.",
		needs(NeedLifecycle, NeedWatchResume), func(c *C) {
			_, before := c.mustListSelected(selection{}, nil)
			c.stop()
			c.start()
			if err := c.env.waitReachable(c.ctx, c.env.cfg.StartTimeout); err != nil {
				c.env.harnessFailure = err
				c.Fatalf("%v", err)
			}
			// Until it has synced, the implementation may answer
			// FAILED_PRECONDITION.
			var after string
			deadline := time.Now().Add(c.env.cfg.StartTimeout)
			for {
				_, rev, err := c.listSelected(selection{}, nil)
				if err == nil {
					after = rev
					break
				}
				if codeOf(err) != connect.CodeFailedPrecondition || time.Now().After(deadline) {
					c.Failf("ListPods after a restart", "OK within "+c.env.cfg.StartTimeout.String(), codeName(err))
				}
				select {
				case <-c.ctx.Done():
					c.Fatalf("interrupted: %v", c.ctx.Err())
				case <-time.After(50 * time.Millisecond):
				}
			}
			if after == before {
				c.Failf("ListPods after a restart", "a revision other than "+before+" (of the instance before the restart)", after)
			}
			c.checkTooOld(before, "a revision from before a restart")
			w := c.watchSelected(selection{resumeFrom: after}, nil)
			if _, _, syncRev, _ := c.replay(w, nil); syncRev == "" {
				c.Failf(w.desc, "EVENT_TYPE_INITIAL_SYNC_COMPLETE", "none")
			}
		})
}
