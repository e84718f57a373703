package client

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"connectrpc.com/connect"

	"github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1/podsv1alpha1connect"
)

// Wire says which gRPC service of the Pods API a Client speaks.
type Wire int

const (
	// WireAuto detects the service the socket serves, once per Client, with
	// gRPC reflection, which costs no rate-limit token: WirePodsAPI when
	// reflection lists kubelet.pods.v1alpha1.Pods, WireKubelet when it does
	// not, or when the server has no reflection (a kubelet has none).
	WireAuto Wire = iota
	// WirePodsAPI is the typed service kubelet.pods.v1alpha1.Pods served by
	// podsapi.
	WirePodsAPI
	// WireKubelet is the kubelet's own service v1alpha1.Pods (package
	// k8s.io/kubelet/pkg/apis/pods/v1alpha1), which carries pods as their
	// Kubernetes protobuf bytes. Kubelets with the PodsAPI feature gate serve
	// it, and so does podsapi.
	WireKubelet
)

// wireNames are the names of the wires, as ParseWire accepts them.
var wireNames = map[Wire]string{WireAuto: "auto", WirePodsAPI: "podsapi", WireKubelet: "kubelet"}

// String returns "auto", "podsapi" or "kubelet".
func (w Wire) String() string {
	if s, ok := wireNames[w]; ok {
		return s
	}
	return fmt.Sprintf("Wire(%d)", int(w))
}

// ParseWire returns the wire named s: "auto", "podsapi" or "kubelet".
func ParseWire(s string) (Wire, error) {
	for w, name := range wireNames {
		if s == name {
			return w, nil
		}
	}
	return WireAuto, fmt.Errorf("unknown wire %q: want auto, podsapi or kubelet", s)
}

// Set sets w to the wire named s, so that a *Wire is a flag.Value.
func (w *Wire) Set(s string) error {
	v, err := ParseWire(s)
	if err != nil {
		return err
	}
	*w = v
	return nil
}

// WithWire sets the service the client speaks. The default, WireAuto,
// detects it; WirePodsAPI and WireKubelet skip the detection.
func WithWire(w Wire) Option {
	return func(o *clientOptions) { o.wire = w }
}

// Wire returns the wire the client speaks: the one given to WithWire, or
// with WireAuto the one detected, which the first call detects and the
// client keeps. A detection fails only when the server cannot be reached or
// refuses the peer; it is then tried again by the next call. A call that
// gets UNIMPLEMENTED on a detected wire makes the next call detect again.
func (c *Client) Wire(ctx context.Context) (Wire, error) {
	if c.wire != WireAuto {
		return c.wire, nil
	}
	if w := Wire(c.detected.Load()); w != WireAuto {
		return w, nil
	}
	w, err := c.detect(ctx)
	if err != nil {
		return WireAuto, err
	}
	c.detected.Store(int32(w))
	return w, nil
}

// detect asks the server's gRPC reflection which services it serves.
func (c *Client) detect(ctx context.Context) (Wire, error) {
	stream := c.reflect.NewStream(ctx)
	names, err := stream.ListServices()
	_, _ = stream.Close()
	if connect.CodeOf(err) == connect.CodeUnimplemented {
		return WireKubelet, nil // no reflection: a kubelet
	}
	if err != nil {
		var ce *connect.Error
		if errors.As(err, &ce) {
			return WireAuto, ce // as a call would have failed
		}
		return WireAuto, err
	}
	if slices.Contains(names, podsv1alpha1connect.PodsName) {
		return WirePodsAPI, nil
	}
	return WireKubelet, nil
}

// forget drops the detected wire w when err says the server does not serve
// it (any more), so that the next call detects again.
func (c *Client) forget(w Wire, err error) {
	if c.wire == WireAuto && connect.CodeOf(err) == connect.CodeUnimplemented {
		c.detected.CompareAndSwap(int32(w), int32(WireAuto))
	}
}
