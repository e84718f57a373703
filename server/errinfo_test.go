package server_test

import (
	"context"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/status"

	"github.com/podsapi/podsapi/errinfo"
	podsv1alpha1 "github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1"
	"github.com/podsapi/podsapi/server"
	"github.com/podsapi/podsapi/test/podstest"
)

// TestErrorReasons checks that the errors the server decides carry a
// google.rpc.ErrorInfo of domain podsapi.io with a stable reason, on both
// wires, and that errors a client raises itself carry none.
func TestErrorReasons(t *testing.T) {
	pods := podstest.SamplePods()
	list := func(t *testing.T, cfg server.Config, unsynced bool, mask string) error {
		f := start(t, cfg, unsynced, pods...)
		req := connect.NewRequest(&podsv1alpha1.PodListRequest{})
		if mask != "" {
			req.Header().Set("x-kubernetes-fieldmask", mask)
		}
		_, err := podstest.ConnectClient(t, f.socket).ListPods(ctx(t), req)
		return err
	}
	get := func(t *testing.T, uid string) error {
		f := start(t, server.Config{}, false, pods...)
		_, err := podstest.ConnectClient(t, f.socket).GetPod(ctx(t), connect.NewRequest(&podsv1alpha1.PodGetRequest{PodUID: uid}))
		return err
	}
	tests := []struct {
		name   string
		call   func(t *testing.T) error
		code   connect.Code
		reason string
		meta   map[string]string
	}{
		{"not synced", func(t *testing.T) error { return list(t, server.Config{}, true, "") }, connect.CodeFailedPrecondition, errinfo.NotSynced, nil},
		{"invalid mask", func(t *testing.T) error { return list(t, server.Config{}, false, "metadata.nosuch") }, connect.CodeInvalidArgument, errinfo.InvalidFieldMask, nil},
		{"empty UID", func(t *testing.T) error { return get(t, "") }, connect.CodeInvalidArgument, errinfo.EmptyUID, nil},
		{"unknown UID", func(t *testing.T) error { return get(t, "no-such-uid") }, connect.CodeNotFound, errinfo.PodNotFound, map[string]string{"uid": "no-such-uid"}},
		{"rate limited", func(t *testing.T) error {
			f := start(t, server.Config{Limits: server.LimitsConfig{QPS: 1e-6, Burst: 1, RateLimitDelay: -1}}, false, pods...)
			c := podstest.ConnectClient(t, f.socket)
			if _, err := c.ListPods(ctx(t), connect.NewRequest(&podsv1alpha1.PodListRequest{})); err != nil {
				t.Fatal(err)
			}
			_, err := c.ListPods(ctx(t), connect.NewRequest(&podsv1alpha1.PodListRequest{}))
			return err
		}, connect.CodeResourceExhausted, errinfo.RateLimited, map[string]string{"procedure": "/kubelet.pods.v1alpha1.Pods/ListPods"}},
		{"too many watches", func(t *testing.T) error {
			f := start(t, server.Config{Limits: server.LimitsConfig{MaxWatchers: 1}}, false, pods...)
			c := podstest.ConnectClient(t, f.socket)
			first, err := c.WatchPods(ctx(t), connect.NewRequest(&podsv1alpha1.PodWatchRequest{}))
			if err != nil || !first.Receive() {
				t.Fatalf("first watch: %v %v", err, first.Err())
			}
			defer first.Close()
			second, err := c.WatchPods(ctx(t), connect.NewRequest(&podsv1alpha1.PodWatchRequest{}))
			if err != nil {
				return err
			}
			defer second.Close()
			second.Receive()
			return second.Err()
		}, connect.CodeResourceExhausted, errinfo.TooManyWatches, map[string]string{"limit": "1"}},
		{"peer denied", func(t *testing.T) error {
			return list(t, server.Config{Hooks: podstest.AsRoot(), Access: server.AccessConfig{AllowedUIDs: []uint32{4242}}}, false, "")
		}, connect.CodePermissionDenied, errinfo.PeerDenied, map[string]string{"uid": "0", "gid": "0"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call(t)
			if connect.CodeOf(err) != tc.code {
				t.Fatalf("%v, want %v", err, tc.code)
			}
			info := errinfo.Of(err)
			if info.GetReason() != tc.reason || info.GetDomain() != errinfo.Domain {
				t.Fatalf("ErrorInfo %v, want reason %s in %s", info, tc.reason, errinfo.Domain)
			}
			for k, v := range tc.meta {
				if info.GetMetadata()[k] != v {
					t.Errorf("metadata %q = %q, want %q", k, info.GetMetadata()[k], v)
				}
			}
		})
	}

	t.Run("grpc-go reads them", func(t *testing.T) {
		f := start(t, server.Config{}, false, pods...)
		err := podstest.GRPCConn(t, f.socket).Invoke(ctx(t), "/kubelet.pods.v1alpha1.Pods/GetPod", &podsv1alpha1.PodGetRequest{PodUID: "x"}, &podsv1alpha1.PodGetResponse{})
		var reason string
		for _, d := range status.Convert(err).Details() {
			if info, ok := d.(*errdetails.ErrorInfo); ok {
				reason = info.GetReason()
			}
		}
		if reason != errinfo.PodNotFound {
			t.Errorf("grpc-go: %v with reason %q, want %s", err, reason, errinfo.PodNotFound)
		}
	})
	t.Run("client-side errors have none", func(t *testing.T) {
		f := start(t, server.Config{}, false, pods...)
		c, cancel := context.WithCancel(ctx(t))
		cancel()
		_, err := podstest.ConnectClient(t, f.socket).ListPods(c, connect.NewRequest(&podsv1alpha1.PodListRequest{}))
		if err == nil || errinfo.Of(err) != nil {
			t.Errorf("a call cancelled by the client: %v with ErrorInfo %v, want an error without", err, errinfo.Of(err))
		}
	})
}
