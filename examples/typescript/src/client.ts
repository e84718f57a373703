// Copyright 2026 The podsapi Authors.
// SPDX-License-Identifier: Apache-2.0

// A TypeScript client of the Kubelet Pods API: ListPods with a field mask,
// then WatchPods until the initial snapshot is complete, over the server's
// UNIX socket.
//
// Usage: node dist/src/client.js [SOCKET]
// (default /var/lib/kubelet/pods-api/pods-api.sock)
//
// The socket trick: gRPC needs HTTP/2, and Node's http2.connect takes a
// createConnection function, which here dials the UNIX socket instead of TCP.
// connect-node passes it through to http2.connect. The URL only names the
// :authority and the scheme (http: means h2c, HTTP/2 without TLS); its host
// is never resolved.

import * as net from "node:net";
import { createClient, ConnectError } from "@connectrpc/connect";
import { createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";
import { EventType, Pods } from "../gen/kubelet/pods/v1alpha1/pods_pb.js";

const socket = process.argv[2] ?? "/var/lib/kubelet/pods-api/pods-api.sock";

// One HTTP/2 session over the socket, shared by both calls, closed at the end
// so that the process exits.
const sessionManager = new Http2SessionManager("http://localhost", {}, {
  createConnection: () => net.connect(socket),
});
const transport = createGrpcTransport({
  baseUrl: "http://localhost",
  sessionManager,
});
const pods = createClient(Pods, transport);

// The field mask travels in the gRPC metadata: the server returns only these
// fields of each pod.
const mask = { "x-kubernetes-fieldmask": "metadata.namespace,metadata.name,status.phase" };

async function main(): Promise<void> {
  const list = await pods.listPods({}, { headers: mask, timeoutMs: 10_000 });
  for (const pod of list.pods) {
    // The mask left spec out: a message field the server did not send is
    // undefined.
    const spec = pod.spec === undefined ? "no spec" : "spec present";
    console.log(`list ${pod.metadata?.namespace}/${pod.metadata?.name} ${pod.status?.phase} (${spec})`);
  }
  console.log(`list: ${list.pods.length} pods`);

  // WatchPods: one ADDED event per pod, then INITIAL_SYNC_COMPLETE, then live
  // events. This example stops after the snapshot; leaving the loop cancels
  // the stream.
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(), 10_000);
  try {
    for await (const ev of pods.watchPods({}, { headers: mask, signal: abort.signal })) {
      if (ev.type === EventType.INITIAL_SYNC_COMPLETE) {
        console.log("watch INITIAL_SYNC_COMPLETE");
        break;
      }
      console.log(`watch ${EventType[ev.type]} ${ev.pod?.metadata?.namespace}/${ev.pod?.metadata?.name} ${ev.pod?.status?.phase}`);
    }
  } finally {
    clearTimeout(timer);
  }
}

try {
  await main();
} catch (err) {
  // ConnectError carries the gRPC code and message the server sent.
  const e = ConnectError.from(err);
  console.error(`error: ${e.code}: ${e.rawMessage}`);
  process.exitCode = 1;
} finally {
  sessionManager.abort();
}
