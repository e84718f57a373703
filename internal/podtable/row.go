package podtable

import (
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
)

// Row is what the pod table shows of one version of a pod, apart from the
// time at which it is shown: the ages of the pod and of its last restart
// are computed from it by Cells. A Row encodes in JSON, so that it can be
// computed once per pod version and kept.
type Row struct {
	Name string `json:"n"`
	// Ready is "ready/total" containers, such as "1/2".
	Ready string `json:"r"`
	// Status is the phase, or the reason that explains it best, such as
	// "CrashLoopBackOff", "Completed", "Init:0/1" or "Terminating".
	Status string `json:"s"`
	// Restarts counts the containers' restarts.
	Restarts int `json:"rs,omitempty"`
	// LastRestart is when the last restarted container ended, or zero.
	LastRestart time.Time `json:"lr,omitzero"`
	// Created is the pod's creationTimestamp, or zero.
	Created time.Time `json:"c,omitzero"`
	// IP, Node, NominatedNode and ReadinessGates are the cells of priority
	// 1, "<none>" when empty.
	IP             string `json:"ip"`
	Node           string `json:"no"`
	NominatedNode  string `json:"nn"`
	ReadinessGates string `json:"rg"`
	// Phase is the pod's phase.
	Phase corev1.PodPhase `json:"p,omitempty"`
}

// RowOf computes the Row of pod as the API server's printPod does.
func RowOf(pod *corev1.Pod) Row {
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
		errorReason := ""
		for i := len(pod.Status.ContainerStatuses) - 1; i >= 0; i-- {
			c := pod.Status.ContainerStatuses[i]
			restarts += int(c.RestartCount)
			if t := c.LastTerminationState.Terminated; t != nil && lastRestart.Before(&t.FinishedAt) {
				lastRestart = t.FinishedAt
			}
			switch t := c.State.Terminated; {
			case c.State.Waiting != nil && c.State.Waiting.Reason != "":
				reason = c.State.Waiting.Reason
			case t != nil:
				switch {
				case t.Reason != "":
					reason = t.Reason
				case t.Signal != 0:
					reason = fmt.Sprintf("Signal:%d", t.Signal)
				default:
					reason = fmt.Sprintf("ExitCode:%d", t.ExitCode)
				}
				if t.ExitCode != 0 {
					errorReason = reason
				}
			case c.Ready && c.State.Running != nil:
				hasRunning = true
				ready++
			}
		}
		if reason == "Completed" {
			switch {
			case hasRunning && conditionTrue(pod, corev1.PodReady):
				reason = "Running"
			case errorReason != "":
				reason = errorReason
			case hasRunning:
				reason = "NotReady"
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

	r := Row{
		Name:           pod.Name,
		Ready:          fmt.Sprintf("%d/%d", ready, total),
		Status:         reason,
		Restarts:       restarts,
		LastRestart:    lastRestart.Time,
		Created:        pod.CreationTimestamp.Time,
		IP:             none(""),
		Node:           none(pod.Spec.NodeName),
		NominatedNode:  none(pod.Status.NominatedNodeName),
		ReadinessGates: "<none>",
		Phase:          pod.Status.Phase,
	}
	if len(pod.Status.PodIPs) > 0 {
		r.IP = none(pod.Status.PodIPs[0].IP)
	}
	if n := len(pod.Spec.ReadinessGates); n > 0 {
		trueConditions := 0
		for _, g := range pod.Spec.ReadinessGates {
			for _, c := range pod.Status.Conditions {
				if c.Type == g.ConditionType {
					if c.Status == corev1.ConditionTrue {
						trueConditions++
					}
					break
				}
			}
		}
		r.ReadinessGates = fmt.Sprintf("%d/%d", trueConditions, n)
	}
	return r
}

// RestartsText is the RESTARTS cell at time now: the count, with the age
// of the last restart when there was one, such as "3 (5m ago)".
func (r Row) RestartsText(now time.Time) string {
	s := strconv.Itoa(r.Restarts)
	if r.Restarts != 0 && !r.LastRestart.IsZero() {
		s = fmt.Sprintf("%d (%s ago)", r.Restarts, Since(r.LastRestart, now))
	}
	return s
}

// Cells returns the row's cells at time now, one for each of Columns.
func (r Row) Cells(now time.Time) []any {
	return []any{r.Name, r.Ready, r.Status, r.RestartsText(now), Since(r.Created, now), r.IP, r.Node, r.NominatedNode, r.ReadinessGates}
}

// Conditions returns the row's conditions: Completed for a pod that
// succeeded or failed, as the API server marks them.
func (r Row) Conditions() []metav1.TableRowCondition {
	switch r.Phase {
	case corev1.PodSucceeded:
		return []metav1.TableRowCondition{{Type: metav1.RowCompleted, Status: metav1.ConditionTrue, Reason: string(corev1.PodSucceeded), Message: "The pod has completed successfully."}}
	case corev1.PodFailed:
		return []metav1.TableRowCondition{{Type: metav1.RowCompleted, Status: metav1.ConditionTrue, Reason: string(corev1.PodFailed), Message: "The pod failed."}}
	}
	return nil
}

// Since returns the time from t to now as the API server and kubectl
// print ages, "<unknown>" for a zero t.
func Since(t time.Time, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t))
}

func none(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
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
