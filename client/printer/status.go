package printer

import (
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
)

// Summary is what kubectl's pod table shows about a pod.
type Summary struct {
	// Ready is "ready/total" containers, such as "1/2".
	Ready string
	// Status is the phase, or the reason that explains it best, such as
	// "CrashLoopBackOff", "Completed", "Init:0/1" or "Terminating".
	Status string
	// Restarts is the number of restarts, with the age of the last one when
	// known, such as "3 (5m ago)".
	Restarts string
	// Age is the age of the pod, such as "3d4h", from its creationTimestamp
	// or, when it has none (a standalone kubelet's static pod), from its
	// status.startTime; "<unknown>" without either.
	Age string
}

// Summarize computes the Summary of pod at time now, with the rules of
// kubectl's pod printer.
func Summarize(pod *corev1.Pod, now time.Time) Summary {
	restarts, restartableInitRestarts := 0, 0
	total := len(pod.Spec.Containers)
	ready := 0
	var lastRestart, lastRestartableInitRestart metav1.Time

	reason := string(pod.Status.Phase)
	if pod.Status.Reason != "" {
		reason = pod.Status.Reason
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Reason == corev1.PodReasonSchedulingGated {
			reason = corev1.PodReasonSchedulingGated
		}
	}

	initContainers := make(map[string]*corev1.Container)
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		initContainers[c.Name] = c
		if restartable(c) {
			total++
		}
	}

	initializing := false
	for i, c := range pod.Status.InitContainerStatuses {
		restarts += int(c.RestartCount)
		if t := c.LastTerminationState.Terminated; t != nil && lastRestart.Before(&t.FinishedAt) {
			lastRestart = t.FinishedAt
		}
		sidecar := restartable(initContainers[c.Name])
		if sidecar {
			restartableInitRestarts += int(c.RestartCount)
			if t := c.LastTerminationState.Terminated; t != nil && lastRestartableInitRestart.Before(&t.FinishedAt) {
				lastRestartableInitRestart = t.FinishedAt
			}
		}
		switch {
		case c.State.Terminated != nil && c.State.Terminated.ExitCode == 0:
			continue
		case sidecar && c.Started != nil && *c.Started:
			if c.Ready {
				ready++
			}
			continue
		case c.State.Terminated != nil:
			switch t := c.State.Terminated; {
			case t.Reason != "":
				reason = "Init:" + t.Reason
			case t.Signal != 0:
				reason = fmt.Sprintf("Init:Signal:%d", t.Signal)
			default:
				reason = fmt.Sprintf("Init:ExitCode:%d", t.ExitCode)
			}
		case c.State.Waiting != nil && c.State.Waiting.Reason != "" && c.State.Waiting.Reason != "PodInitializing":
			reason = "Init:" + c.State.Waiting.Reason
		default:
			reason = fmt.Sprintf("Init:%d/%d", i, len(pod.Spec.InitContainers))
		}
		initializing = true
		break
	}

	if !initializing || conditionTrue(pod, corev1.PodInitialized) {
		restarts = restartableInitRestarts
		lastRestart = lastRestartableInitRestart
		hasRunning := false
		for i := len(pod.Status.ContainerStatuses) - 1; i >= 0; i-- {
			c := pod.Status.ContainerStatuses[i]
			restarts += int(c.RestartCount)
			if t := c.LastTerminationState.Terminated; t != nil && lastRestart.Before(&t.FinishedAt) {
				lastRestart = t.FinishedAt
			}
			switch {
			case c.State.Waiting != nil && c.State.Waiting.Reason != "":
				reason = c.State.Waiting.Reason
			case c.State.Terminated != nil && c.State.Terminated.Reason != "":
				reason = c.State.Terminated.Reason
			case c.State.Terminated != nil && c.State.Terminated.Signal != 0:
				reason = fmt.Sprintf("Signal:%d", c.State.Terminated.Signal)
			case c.State.Terminated != nil:
				reason = fmt.Sprintf("ExitCode:%d", c.State.Terminated.ExitCode)
			case c.Ready && c.State.Running != nil:
				hasRunning = true
				ready++
			}
		}
		if reason == "Completed" && hasRunning {
			reason = "NotReady"
			if conditionTrue(pod, corev1.PodReady) {
				reason = "Running"
			}
		}
	}

	terminal := pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
	switch {
	case pod.DeletionTimestamp != nil && pod.Status.Reason == "NodeLost":
		reason = "Unknown"
	case pod.DeletionTimestamp != nil && !terminal:
		reason = "Terminating"
	}

	restartsText := strconv.Itoa(restarts)
	if restarts != 0 && !lastRestart.IsZero() {
		restartsText = fmt.Sprintf("%d (%s ago)", restarts, since(lastRestart, now))
	}
	return Summary{
		Ready:    fmt.Sprintf("%d/%d", ready, total),
		Status:   reason,
		Restarts: restartsText,
		Age:      age(pod, now),
	}
}

// age is the pod's age from its creationTimestamp, or else from the time
// the kubelet started it (status.startTime): the static pods of a kubelet
// without an API server have no creationTimestamp, since only the API
// server sets one, but the kubelet records when it started them.
func age(pod *corev1.Pod, now time.Time) string {
	if pod.CreationTimestamp.IsZero() && pod.Status.StartTime != nil {
		return since(*pod.Status.StartTime, now)
	}
	return since(pod.CreationTimestamp, now)
}

// restartable reports whether c is a sidecar: an init container that keeps
// running.
func restartable(c *corev1.Container) bool {
	return c != nil && c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
}

// conditionTrue reports whether pod has condition t with status True.
func conditionTrue(pod *corev1.Pod, t corev1.PodConditionType) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == t {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// since returns the time from t to now as kubectl prints ages.
func since(t metav1.Time, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t.Time))
}
