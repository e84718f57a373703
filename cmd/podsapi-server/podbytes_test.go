package main

import (
	"testing"

	"github.com/podsapi/podsapi/source/kubeletgrpc"
	"github.com/podsapi/podsapi/store"
)

// TestKubeletEventBoundMatchesStore: the kubelet-grpc source's default
// bound of one event is the store's default bound of one pod plus the
// event's slack (the source cannot import the store to say so itself).
func TestKubeletEventBoundMatchesStore(t *testing.T) {
	if got, want := kubeletgrpc.DefaultReadMaxBytes, store.DefaultMaxPodBytes+kubeletgrpc.EventSlack; got != want {
		t.Fatalf("kubeletgrpc.DefaultReadMaxBytes = %d, want store.DefaultMaxPodBytes + EventSlack = %d", got, want)
	}
}
