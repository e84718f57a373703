package conformance

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"
	corev1 "k8s.io/api/core/v1"

	podsv1alpha1 "github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1"
)

// containerID is the ID the driver gives the container of the pod short in
// its status: 64 hex digits, the first 12 shared by every container of the
// run (so that a 12-digit prefix is ambiguous), the rest its own and the
// case's (d.tag), so that the pods an earlier case deleted never share it.
func (d *manifestDriver) containerID(short, container string) string {
	run := sha256.Sum256([]byte(d.runID))
	own := sha256.Sum256([]byte(d.runID + "/" + d.tag + "/" + short + "/" + container))
	return hex.EncodeToString(run[:6]) + hex.EncodeToString(own[:])[:52]
}

// podIP is the IP the driver gives the pod short: an IPv4 of 10.250.0.0/16
// and an IPv6 of fd00:cf::/32 of its own, in this case (d.tag).
func (d *manifestDriver) podIP(short string) (string, string) {
	h := sha256.Sum256([]byte(d.runID + "/" + d.tag + "/" + short))
	return fmt.Sprintf("10.250.%d.%d", h[0], h[1]|1), fmt.Sprintf("fd00:cf:%x:%x::1", h[2], h[3])
}

// findKeys gives p, the manifest of the pod short, the container IDs and
// IPs of a findable podSpec.
func (d *manifestDriver) findKeys(p *corev1.Pod, short string) {
	v4, v6 := d.podIP(short)
	p.Status.PodIP, p.Status.PodIPs = v4, []corev1.PodIP{{IP: v4}, {IP: v6}}
	for i := range p.Status.ContainerStatuses {
		cs := &p.Status.ContainerStatuses[i]
		cs.ContainerID = "containerd://" + d.containerID(short, cs.Name)
	}
}

// found is one match of FindPods as the cases compare it.
func found(m *podsv1alpha1.PodMatch) string {
	s := m.GetPod().GetMetadata().GetName()
	if m.GetContainerName() != "" {
		s += "/" + m.GetContainerName()
	}
	if m.GetDeleted() {
		s += " (deleted)"
	}
	return s
}

// find calls FindPods with req and h, paced and retried when rate limited.
func (c *C) find(req *podsv1alpha1.PodFindRequest, h http.Header) (*podsv1alpha1.PodFindResponse, error) {
	client := c.selecting(selection{})
	var resp *podsv1alpha1.PodFindResponse
	err := retryRateLimited(c, describeFind(req, h), func(ctx context.Context) error {
		r, err := client.c.FindPods(ctx, withHeader(req, h))
		if err == nil {
			resp = r.Msg
		}
		return err
	})
	return resp, err
}

// describeFind describes a FindPods request for failure messages.
func describeFind(req *podsv1alpha1.PodFindRequest, h http.Header) string {
	return describe("FindPods", h, strings.TrimSpace(fmt.Sprint(req)))
}

// checkFound calls FindPods with req and checks that it finds exactly want
// (found's form, the served names), in order.
func (c *C) checkFound(req *podsv1alpha1.PodFindRequest, want ...string) *podsv1alpha1.PodFindResponse {
	resp, err := c.find(req, nil)
	if err != nil {
		c.Failf(describeFind(req, nil), strings.Join(want, ", "), codeName(err))
		return nil
	}
	var got []string
	for _, m := range resp.GetMatches() {
		got = append(got, found(m))
	}
	if strings.Join(got, ", ") != strings.Join(want, ", ") {
		c.Failf(describeFind(req, nil), strings.Join(want, ", "), strings.Join(got, ", "))
	}
	if resp.GetRevision() == "" {
		c.Failf(describeFind(req, nil), "a revision", "none")
	}
	return resp
}

// checkFindCode calls FindPods with req and checks that it fails with code.
func (c *C) checkFindCode(req *podsv1alpha1.PodFindRequest, code connect.Code) {
	if _, err := c.find(req, nil); codeOf(err) != code {
		c.Failf(describeFind(req, nil), strings.ToUpper(strings.ReplaceAll(codeSnake(code), " ", "_")), codeName(err))
	}
}

func registerFindCases() {
	registerOn(podsapiOnly, "FindPods/ContainerID",
		"FindPods by container_id MUST return the pod and the name of the container whose status carries that ID, given with or without its runtime:// prefix or as a unique prefix of it; a prefix of several containers MUST fail with INVALID_ARGUMENT; an unknown ID with NOT_FOUND.",
		needs(NeedDriver, NeedManifestStatus, NeedFindPods), func(c *C) {
			c.create(podSpec{name: "a", version: 1, phase: corev1.PodRunning, findable: true}, podSpec{name: "b", version: 1, phase: corev1.PodRunning, findable: true})
			d := c.env.driver
			a, b := d.served("a"), d.served("b")
			id := d.containerID("a", "sidecar")
			c.checkFound(&podsv1alpha1.PodFindRequest{Key: &podsv1alpha1.PodFindRequest_ContainerId{ContainerId: "containerd://" + id}}, a+"/sidecar")
			c.checkFound(&podsv1alpha1.PodFindRequest{Key: &podsv1alpha1.PodFindRequest_ContainerId{ContainerId: id}}, a+"/sidecar")
			c.checkFound(&podsv1alpha1.PodFindRequest{Key: &podsv1alpha1.PodFindRequest_ContainerId{ContainerId: d.containerID("b", "app")[:20]}}, b+"/app")
			c.checkFindCode(&podsv1alpha1.PodFindRequest{Key: &podsv1alpha1.PodFindRequest_ContainerId{ContainerId: id[:12]}}, connect.CodeInvalidArgument)
			c.checkFindCode(&podsv1alpha1.PodFindRequest{Key: &podsv1alpha1.PodFindRequest_ContainerId{ContainerId: id[:12] + strings.Repeat("0", 52)}}, connect.CodeNotFound)
		})
	registerOn(podsapiOnly, "FindPods/IP",
		"FindPods by ip MUST return the pod with that IP among its status.podIPs, IPv4 or IPv6; an IP of no pod MUST fail with NOT_FOUND and a malformed one with INVALID_ARGUMENT.",
		needs(NeedDriver, NeedManifestStatus, NeedFindPods), func(c *C) {
			c.create(podSpec{name: "a", version: 1, phase: corev1.PodRunning, findable: true}, podSpec{name: "b", version: 1, phase: corev1.PodRunning, findable: true})
			d := c.env.driver
			v4, v6 := d.podIP("b")
			c.checkFound(&podsv1alpha1.PodFindRequest{Key: &podsv1alpha1.PodFindRequest_Ip{Ip: v4}}, d.served("b"))
			c.checkFound(&podsv1alpha1.PodFindRequest{Key: &podsv1alpha1.PodFindRequest_Ip{Ip: v6}}, d.served("b"))
			c.checkFindCode(&podsv1alpha1.PodFindRequest{Key: &podsv1alpha1.PodFindRequest_Ip{Ip: "10.250.0.0"}}, connect.CodeNotFound)
			c.checkFindCode(&podsv1alpha1.PodFindRequest{Key: &podsv1alpha1.PodFindRequest_Ip{Ip: "10.250"}}, connect.CodeInvalidArgument)
		})
	registerOn(podsapiOnly, "FindPods/Cgroup",
		"FindPods by cgroup_path MUST return the pod and container a cgroup names, for a line of /proc/PID/cgroup or a path, of the systemd and cgroupfs drivers, and relative to another cgroup namespace; a cgroup of no pod MUST fail with NOT_FOUND.",
		needs(NeedDriver, NeedManifestStatus, NeedFindPods), func(c *C) {
			c.create(podSpec{name: "a", version: 1, phase: corev1.PodRunning, findable: true})
			d := c.env.driver
			uid, id := string(d.uid("a")), d.containerID("a", "app")
			usc := strings.ReplaceAll(uid, "-", "_")
			for _, cgroup := range []string{
				"0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + usc + ".slice/cri-containerd-" + id + ".scope",
				"4:memory:/kubepods/besteffort/pod" + uid + "/" + id,
				"/kubepods/pod" + uid + "/" + id,
				"0::/../../kubepods-besteffort-pod" + usc + ".slice/crio-" + id + ".scope",
			} {
				c.checkFound(&podsv1alpha1.PodFindRequest{Key: &podsv1alpha1.PodFindRequest_CgroupPath{CgroupPath: cgroup}}, d.served("a")+"/app")
			}
			c.checkFindCode(&podsv1alpha1.PodFindRequest{Key: &podsv1alpha1.PodFindRequest_CgroupPath{CgroupPath: "0::/system.slice/containerd.service"}}, connect.CodeNotFound)
		})
	registerOn(podsapiOnly, "FindPods/Deleted",
		"FindPods MUST NOT return a deleted pod without include_deleted (NOT_FOUND); with it, it MUST return the pod's last known state, marked deleted.",
		needs(NeedDriver, NeedManifestStatus, NeedFindPods), func(c *C) {
			o := c.create(podSpec{name: "a", version: 1, phase: corev1.PodRunning, findable: true})
			c.delete(o, "a")
			d := c.env.driver
			key := &podsv1alpha1.PodFindRequest_ContainerId{ContainerId: d.containerID("a", "app")}
			c.checkFindCode(&podsv1alpha1.PodFindRequest{Key: key}, connect.CodeNotFound)
			resp := c.checkFound(&podsv1alpha1.PodFindRequest{Key: key, IncludeDeleted: true}, d.served("a")+"/app (deleted)")
			if m := resp.GetMatches(); len(m) == 1 && m[0].GetPod().GetStatus().GetPhase() != string(corev1.PodRunning) {
				c.Failf("FindPods(include_deleted)", "the last known state (status.phase Running)", fmt.Sprintf("status.phase %q", m[0].GetPod().GetStatus().GetPhase()))
			}
		})
	registerOn(podsapiOnly, "FindPods/NoKey",
		"FindPods without a key MUST fail with INVALID_ARGUMENT.",
		needs(NeedFindPods), func(c *C) {
			c.checkFindCode(&podsv1alpha1.PodFindRequest{}, connect.CodeInvalidArgument)
			c.checkFindCode(&podsv1alpha1.PodFindRequest{IncludeDeleted: true}, connect.CodeInvalidArgument)
		})
	registerOn(podsapiOnly, "FindPods/FieldMask",
		"FindPods MUST trim the pods it returns by the field mask, like GetPod, and keep their namespace, name and UID.",
		needs(NeedDriver, NeedManifestStatus, NeedFieldMasks, NeedFindPods), func(c *C) {
			c.create(podSpec{name: "a", version: 1, phase: corev1.PodRunning, findable: true})
			d := c.env.driver
			v4, _ := d.podIP("a")
			h := textMask("status.phase")
			req := &podsv1alpha1.PodFindRequest{Key: &podsv1alpha1.PodFindRequest_Ip{Ip: v4}}
			resp, err := c.find(req, h)
			if err != nil || len(resp.GetMatches()) != 1 {
				c.Failf(describeFind(req, h), "one match", codeName(err))
				return
			}
			p := resp.GetMatches()[0].GetPod()
			if m := p.GetMetadata(); m.GetName() != d.served("a") || m.GetUid() != string(d.uid("a")) || m.GetNamespace() == "" ||
				len(m.GetLabels()) > 0 || p.GetSpec() != nil || p.GetStatus().GetPhase() != string(corev1.PodRunning) || len(p.GetStatus().GetPodIPs()) > 0 {
				c.Failf(describeFind(req, h), "the pod's identity and status.phase only", p.String())
			}
		})
	registerOn(podsapiOnly, "FindPods/Wait",
		"FindPods with a wait MUST answer a key that matches no pod when the call begins with the pod that comes to match it during the wait; a key that still matches no pod when the wait runs out MUST fail with NOT_FOUND, and not before the wait ran out.",
		needs(NeedDriver, NeedManifestStatus, NeedFindPods, NeedFindWait), func(c *C) {
			d := c.env.driver
			req := &podsv1alpha1.PodFindRequest{
				Key:  &podsv1alpha1.PodFindRequest_ContainerId{ContainerId: "containerd://" + d.containerID("a", "app")},
				Wait: durationpb.New(c.recvTimeout() / 2),
			}
			type result struct {
				resp *podsv1alpha1.PodFindResponse
				err  error
			}
			done := make(chan result, 1)
			go func() {
				resp, err := c.find(req, nil)
				done <- result{resp, err}
			}()
			c.create(podSpec{name: "a", version: 1, phase: corev1.PodRunning, findable: true})
			r := <-done
			var got []string
			for _, m := range r.resp.GetMatches() {
				got = append(got, found(m))
			}
			if want := d.served("a") + "/app"; r.err != nil {
				c.Failf(describeFind(req, nil), want, codeName(r.err))
			} else if strings.Join(got, ", ") != want {
				c.Failf(describeFind(req, nil), want, strings.Join(got, ", "))
			}

			const short = 300 * time.Millisecond
			never := &podsv1alpha1.PodFindRequest{
				Key:  &podsv1alpha1.PodFindRequest_ContainerId{ContainerId: d.containerID("never", "app")},
				Wait: durationpb.New(short),
			}
			start := time.Now()
			_, err := c.find(never, nil)
			if took := time.Since(start); codeOf(err) != connect.CodeNotFound || took < short {
				c.Failf(describeFind(never, nil), "NOT_FOUND after "+short.String(), codeName(err)+" after "+took.String())
			}
		})
}
