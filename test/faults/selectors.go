package faults

import (
	"context"
	"fmt"

	"connectrpc.com/connect"

	podsv1alpha1 "github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1"
	"github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1/podsv1alpha1connect"
)

// Selectors wraps the typed handler, breaking the selectors and the resume
// of WatchPods as its fields say. False fields break nothing.
type Selectors struct {
	podsv1alpha1connect.PodsHandler
	// IgnoreWatchSelectors drops the selectors of WatchPods requests: every
	// watcher gets every pod, as if it had asked for all of them. ListPods
	// still honours them.
	IgnoreWatchSelectors bool
	// TooOldInvalid answers INVALID_ARGUMENT where the server answers
	// OUT_OF_RANGE (a resume_from it no longer holds).
	TooOldInvalid bool
}

// Around returns the hooks.Hooks field that installs s around the handler
// next installs (nil: the server's own).
func (s *Selectors) Around(next func(podsv1alpha1connect.PodsHandler) podsv1alpha1connect.PodsHandler) func(podsv1alpha1connect.PodsHandler) podsv1alpha1connect.PodsHandler {
	return func(h podsv1alpha1connect.PodsHandler) podsv1alpha1connect.PodsHandler {
		if next != nil {
			h = next(h)
		}
		s.PodsHandler = h
		return s
	}
}

// WatchPods serves WatchPods with the faults of s.
func (s *Selectors) WatchPods(ctx context.Context, req *connect.Request[podsv1alpha1.PodWatchRequest], stream *connect.ServerStream[podsv1alpha1.PodWatchResponse]) error {
	if s.IgnoreWatchSelectors {
		req.Msg.Namespace, req.Msg.LabelSelector, req.Msg.FieldSelector = "", "", ""
	}
	err := s.PodsHandler.WatchPods(ctx, req, stream)
	if s.TooOldInvalid && connect.CodeOf(err) == connect.CodeOutOfRange {
		return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("resume_from: not a revision of this server"))
	}
	return err
}
