package client

import "strings"

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

// CallOption configures a call of List, Get or Watch. The options that also
// make sense for a Cache (WithFields) are CacheOptions too.
type CallOption interface {
	applyCall(*callOptions)
}

// callOptions holds the options of one call.
type callOptions struct {
	fields []string
}

// FieldsOption is the option WithFields returns. It is both a CallOption and
// a CacheOption.
type FieldsOption struct{ paths []string }

// WithFields asks the server for only the given fields of the pods: a field
// mask, sent in the x-kubernetes-fieldmask metadata. Paths are Kubernetes
// JSON names such as "metadata.name", "status.phase" or "status.podIPs".
// By default, and when paths is empty, the server returns whole pods. Watch
// events always carry metadata.namespace, name and uid. On WireKubelet the
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

// header returns the field mask header value, or "" for no mask.
func (o callOptions) header() string {
	return strings.Join(o.fields, ",")
}
