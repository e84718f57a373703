# Copyright 2026 The podsapi Authors.
# SPDX-License-Identifier: Apache-2.0

"""A Python client of the Kubelet Pods API over its UNIX socket.

It calls ListPods with a field mask, then the kubelet wire's ListPods, then
WatchPods until the initial snapshot is complete, with grpcio and code
generated into gen/ by buf (see buf.gen.yaml).

Usage: python3 client.py [SOCKET]  (default /var/lib/kubelet/pods-api/pods-api.sock)

The socket trick: grpcio dials a UNIX socket when the target is
"unix:/absolute/path" (or "unix:///absolute/path"); the channel is plaintext
HTTP/2, which is what the server speaks.
"""

import os
import sys

import grpc

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "gen"))

from k8s.io.api.core.v1 import generated_pb2  # noqa: E402
from k8s.io.kubelet.pkg.apis.pods.v1alpha1 import api_pb2  # noqa: E402
from kubelet.pods.v1alpha1 import pods_pb2, pods_pb2_grpc  # noqa: E402

DEFAULT_SOCKET = "/var/lib/kubelet/pods-api/pods-api.sock"

# The field mask travels in the gRPC metadata: the server returns only these
# fields of each pod.
MASK = (("x-kubernetes-fieldmask", "metadata.namespace,metadata.name,status.phase"),)


def name(pod):
    return f"{pod.metadata.namespace}/{pod.metadata.name}"


def main():
    socket = sys.argv[1] if len(sys.argv) > 1 else DEFAULT_SOCKET
    with grpc.insecure_channel("unix:" + socket) as channel:
        pods = pods_pb2_grpc.PodsStub(channel)

        res = pods.ListPods(pods_pb2.PodListRequest(), metadata=MASK, timeout=10)
        for pod in res.pods:
            # The mask left spec out: HasField tells a field the server did
            # not send from an empty one.
            spec = "spec present" if pod.HasField("spec") else "no spec"
            print(f"list {name(pod)} {pod.status.phase} ({spec})")
        print(f"list: {len(res.pods)} pods")

        # The kubelet's own wire, v1alpha1.Pods, from its published api.proto
        # (k8s.io/kubelet/pkg/apis/pods/v1alpha1/api.proto): pods as the bytes
        # of their Kubernetes protobuf encoding. The call is made with the
        # generated messages; grpc_python_plugin writes the stub module under
        # the directory "k8s.io", which Python cannot import.
        kubelet_list = channel.unary_unary(
            "/v1alpha1.Pods/ListPods",
            request_serializer=api_pb2.ListPodsRequest.SerializeToString,
            response_deserializer=api_pb2.ListPodsResponse.FromString,
        )
        res = kubelet_list(api_pb2.ListPodsRequest(), timeout=10)
        names = sorted(generated_pb2.Pod.FromString(raw).metadata.name for raw in res.pods)
        print(f"kubelet list: {len(res.pods)} pods: {' '.join(names)}")

        # WatchPods: one ADDED event per pod, then INITIAL_SYNC_COMPLETE, then
        # live events. This example stops after the snapshot and cancels the
        # stream; the timeout bounds the whole watch.
        stream = pods.WatchPods(pods_pb2.PodWatchRequest(), metadata=MASK, timeout=10)
        try:
            for ev in stream:
                kind = pods_pb2.EventType.Name(ev.type).removeprefix("EVENT_TYPE_")
                if ev.type == pods_pb2.EVENT_TYPE_INITIAL_SYNC_COMPLETE:
                    print(f"watch {kind}")
                    break
                print(f"watch {kind} {name(ev.pod)} {ev.pod.status.phase}")
        finally:
            stream.cancel()


if __name__ == "__main__":
    try:
        main()
    except grpc.RpcError as err:
        # The gRPC code and message the server sent.
        print(f"error: {err.code().name}: {err.details()}", file=sys.stderr)
        sys.exit(1)
