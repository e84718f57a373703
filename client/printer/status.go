package printer

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/podsapi/podsapi/internal/podtable"
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

// Summarize computes the Summary of pod at time now, with the rules of the
// API server's pod table (the front door serves the same rows).
func Summarize(pod *corev1.Pod, now time.Time) Summary {
	r := podtable.RowOf(pod)
	return Summary{Ready: r.Ready, Status: r.Status, Restarts: r.RestartsText(now), Age: age(pod, now)}
}

// age is the pod's age from its creationTimestamp, or else from the time
// the kubelet started it (status.startTime): the static pods of a kubelet
// without an API server have no creationTimestamp, since only the API
// server sets one, but the kubelet records when it started them.
func age(pod *corev1.Pod, now time.Time) string {
	if pod.CreationTimestamp.IsZero() && pod.Status.StartTime != nil {
		return podtable.Since(pod.Status.StartTime.Time, now)
	}
	return podtable.Since(pod.CreationTimestamp.Time, now)
}
