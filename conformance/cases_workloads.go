package conformance

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	podsv1alpha1 "github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1"
)

func init() {
	registerOn(podsapiOnly, "Workloads/ListWatch",
		"ListPods and WatchPods with include_workloads MUST carry the workload of each pod sent (for a pod whose controller is a StatefulSet, that StatefulSet, RESOLVED), and a workload_selector MUST select the pods of that workload only: a pod that comes to be part of it MUST be sent to the watch as EVENT_TYPE_ADDED, with its workload.",
		needs(NeedDriver, NeedWorkloads), func(c *C) {
			d := c.env.driver
			sts := d.name("db")
			want := &podsv1alpha1.PodWorkload{Kind: "StatefulSet", Name: sts, Resolution: podsv1alpha1.WorkloadResolution_WORKLOAD_RESOLUTION_RESOLVED}
			sel := &podsv1alpha1.WorkloadSelector{Kind: "StatefulSet", Name: sts}
			c.create(podSpec{name: "a", version: 1, statefulSet: sts}, podSpec{name: "b", version: 1})
			client := c.selecting(selection{})

			listReq := &podsv1alpha1.PodListRequest{IncludeWorkloads: true, WorkloadSelector: sel}
			desc := describe("ListPods", nil, strings.TrimSpace(fmt.Sprint(listReq)))
			var resp *podsv1alpha1.PodListResponse
			if err := retryRateLimited(c, desc, func(ctx context.Context) error {
				r, err := client.c.ListPods(ctx, connect.NewRequest(listReq))
				if err == nil {
					resp = r.Msg
				}
				return err
			}); err != nil {
				c.Failf(desc, "OK", codeName(err))
			}
			if got := c.runNames(resp.GetPods()); !slices.Equal(got, c.servedNames("a")) {
				c.Failf(desc, fmt.Sprint(c.servedNames("a")), fmt.Sprint(got))
			}
			if got := resp.GetWorkloads()[string(d.uid("a"))]; !proto.Equal(got, want) {
				c.Failf(desc, "workloads["+string(d.uid("a"))+"] "+want.String(), fmt.Sprint(got))
			}

			watchReq := &podsv1alpha1.PodWatchRequest{IncludeWorkloads: true, WorkloadSelector: sel}
			desc = describe("WatchPods", nil, strings.TrimSpace(fmt.Sprint(watchReq)))
			ctx, cancel := context.WithTimeout(c.ctx, 3*c.recvTimeout())
			defer cancel()
			stream, err := client.c.WatchPods(ctx, connect.NewRequest(watchReq))
			if err != nil {
				c.Failf(desc, "a stream", codeName(err))
			}
			defer stream.Close()
			expect := func(typ podsv1alpha1.EventType, short string) {
				if !stream.Receive() {
					c.Failf(desc, typ.String()+" "+d.served(short), "the stream ended: "+codeName(stream.Err()))
				}
				ev := stream.Msg()
				if ev.GetType() != typ || ev.GetPod().GetMetadata().GetName() != d.served(short) || !proto.Equal(ev.GetWorkload(), want) {
					c.Failf(desc, fmt.Sprintf("%v %s with workload %v", typ, d.served(short), want),
						fmt.Sprintf("%v %s with workload %v", ev.GetType(), ev.GetPod().GetMetadata().GetName(), ev.GetWorkload()))
				}
			}
			expect(podsv1alpha1.EventType_EVENT_TYPE_ADDED, "a")
			if !stream.Receive() || stream.Msg().GetType() != podsv1alpha1.EventType_EVENT_TYPE_INITIAL_SYNC_COMPLETE {
				c.Failf(desc, "EVENT_TYPE_INITIAL_SYNC_COMPLETE after the pod of the StatefulSet", fmt.Sprint(stream.Msg().GetType(), " ", codeName(stream.Err())))
			}
			c.create(podSpec{name: "b", version: 2, statefulSet: sts})
			expect(podsv1alpha1.EventType_EVENT_TYPE_ADDED, "b")
		})
}
