package client

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"

	"connectrpc.com/connect"
	"connectrpc.com/grpcreflect"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	kubeletpods "k8s.io/kubelet/pkg/apis/pods/v1alpha1"

	"github.com/podsapi/podsapi/gen/kubelet/pods/v1alpha1/v1alpha1connect"
	podsv1alpha1 "github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1"
	"github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1/podsv1alpha1connect"
	"github.com/podsapi/podsapi/internal/h2c"
)

// DefaultSocket is the standard path of the Pods API socket, used when New
// is given an empty socket. It is the server's socket.DefaultPath, written
// again so that the client does not import the server's packages.
const DefaultSocket = "/var/lib/kubelet/pods-api/pods-api.sock"

// Client is a client of the Pods API. It is safe for concurrent use.
type Client struct {
	socket   string
	http     *http.Client
	wire     Wire         // as given by WithWire
	detected atomic.Int32 // the Wire detected with WireAuto, or WireAuto
	reflect  *grpcreflect.Client

	// The typed wire, kubelet.pods.v1alpha1.Pods.
	list  *connect.Client[selectRequest, listResponse]
	get   *connect.Client[getRequest, getResponse]
	watch *connect.Client[selectRequest, watchResponse]
	find  *connect.Client[findRequest, findResponse]

	// The kubelet's wire, v1alpha1.Pods, with the messages of the kubelet's
	// published package: they keep the pods as their encodings, which the
	// client masks and decodes itself.
	rawList  *connect.Client[kubeletpods.ListPodsRequest, kubeletpods.ListPodsResponse]
	rawGet   *connect.Client[kubeletpods.GetPodRequest, kubeletpods.GetPodResponse]
	rawWatch *connect.Client[kubeletpods.WatchPodsRequest, kubeletpods.WatchPodsEvent]
}

// New returns a client of the Pods API served on the socket endpoint: a
// path, a unix:///path URL, or "" for DefaultSocket. It speaks gRPC over h2c,
// to podsapi or to a kubelet: see WithWire. Connections are made when
// needed, so New succeeds even when the server is not running yet; only a
// malformed socket or an unknown Wire is an error.
func New(endpoint string, opts ...Option) (*Client, error) {
	o := clientOptions{readMaxBytes: DefaultReadMaxBytes}
	for _, opt := range opts {
		opt(&o)
	}
	if endpoint == "" {
		endpoint = DefaultSocket
	}
	if strings.Contains(endpoint, "://") && !strings.HasPrefix(endpoint, "unix://") {
		return nil, errors.New("client: the socket must be a path or a unix:// URL, not " + endpoint)
	}
	path := h2c.SocketPath(endpoint)
	if path == "" {
		return nil, errors.New("client: empty socket path in " + endpoint)
	}
	if _, ok := wireNames[o.wire]; !ok {
		return nil, errors.New("client: unknown wire " + o.wire.String())
	}
	hc := h2c.NewClient(path)
	copts := []connect.ClientOption{
		connect.WithGRPC(),
		connect.WithCodec(codec{}),
		connect.WithReadMaxBytes(o.readMaxBytes),
	}
	return &Client{
		socket:   path,
		http:     hc,
		wire:     o.wire,
		reflect:  grpcreflect.NewClient(hc, h2c.BaseURL, connect.WithGRPC()),
		list:     connect.NewClient[selectRequest, listResponse](hc, h2c.BaseURL+podsv1alpha1connect.PodsListPodsProcedure, copts...),
		get:      connect.NewClient[getRequest, getResponse](hc, h2c.BaseURL+podsv1alpha1connect.PodsGetPodProcedure, copts...),
		watch:    connect.NewClient[selectRequest, watchResponse](hc, h2c.BaseURL+podsv1alpha1connect.PodsWatchPodsProcedure, copts...),
		find:     connect.NewClient[findRequest, findResponse](hc, h2c.BaseURL+findProcedure, copts...),
		rawList:  connect.NewClient[kubeletpods.ListPodsRequest, kubeletpods.ListPodsResponse](hc, h2c.BaseURL+v1alpha1connect.PodsListPodsProcedure, copts...),
		rawGet:   connect.NewClient[kubeletpods.GetPodRequest, kubeletpods.GetPodResponse](hc, h2c.BaseURL+v1alpha1connect.PodsGetPodProcedure, copts...),
		rawWatch: connect.NewClient[kubeletpods.WatchPodsRequest, kubeletpods.WatchPodsEvent](hc, h2c.BaseURL+v1alpha1connect.PodsWatchPodsProcedure, copts...),
	}, nil
}

// Socket returns the path of the socket the client talks to.
func (c *Client) Socket() string { return c.socket }

// Close closes the client's idle connections. It does not end open watches:
// cancel their contexts, or Close them, for that.
func (c *Client) Close() error {
	c.http.CloseIdleConnections()
	return nil
}

// List returns every pod of the node, sorted by namespace, name and UID;
// only those selected by WithNamespace, WithLabelSelector and
// WithFieldSelector when given.
func (c *Client) List(ctx context.Context, opts ...CallOption) ([]*corev1.Pod, error) {
	pods, _, err := c.ListRevision(ctx, opts...)
	return pods, err
}

// ListRevision is List that also returns the revision of the server's store
// the list reflects, from which a Watch may resume (WithResumeFrom). The
// revision is "" on a server without revisions (WireKubelet, an older
// podsapi).
func (c *Client) ListRevision(ctx context.Context, opts ...CallOption) ([]*corev1.Pod, string, error) {
	res, err := c.listResponse(ctx, newCallOptions(opts))
	if err != nil {
		return nil, "", err
	}
	return res.pods, res.revision, nil
}

// ListWorkloads is List that also returns the workload of each pod listed
// (docs/api.md, "Workloads"), by the pod's UID: a pod the server resolves
// no workload for is absent, and the map is empty from a server that
// resolves none, or on WireKubelet.
func (c *Client) ListWorkloads(ctx context.Context, opts ...CallOption) ([]*corev1.Pod, map[types.UID]*podsv1alpha1.PodWorkload, error) {
	o := newCallOptions(opts)
	o.includeWorkloads = true
	res, err := c.listResponse(ctx, o)
	if err != nil {
		return nil, nil, err
	}
	if res.workloads == nil {
		res.workloads = map[types.UID]*podsv1alpha1.PodWorkload{}
	}
	return res.pods, res.workloads, nil
}

// errWorkloadSelector is the error of WithWorkloadSelector on WireKubelet.
var errWorkloadSelector = errors.New("client: WithWorkloadSelector needs podsapi's typed wire: the server speaks only the kubelet's, which has no workloads")

// listResponse lists with o: on the typed wire, or on WireKubelet, or on
// an older podsapi without selectors, where it filters.
func (c *Client) listResponse(ctx context.Context, o callOptions) (*listResponse, error) {
	wire, err := c.Wire(ctx)
	if err != nil {
		return nil, wrapError(err, false)
	}
	m, err := newMatcher(o.selection)
	if err != nil {
		return nil, err
	}
	if wire == WireKubelet {
		if o.workloads != nil {
			return nil, errWorkloadSelector
		}
		pods, err := c.listKubelet(ctx, o, m)
		c.forget(wire, err)
		return &listResponse{pods: pods}, err
	}
	res, err := c.list.CallUnary(ctx, newRequest(o.request(), o))
	if err != nil {
		c.forget(wire, err)
		return nil, wrapError(err, false)
	}
	if res.Msg.revision == "" && m != nil {
		// A server without selectors: filter here, on whole pods.
		if o.header() == "" {
			return &listResponse{pods: m.filter(res.Msg.pods)}, nil
		}
		pods, err := c.listWhole(ctx, o, m)
		c.forget(wire, err)
		return &listResponse{pods: pods}, err
	}
	return res.Msg, nil
}

// Get returns the pod with the given UID. An unknown UID fails with an error
// that wraps ErrNotFound.
func (c *Client) Get(ctx context.Context, uid types.UID, opts ...CallOption) (*corev1.Pod, error) {
	pod, _, err := c.GetWorkload(ctx, uid, opts...)
	return pod, err
}

// GetWorkload is Get that also returns the pod's workload (docs/api.md,
// "Workloads"): nil from a server that resolves none for the pod, or on
// WireKubelet.
func (c *Client) GetWorkload(ctx context.Context, uid types.UID, opts ...CallOption) (*corev1.Pod, *podsv1alpha1.PodWorkload, error) {
	wire, err := c.Wire(ctx)
	if err != nil {
		return nil, nil, wrapError(err, false)
	}
	o := newCallOptions(opts)
	if wire == WireKubelet {
		pod, err := c.getKubelet(ctx, uid, o)
		c.forget(wire, err)
		return pod, nil, err
	}
	res, err := c.get.CallUnary(ctx, newRequest(&getRequest{uid: string(uid)}, o))
	if err != nil {
		c.forget(wire, err)
		return nil, nil, wrapError(err, false)
	}
	if res.Msg.pod == nil {
		return &corev1.Pod{}, res.Msg.workload, nil
	}
	return res.Msg.pod, res.Msg.workload, nil
}

// newRequest returns a request of msg carrying the field mask of o.
func newRequest[T any](msg *T, o callOptions) *connect.Request[T] {
	req := connect.NewRequest(msg)
	if h := o.header(); h != "" {
		req.Header().Set(fieldMaskHeader, h)
	}
	return req
}

// listWhole is List on a typed server without selectors when there is a
// field mask: it lists whole pods, selects them, then applies the mask.
func (c *Client) listWhole(ctx context.Context, o callOptions, m *matcher) ([]*corev1.Pod, error) {
	dec, err := newPodDecoder(o, false)
	if err != nil {
		return nil, err
	}
	res, err := c.list.CallUnary(ctx, newRequest(o.request(), callOptions{}))
	if err != nil {
		return nil, wrapError(err, false)
	}
	var pods []*corev1.Pod
	for _, p := range m.filter(res.Msg.pods) {
		if p, err = project(dec, p); err != nil {
			return nil, err
		}
		pods = append(pods, p)
	}
	return pods, nil
}

// project returns pod trimmed by the mask of dec.
func project(dec *podDecoder, pod *corev1.Pod) (*corev1.Pod, error) {
	if dec.mask == nil {
		return pod, nil
	}
	raw, err := pod.Marshal()
	if err != nil {
		return nil, errDecode(err)
	}
	return dec.decode(raw)
}
