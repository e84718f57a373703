package conformance

import (
	"errors"
	"fmt"
	"os"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// Features is what an implementation declares about itself. The suite checks
// what is declared and skips what is not.
type Features struct {
	// RateLimit is the rate limit shared by ListPods and GetPod. A zero QPS
	// declares no rate limit: the rate limit cases are skipped.
	RateLimit RateLimit `json:"rateLimit"`
	// WatchQueue is how many live events a watcher may have queued before
	// it is dropped. Zero: unknown, the slow consumer case assumes 1000.
	WatchQueue int `json:"watchQueue"`
	// Reflection: the implementation serves gRPC reflection v1 on the
	// socket.
	Reflection bool `json:"reflection"`
	// Health: the implementation serves gRPC health v1 on the socket.
	Health bool `json:"health"`
	// EventTypes: watch events carry their type (PodWatchResponse.type).
	// Without it the watch cases are skipped.
	EventTypes bool `json:"eventTypes"`
	// ManifestStatus: the status of a static pod manifest is served as
	// written (podsapi-server). A kubelet computes the status itself: set
	// false, and the cases that compare or edit the status are skipped.
	ManifestStatus bool `json:"manifestStatus"`
	// PodNameSuffix is appended by the implementation to the names of
	// static pods (a kubelet appends "-" and the node name). "{nodeName}"
	// in it stands for the node name, which the runner fills in
	// (podsapi-conformance --node-name).
	PodNameSuffix string `json:"podNameSuffix"`
	// FieldMasks: the implementation honours the field mask headers
	// (x-kubernetes-fieldmask, -bin). A kubelet ignores them: set false,
	// and the field mask cases are skipped. Default true.
	FieldMasks bool `json:"fieldMasks"`
	// DeletedLastState: EVENT_TYPE_DELETED carries the last known state of
	// the pod (podsapi-server). A kubelet sends only its name, namespace
	// and UID: set false, and only those are checked. Default true.
	DeletedLastState bool `json:"deletedLastState"`
	// SocketPermissions: the socket is owned by root and not accessible to
	// group and others when the implementation runs as root. Default true.
	SocketPermissions bool `json:"socketPermissions"`
	// Selectors: ListPods and WatchPods of the typed wire honour the
	// request fields namespace, label_selector and field_selector
	// (podsapi-server), with the API server's watch semantics. A kubelet's
	// wire has no such fields. Default false: the selector cases are
	// skipped.
	Selectors bool `json:"selectors"`
	// WatchResume: ListPods responses and watch events of the typed wire
	// carry a revision, and WatchPods resumes from one (resume_from),
	// refusing one it no longer holds with OUT_OF_RANGE, reason
	// REVISION_TOO_OLD (podsapi-server). Default false: the resume cases
	// are skipped.
	WatchResume bool `json:"watchResume"`
	// FindPods: the typed wire serves FindPods (podsapi-server): pods found
	// by container ID, IP and cgroup, deleted ones with include_deleted.
	// Default false: the FindPods cases are skipped.
	FindPods bool `json:"findPods"`
	// FindWait: FindPods honours PodFindRequest.wait (podsapi-server): a
	// key that matches no pod yet is answered once a pod it matches is
	// created, and NOT_FOUND only once the wait ran out. Default false:
	// the case of the wait is skipped.
	FindWait bool `json:"findWait"`
	// Workloads: ListPods and WatchPods of the typed wire honour
	// include_workloads and workload_selector (podsapi-server, whose
	// manifest source keeps a manifest's ownerReferences). Default false:
	// the case of workloads is skipped.
	Workloads bool `json:"workloads"`
	// WatchReports is what a watch reports: WatchReportsAll (every change
	// of a pod, the default) or WatchReportsStatus (changes of its status
	// only, as a kubelet: an edit of a static pod's labels, annotations or
	// arguments is in ListPods at once and never on the watch). With
	// "status", every change the watch cases make also changes the image of
	// a container, which restarts it and changes the pod's status.
	WatchReports string `json:"watchReports"`
	// MaxPods is how many pods the implementation runs at most (a
	// kubelet's maxPods, 110 by default; beyond it pods are rejected and
	// served as Failed). The cases that need many pods create at most
	// MaxPods less 10. Zero: no limit.
	MaxPods int `json:"maxPods"`
	// StartTimeout is how long the implementation may take, after it
	// starts, to answer completely (a kubelet: tens of seconds). It raises
	// Config.StartTimeout when longer; the lifecycle cases are bounded by
	// the case timeout plus the start timeout. Zero: Config.StartTimeout.
	StartTimeout metav1.Duration `json:"startTimeout"`
	// CaseTimeout is how long one case may take against the implementation
	// (a kubelet: minutes, as WatchPods/SlowConsumer waits for about a
	// hundred status changes of its pods). It raises Config.CaseTimeout
	// when longer. Zero: Config.CaseTimeout.
	CaseTimeout metav1.Duration `json:"caseTimeout"`
	// EventTimeout is how long the implementation may take to answer a
	// call or send an expected watch event. It raises Config.EventTimeout
	// when longer. Zero: Config.EventTimeout.
	EventTimeout metav1.Duration `json:"eventTimeout"`
}

// The values of Features.WatchReports.
const (
	// WatchReportsAll: a watch reports every change of a pod.
	WatchReportsAll = "all"
	// WatchReportsStatus: a watch reports the changes of a pod's status
	// only.
	WatchReportsStatus = "status"
)

// RateLimit is a token bucket.
type RateLimit struct {
	QPS   float64 `json:"qps"`
	Burst int     `json:"burst"`
}

// DefaultFeatures returns the features of the API's documented defaults:
// a rate limit of 100 qps with a burst of 10, a watch queue of 1000, event
// types, manifest statuses served as written, field masks, DELETED with the
// last state, a private socket; no reflection, health, selectors or
// watch resume.
func DefaultFeatures() Features {
	return Features{
		RateLimit:         RateLimit{QPS: 100, Burst: 10},
		WatchQueue:        1000,
		EventTypes:        true,
		ManifestStatus:    true,
		SocketPermissions: true,
		FieldMasks:        true,
		DeletedLastState:  true,
		WatchReports:      WatchReportsAll,
	}
}

// WithNodeName returns f with "{nodeName}" in its PodNameSuffix replaced
// by node.
func (f Features) WithNodeName(node string) Features {
	f.PodNameSuffix = strings.ReplaceAll(f.PodNameSuffix, "{nodeName}", node)
	return f
}

// LoadFeatures reads a YAML (or JSON) features file; what it does not set
// keeps the value of DefaultFeatures.
func LoadFeatures(path string) (Features, error) {
	f := DefaultFeatures()
	data, err := os.ReadFile(path)
	if err != nil {
		return f, err
	}
	if err := yaml.UnmarshalStrict(data, &f); err != nil {
		return f, fmt.Errorf("features file %s: %w", path, err)
	}
	return f, f.validate()
}

func (f Features) validate() error {
	switch {
	case f.RateLimit.QPS < 0:
		return errors.New("features: rateLimit.qps must not be negative (0 declares no rate limit)")
	case f.RateLimit.QPS > 0 && f.RateLimit.Burst < 1:
		return errors.New("features: rateLimit.burst must be at least 1")
	case f.WatchQueue < 0:
		return errors.New("features: watchQueue must not be negative")
	case f.WatchReports != WatchReportsAll && f.WatchReports != WatchReportsStatus:
		return fmt.Errorf("features: watchReports must be %q or %q, not %q", WatchReportsAll, WatchReportsStatus, f.WatchReports)
	case f.MaxPods < 0 || (f.MaxPods > 0 && f.MaxPods <= 10):
		return errors.New("features: maxPods must be 0 (no limit) or more than 10")
	case f.StartTimeout.Duration < 0:
		return errors.New("features: startTimeout must not be negative")
	case f.CaseTimeout.Duration < 0:
		return errors.New("features: caseTimeout must not be negative")
	case f.EventTimeout.Duration < 0:
		return errors.New("features: eventTimeout must not be negative")
	}
	return nil
}
