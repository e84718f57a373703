package conformance

import (
	"fmt"
	"slices"
	"strings"

	"connectrpc.com/connect"
	corev1 "k8s.io/api/core/v1"

	corev1pb "github.com/podsapi/podsapi/gen/k8s.io/api/core/v1"
)

// invalidSelectors are selections ListPods and WatchPods must refuse with
// INVALID_ARGUMENT.
var invalidSelectors = []selection{
	{label: "tier in (web"},
	{label: "tier=no spaces"},
	{field: "spec.containers=app"},
	{field: "status.phase"},
}

// runNames returns the sorted names of the run's pods among pods.
func (c *C) runNames(pods []*corev1pb.Pod) []string {
	var got []string
	for _, p := range pods {
		if c.ofRun(p) {
			got = append(got, p.GetMetadata().GetName())
		}
	}
	slices.Sort(got)
	return got
}

// servedNames returns the sorted served names of the pods short.
func (c *C) servedNames(short ...string) []string {
	names := []string{}
	for _, s := range short {
		names = append(names, c.env.driver.served(s))
	}
	slices.Sort(names)
	return names
}

// runSelector is the label selector of the case's pods, and more: pods
// of earlier cases that an implementation is still terminating (a
// kubelet takes its time) are not the case's.
func (c *C) runSelector(more string) string {
	s := runLabel + "=" + c.env.runID
	if c.env.driver != nil {
		s += "," + caseLabel + "=" + c.env.driver.tag
	}
	if more != "" {
		s += "," + more
	}
	return s
}

// checkSelected lists with sel and checks that exactly the pods want (short
// names) of the run are returned, and that every pod returned satisfies
// ok (nil: any).
func (c *C) checkSelected(sel selection, want []string, ok func(*corev1pb.Pod) bool) {
	pods, _ := c.mustListSelected(sel, nil)
	got := c.runNames(pods)
	if got == nil {
		got = []string{}
	}
	if w := c.servedNames(want...); !slices.Equal(got, w) {
		c.Failf(describe("ListPods", nil, sel.String()), fmt.Sprintf("the run's pods %v", w), fmt.Sprint(got))
	}
	for _, p := range pods {
		if ok != nil && !ok(p) {
			c.Failf(describe("ListPods", nil, sel.String()), "only pods that match", "pod "+p.GetMetadata().GetNamespace()+"/"+p.GetMetadata().GetName())
		}
	}
}

// selStep is an event of the run's pods as a selective watch sees it.
func selStep(ev event) string {
	return fmt.Sprintf("%s tier=%s", step(ev), ev.pod.GetMetadata().GetLabels()["tier"])
}

// collectSelected reads w until the pod named end is added, returning the
// events of the run's pods as selStep shows them, without the
// implementation's own status events (ownStatusEvent).
func (c *C) collectSelected(w *watch, end string) []string {
	var steps []string
	prev := map[string]event{}
	for {
		ev := w.mustNext()
		if !c.ofRun(ev.pod) {
			c.Failf(w.desc, "events of the run's pods only", ev.String())
		}
		name := ev.pod.GetMetadata().GetName()
		if name == end && ev.typ == added {
			return steps
		}
		own := ownStatusEvent(prev[name], ev)
		prev[name] = ev
		if !own {
			steps = append(steps, selStep(ev))
		}
	}
}

func registerSelectorCases() {
	registerOn(podsapiOnly, "ListPods/Selector/Namespace",
		"ListPods with namespace MUST return exactly the pods of that namespace.",
		needs(NeedDriver, NeedSelectors), func(c *C) {
			ns1, ns2 := "cf-"+c.env.runID+"-one", "cf-"+c.env.runID+"-two"
			c.create(podSpec{name: "a", namespace: ns1, version: 1}, podSpec{name: "b", namespace: ns2, version: 1}, podSpec{name: "c", namespace: ns1, version: 1})
			c.checkSelected(selection{namespace: ns1}, []string{"a", "c"}, func(p *corev1pb.Pod) bool { return p.GetMetadata().GetNamespace() == ns1 })
			c.checkSelected(selection{namespace: ns2}, []string{"b"}, func(p *corev1pb.Pod) bool { return p.GetMetadata().GetNamespace() == ns2 })
			c.checkSelected(selection{namespace: "cf-" + c.env.runID + "-none"}, nil, func(*corev1pb.Pod) bool { return false })
		})
	registerOn(podsapiOnly, "ListPods/Selector/Label",
		"ListPods with label_selector MUST return exactly the pods whose labels match it, in the Kubernetes label selector syntax (=, !=, in, notin, exists, !exists).",
		needs(NeedDriver, NeedSelectors), func(c *C) {
			c.create(podSpec{name: "a", version: 1, labels: map[string]string{"tier": "web"}}, podSpec{name: "b", version: 1, labels: map[string]string{"tier": "db"}},
				podSpec{name: "c", version: 1, labels: map[string]string{"tier": "cache"}}, podSpec{name: "d", version: 1})
			for _, tc := range []struct {
				sel  string
				want []string
			}{
				{"tier=web", []string{"a"}},
				{"tier!=web", []string{"b", "c", "d"}},
				{"tier in (db,cache)", []string{"b", "c"}},
				{"tier notin (db,cache)", []string{"a", "d"}},
				{"tier", []string{"a", "b", "c"}},
				{"!tier", []string{"d"}},
			} {
				c.checkSelected(selection{label: c.runSelector(tc.sel)}, tc.want, func(p *corev1pb.Pod) bool { return c.ofRun(p) })
			}
		})
	registerOn(podsapiOnly, "ListPods/Selector/Field",
		"ListPods with field_selector MUST return exactly the pods whose fields match it (status.phase, metadata.name; =, ==, != joined by commas), alone or ANDed with a label selector.",
		needs(NeedDriver, NeedSelectors, NeedManifestStatus), func(c *C) {
			c.create(podSpec{name: "a", version: 1, phase: corev1.PodRunning}, podSpec{name: "b", version: 1, phase: corev1.PodPending},
				podSpec{name: "c", version: 1, phase: corev1.PodRunning})
			a := c.env.driver.served("a")
			for _, tc := range []struct {
				sel  selection
				want []string
			}{
				{selection{label: c.runSelector(""), field: "status.phase=Running"}, []string{"a", "c"}},
				{selection{label: c.runSelector(""), field: "status.phase!=Running"}, []string{"b"}},
				{selection{field: "metadata.name==" + a}, []string{"a"}},
				{selection{field: "metadata.name=" + a + ",status.phase=Pending"}, nil},
				{selection{label: c.runSelector(""), field: "metadata.name!=" + a + ",status.phase=Running"}, []string{"c"}},
			} {
				c.checkSelected(tc.sel, tc.want, nil)
			}
		})
	registerOn(podsapiOnly, "ListPods/Selector/FieldMask",
		"Selectors MUST see the whole pod and compose with a field mask: ListPods with a label and a status.phase selector and a mask of metadata.name returns the matching pods trimmed to their names.",
		needs(NeedDriver, NeedSelectors, NeedManifestStatus, NeedFieldMasks), func(c *C) {
			c.create(podSpec{name: "a", version: 1, phase: corev1.PodRunning}, podSpec{name: "b", version: 1, phase: corev1.PodPending},
				podSpec{name: "c", version: 1, phase: corev1.PodRunning})
			sel := selection{label: c.runSelector(""), field: "status.phase=Running"}
			h := textMask("metadata.name")
			pods, _ := c.mustListSelected(sel, h)
			var got []string
			for _, p := range pods {
				if len(p.GetMetadata().GetLabels()) > 0 || p.GetStatus().GetPhase() != "" || p.GetSpec() != nil {
					c.Failf(describe("ListPods", h, sel.String()), "pods with only metadata.name", fmt.Sprintf("%s with labels %v, phase %q", p.GetMetadata().GetName(), p.GetMetadata().GetLabels(), p.GetStatus().GetPhase()))
				}
				got = append(got, p.GetMetadata().GetName())
			}
			slices.Sort(got)
			if want := c.servedNames("a", "c"); !slices.Equal(got, want) {
				c.Failf(describe("ListPods", h, sel.String()), fmt.Sprintf("the pods %v", want), fmt.Sprint(got))
			}
		})
	registerOn(podsapiOnly, "ListPods/Selector/Invalid",
		"ListPods with a label or field selector that does not parse, or names a field that cannot be selected, MUST fail with INVALID_ARGUMENT.",
		needs(NeedSelectors), func(c *C) {
			for _, sel := range invalidSelectors {
				if _, _, err := c.listSelected(sel, nil); codeOf(err) != connect.CodeInvalidArgument {
					c.Failf(describe("ListPods", nil, sel.String()), "INVALID_ARGUMENT", codeName(err))
				}
			}
		})
	registerOn(podsapiOnly, "WatchPods/Selector/Invalid",
		"WatchPods with a label or field selector that does not parse, or names a field that cannot be selected, MUST fail with INVALID_ARGUMENT.",
		needs(NeedSelectors), func(c *C) {
			for _, sel := range invalidSelectors {
				w := c.watchSelected(sel, nil)
				if ev := w.first("the stream ends with INVALID_ARGUMENT"); codeOf(ev.err) != connect.CodeInvalidArgument {
					c.Failf(w.desc, "the stream ends with INVALID_ARGUMENT", ev.String())
				}
				w.close()
			}
		})
	registerOn(podsapiOnly, "WatchPods/Selector/Moves",
		"WatchPods with a label selector MUST send EVENT_TYPE_ADDED when a pod starts to match, EVENT_TYPE_DELETED carrying its new state when it stops matching, EVENT_TYPE_MODIFIED only while it matches, and nothing for the changes of pods that do not match.",
		needs(NeedDriver, NeedEventTypes, NeedSelectors), func(c *C) {
			sel := selection{label: c.runSelector("tier=web")}
			w := c.watchSelected(sel, nil)
			if snap := w.initial(); len(snap) > 0 {
				c.Failf(w.desc, "an empty snapshot (no pod of the run yet)", fmt.Sprint(names(snap)))
			}
			o := c.observe()
			d := c.env.driver
			tier := func(s string) map[string]string { return map[string]string{"tier": s} }
			c.track("x")
			c.track("y")
			c.track("end")
			put := func(s podSpec) {
				if err := d.put(s); err != nil {
					c.Fatalf("driver: %v", err)
				}
				o.waitVersion(d.served(s.name), s.version)
			}
			put(podSpec{name: "x", version: 1, labels: tier("db")})  // not matching: nothing
			put(podSpec{name: "y", version: 1, labels: tier("web")}) // ADDED
			put(podSpec{name: "x", version: 2, labels: tier("web")}) // starts matching: ADDED
			put(podSpec{name: "y", version: 2, labels: tier("web")}) // MODIFIED
			put(podSpec{name: "y", version: 3, labels: tier("db")})  // stops matching: DELETED, new state
			put(podSpec{name: "y", version: 4, labels: tier("db")})  // not matching: nothing
			c.delete(o, "y")                                         // not matching: nothing
			c.delete(o, "x")                                         // DELETED
			put(podSpec{name: "end", version: 1, labels: tier("web")})
			x, y := d.served("x"), d.served("y")
			want := []string{
				"EVENT_TYPE_ADDED " + y + " v1 tier=web",
				"EVENT_TYPE_ADDED " + x + " v2 tier=web",
				"EVENT_TYPE_MODIFIED " + y + " v2 tier=web",
				"EVENT_TYPE_DELETED " + y + " v3 tier=db",
				"EVENT_TYPE_DELETED " + x + " v2 tier=web",
			}
			if got := c.collectSelected(w, d.served("end")); !slices.Equal(got, want) {
				c.Failf(w.desc+" while the driver moves pods in and out of the selector",
					strings.Join(want, ", "), strings.Join(got, ", "))
			}
		})
	registerOn(podsapiOnly, "WatchPods/Selector/NonMatching",
		"WatchPods with a selector MUST send nothing when a pod that does not match is created, edited and deleted.",
		needs(NeedDriver, NeedEventTypes, NeedSelectors), func(c *C) {
			w := c.watchSelected(selection{label: c.runSelector("tier=web")}, nil)
			w.initial()
			o := c.observe()
			d := c.env.driver
			c.track("other")
			c.track("end")
			for v := 1; v <= 3; v++ {
				if err := d.put(podSpec{name: "other", version: v, labels: map[string]string{"tier": "db"}}); err != nil {
					c.Fatalf("driver: %v", err)
				}
				o.waitVersion(d.served("other"), v)
			}
			c.delete(o, "other")
			if err := d.put(podSpec{name: "end", version: 1, labels: map[string]string{"tier": "web"}}); err != nil {
				c.Fatalf("driver: %v", err)
			}
			o.waitVersion(d.served("end"), 1)
			if got := c.collectSelected(w, d.served("end")); len(got) > 0 {
				c.Failf(w.desc+" while the driver creates, edits and deletes a pod with tier=db", "no event before EVENT_TYPE_ADDED of "+d.served("end"), strings.Join(got, ", "))
			}
		})
}
