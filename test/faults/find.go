package faults

import (
	"context"

	"connectrpc.com/connect"

	podsv1alpha1 "github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1"
)

// FindPods serves FindPods, with include_deleted always set if
// FindAlwaysDeleted is.
func (p *Pods) FindPods(ctx context.Context, req *connect.Request[podsv1alpha1.PodFindRequest]) (*connect.Response[podsv1alpha1.PodFindResponse], error) {
	defer p.served()
	if p.FindAlwaysDeleted {
		req.Msg.IncludeDeleted = true
	}
	return p.PodsHandler.FindPods(ctx, req)
}
