// Package service implements the Pods API on top of a PodReader of encoded
// pods (the store), on both wires: the typed kubelet.pods.v1alpha1.Pods and
// the kubelet's own v1alpha1.Pods (pods as bytes).
//
// New and NewKubelet return the generated connect handler interface of each
// wire; NewHandlers returns both, sharing one cache of responses. The
// service's own interceptors are the metrics (NewMetrics) and the field masks
// (FieldMasks); the server package chains them with the guards' (readiness,
// access, rate limits) in the order they must run, and hands the chain to
// HandlerOptions.
//
// Responses are assembled from the bytes the store encoded once per pod
// version: a pod, or its view trimmed by a field mask, is never re-marshalled
// per request. The assembled bytes travel to connect's codec as the response
// message's raw fields, so clients see ordinary typed messages.
package service
