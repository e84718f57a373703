// Package kubelethttp is the pod source that polls the kubelet's /pods
// endpoint: https://127.0.0.1:10250/pods (authenticated, the default) or the
// read-only http://127.0.0.1:10255/pods.
//
// # Polling
//
// The URL (WithURL) may take its host from WithHost, such as the node's IP
// from the downward API, bracketed when it is IPv6.
//
// Every interval (WithInterval) the Source fetches the endpoint, with a
// bearer token read again from its file at each poll (WithTokenFile, so
// that rotating projected service account tokens keep working) and, for
// https, the kubelet's serving certificate checked against a CA file
// (WithCAFile) or not at all (WithInsecureSkipVerify), and optionally a
// client certificate (WithClientCert, read again at each new connection).
// A request timeout (WithRequestTimeout) bounds each poll and the response
// body is capped (WithMaxBodyBytes).
//
// The response must be a v1 PodList in JSON (kind PodList, apiVersion v1);
// unknown fields are ignored, since kubelets are newer than us. The Source
// sends the sink the difference with what it sent before: an Upsert for
// each pod that is new or whose encoding changed (spec, status or metadata;
// the comparison is on the deterministic protobuf encoding, so the order of
// map keys does not matter), and a Delete for each pod that is gone. After
// the first successful poll it calls MarkSynced.
//
// A pod without a UID, or with the UID of an earlier pod of the list, is
// skipped, logged when it appears and counted in
// podsapi_source_errors_total{source="kubelet-http",reason="invalid"}.
//
// # Outages
//
// A poll that fails (no answer, a timeout, a status other than 200, a body
// too large or that is not a PodList, a token file that cannot be read)
// changes nothing: the sink keeps the last known pods and clients see no
// error. The failure is counted in
// podsapi_source_errors_total{source="kubelet-http",reason}; the first of a
// series is logged at warning level, and the next successful poll at info
// level. A 403 of the kubelet is followed by a warning that names the
// permission to grant, from the subresources the kubelet says it checked:
// nodes/pods on a kubelet with fine-grained authorization (Kubernetes 1.36
// and later), nodes/proxy on one without. Failed polls are retried with exponential backoff and jitter
// (WithBackoff) instead of the interval.
// podsapi_source_last_success_timestamp_seconds{source="kubelet-http"} is
// the time of the last successful poll.
//
// All calls to the Sink are made from the goroutine running Run.
package kubelethttp
