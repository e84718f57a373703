package client

import (
	"slices"
	"strings"
	"time"
)

// DefaultReadMaxBytes is the default limit of the size of a response
// message: enough for a ListPods of tens of thousands of whole pods (a whole
// pod is about 5 KB).
const DefaultReadMaxBytes = 256 << 20

// fieldMaskHeader is the gRPC metadata key of the text field mask.
const fieldMaskHeader = "x-kubernetes-fieldmask"

// Option configures a Client.
type Option func(*clientOptions)

// clientOptions holds the options of a Client.
type clientOptions struct {
	readMaxBytes int
	wire         Wire
}

// WithReadMaxBytes sets the largest response message the client accepts, in
// bytes. The default is DefaultReadMaxBytes.
func WithReadMaxBytes(n int) Option {
	return func(o *clientOptions) { o.readMaxBytes = n }
}

// CallOption configures a call of List, Get, Watch or FindPods. The options that also
// make sense for a Cache (WithFields) are CacheOptions too.
type CallOption interface {
	applyCall(*callOptions)
}

// callOptions holds the options of one call.
type callOptions struct {
	fields []string
	selection
	resumeFrom string
	// includeDeleted is WithDeleted, and wait WithWait, of FindPods.
	includeDeleted bool
	wait           time.Duration
	// includeWorkloads is WithWorkloads; workloads is
	// WithWorkloadSelector, nil for none.
	includeWorkloads bool
	workloads        *workloadSelection
}

// FieldsOption is the option WithFields returns. It is both a CallOption and
// a CacheOption.
type FieldsOption struct{ paths []string }

// WithFields asks the server for only the given fields of the pods: a field
// mask, sent in the x-kubernetes-fieldmask metadata. Paths are Kubernetes
// JSON names such as "metadata.name", "status.phase" or "status.podIPs".
// By default, and when paths is empty, the server returns whole pods. The
// pods of List, Get, Watch and FindPods always carry metadata.namespace,
// name and uid: the client adds them to the mask, as the server does for
// watches. On WireKubelet the
// client also applies the mask itself to the pods it receives, since a
// kubelet ignores the metadata: the result is the same on either wire.
func WithFields(paths ...string) FieldsOption {
	return FieldsOption{paths: paths}
}

func (f FieldsOption) applyCall(o *callOptions)   { o.fields = f.paths }
func (f FieldsOption) applyCache(o *cacheOptions) { o.fields = f.paths }

// newCallOptions applies opts.
func newCallOptions(opts []CallOption) callOptions {
	var o callOptions
	for _, opt := range opts {
		opt.applyCall(&o)
	}
	return o
}

// header returns the field mask header value, or "" for no mask. A mask
// always keeps the pod's identity (identityPaths), as the server's watches
// do: a listed or found pod names its namespace and UID whatever the mask.
func (o callOptions) header() string {
	if !slices.ContainsFunc(o.fields, func(f string) bool { return strings.Trim(f, " \t,") != "" }) {
		// No path, or only empty elements, which the server refuses.
		return strings.Join(o.fields, ",")
	}
	paths := slices.Clone(o.fields)
	for _, p := range identityPaths {
		if !slices.Contains(paths, p) {
			paths = append(paths, p)
		}
	}
	return strings.Join(paths, ",")
}

// SelectorOption is the option WithNamespace, WithLabelSelector and
// WithFieldSelector return. It is both a CallOption (of List and Watch;
// Get ignores it) and a CacheOption.
type SelectorOption struct{ apply func(*selection) }

func (s SelectorOption) applyCall(o *callOptions)   { s.apply(&o.selection) }
func (s SelectorOption) applyCache(o *cacheOptions) { s.apply(&o.selection) }

// WithNamespace selects the pods of one namespace. By default, and when ns
// is empty, pods of every namespace are selected.
func WithNamespace(ns string) SelectorOption {
	return SelectorOption{func(s *selection) { s.namespace = ns }}
}

// WithLabelSelector selects the pods whose labels match selector, in
// Kubernetes syntax ("app=web,tier!=cache", "env in (prod,staging)",
// "!canary"). By default, and when selector is empty, labels select nothing
// out.
func WithLabelSelector(selector string) SelectorOption {
	return SelectorOption{func(s *selection) { s.labelSel = selector }}
}

// WithFieldSelector selects the pods whose fields match selector, in the
// syntax and with the fields of the API server's pod field selectors
// ("status.phase=Running,spec.restartPolicy!=Never"; see SelectableFields).
// By default, and when selector is empty, fields select nothing out.
//
// Selectors are sent to the server, which filters. Against a server without
// selectors (WireKubelet, or an older podsapi, told by its missing
// revisions) the client filters the pods itself, with the same semantics:
// the results are the same. Selectors see the whole pod; WithFields only
// trims what is returned.
func WithFieldSelector(selector string) SelectorOption {
	return SelectorOption{func(s *selection) { s.fieldSel = selector }}
}

// ResumeOption is the option WithResumeFrom returns.
type ResumeOption struct{ revision string }

func (r ResumeOption) applyCall(o *callOptions) { o.resumeFrom = r.revision }

// WithResumeFrom makes a Watch resume after revision (the Revision of an
// event, or ResumeRevision of the error that ended a watch): instead of a
// snapshot of Added events, the watch sends the changes made after it, then
// Synced, then live events. A server that no longer holds those changes, or
// that restarted, fails the Watch with ErrRevisionTooOld: watch again
// without it. By default, and when revision is empty, a watch starts with a
// snapshot. Only the typed wire of podsapi resumes; WireKubelet fails with
// ErrRevisionTooOld.
func WithResumeFrom(revision string) ResumeOption {
	return ResumeOption{revision: revision}
}

// WorkloadsOption is the option WithWorkloads returns.
type WorkloadsOption struct{}

func (WorkloadsOption) applyCall(o *callOptions) { o.includeWorkloads = true }

// WithWorkloads asks Watch for the workload of the pod of each event
// (Event.Workload), and a Watch for each change of a pod's workload alone
// as a Modified event (docs/api.md, "Workloads"). ListWorkloads and
// GetWorkload always ask for them. By default a Watch asks for none. Only
// the typed wire of podsapi serves workloads; on WireKubelet, and from a
// server that resolves none, Event.Workload is nil.
func WithWorkloads() WorkloadsOption { return WorkloadsOption{} }

// workloadSelection is what WithWorkloadSelector selects.
type workloadSelection struct{ kind, name string }

// WorkloadSelectorOption is the option WithWorkloadSelector returns.
type WorkloadSelectorOption struct{ sel workloadSelection }

func (w WorkloadSelectorOption) applyCall(o *callOptions) { o.workloads = &w.sel }

// WithWorkloadSelector selects the pods whose workload (PodWorkload) has
// kind and name, such as "Deployment" and "web"; an empty kind or name
// matches any, and both empty select the pods that have a workload. The
// server selects, with the semantics of the other selectors on a Watch (a
// pod whose workload starts or stops matching is Added or Deleted). It
// applies to List, ListWorkloads and Watch. By default pods are not selected
// by workload. On WireKubelet, or with a server that resolves no workloads,
// the call fails: the client cannot tell workloads itself.
func WithWorkloadSelector(kind, name string) WorkloadSelectorOption {
	return WorkloadSelectorOption{sel: workloadSelection{kind: kind, name: name}}
}

// request returns the typed wire's PodListRequest of o.
func (o callOptions) request() *selectRequest {
	return &selectRequest{
		namespace:        o.namespace,
		labelSelector:    o.labelSel,
		fieldSelector:    o.fieldSel,
		resumeFrom:       o.resumeFrom,
		includeWorkloads: o.includeWorkloads,
		workloads:        o.workloads,
	}
}

// watchRequest returns the typed wire's PodWatchRequest of o.
func (o callOptions) watchRequest() *selectRequest {
	r := o.request()
	r.watch = true
	return r
}
