package kubeapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The errors of the handler, built here and nowhere else, each the
// metav1.Status the API server answers in the same case.

// errNotServed is the answer to a path the handler does not serve, as the
// API server answers a path it does not know.
func errNotServed() error {
	return apierrors.NewGenericServerResponse(http.StatusNotFound, "get", schema.GroupResource{}, "", "", 0, false)
}

// errNotPinned is the answer to a list or watch of pods that is not pinned
// to the node: only the API server can answer it.
func errNotPinned(node string) error {
	return apierrors.NewServiceUnavailable(fmt.Sprintf(
		"podsapi answers only the pods of node %q, and this request is the API server's: add the field selector spec.nodeName=%s (kubectl get pods --field-selector spec.nodeName=%s; an informer's ListOptions.FieldSelector)", node, node, node))
}

// errNotFound is the answer to a get of an object of res its store does
// not hold.
func errNotFound(res *resource, name string) error {
	return apierrors.NewNotFound(res.groupResource(), name)
}

// errNotSynced is the answer to a read of res before its store has synced.
func errNotSynced(res *resource, retryAfter int) error {
	msg := "podsapi has not yet read the pods of this node from its source; retry shortly"
	if res.name != "pods" {
		msg = "podsapi has not yet read the " + res.name + " from the API server; retry shortly"
	}
	err := apierrors.NewServiceUnavailable(msg)
	err.ErrStatus.Details = &metav1.StatusDetails{RetryAfterSeconds: int32(retryAfter)}
	return err
}

// errBadRequest is the answer to a request whose parameters do not parse.
func errBadRequest(err error) error { return apierrors.NewBadRequest(err.Error()) }

// errNotAcceptable is the answer to an Accept header that lists no media
// type the handler encodes in, with the API server's message.
func errNotAcceptable() error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusNotAcceptable,
		Reason:  metav1.StatusReasonNotAcceptable,
		Message: "only the following media types are accepted: application/json, application/vnd.kubernetes.protobuf",
	}}
}

// errListRevision is the answer to a list whose resourceVersion is not
// one (not a number, nor one of podsapi's), with the API server's message.
func errListRevision(rv string) error {
	return apierrors.NewBadRequest("invalid resource version: " + revisionInvalid(rv))
}

// errWatchRevision is the answer to a watch whose resourceVersion is not
// one: the API server answers it 500, with no reason.
func errWatchRevision(rv string) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusInternalServerError,
		Message: revisionInvalid(rv),
	}}
}

// revisionInvalid is the API server's message for the resourceVersion rv
// that does not parse.
func revisionInvalid(rv string) string {
	_, err := strconv.ParseUint(rv, 10, 64)
	if err == nil {
		err = errors.New("not a resource version")
	}
	return field.Invalid(field.NewPath("resourceVersion"), rv, err.Error()).Error()
}

// errNotAList is the answer to a list of res for a client that asks for
// one PartialObjectMetadata, as the API server answers it.
func errNotAList(res *resource) error {
	return notAcceptable("you requested PartialObjectMetadata, but the requested object is a list (*" + res.internalType(res.listKind()) + ")")
}

// errAList is the answer to a get of res for a client that asks for a
// PartialObjectMetadataList, as the API server answers it.
func errAList(res *resource) error {
	return notAcceptable("you requested PartialObjectMetadataList, but the requested object is not a list (*" + res.internalType(res.kind) + ")")
}

func notAcceptable(msg string) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusNotAcceptable,
		Reason:  metav1.StatusReasonNotAcceptable,
		Message: msg,
	}}
}

// errExpired is the answer to a resourceVersion whose changes podsapi no
// longer holds, or that another podsapi (before a restart) or the API server
// wrote, as the API server answers a compacted one: 410 Gone, reason
// Expired, so that client-go lists again.
func errExpired(rv string) error {
	return apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %s", rv))
}

// errContinueExpired is the answer to a continue token of a list whose
// resourceVersion is no longer the store's (podsapi keeps no older
// snapshot), as the API server answers a compacted one.
func errContinueExpired() error {
	return apierrors.NewResourceExpired("The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.")
}

// errInternal is the answer to a failure of the handler itself; its message
// names no internals.
func errInternal() error {
	return apierrors.NewInternalError(errors.New("podsapi could not encode the pods"))
}

// writeError answers err as a metav1.Status in the format r accepts, as
// the API server negotiates an error's (indented JSON if it accepts none,
// or asks for pretty), with the status code it carries.
func (h *Handler) writeError(w http.ResponseWriter, r *http.Request, err error) {
	status := statusOf(err)
	fm := h.codecs.negotiateError(r)
	f := fm.format
	var b bytes.Buffer
	if err := f.object.Encode(status, &b); err != nil {
		http.Error(w, "podsapi could not encode an error", http.StatusInternalServerError)
		return
	}
	if fm.pretty {
		var ib bytes.Buffer
		if json.Indent(&ib, bytes.TrimSuffix(b.Bytes(), []byte("\n")), "", "  ") == nil {
			b = ib
		}
	}
	if status.Details != nil && status.Details.RetryAfterSeconds > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(status.Details.RetryAfterSeconds)))
	}
	w.Header().Set("Content-Type", f.mediaType)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(int(status.Code))
	_, _ = w.Write(b.Bytes())
}

// apiStatus returns the Status of err, an error of the handler.
func apiStatus(err error) metav1.Status {
	var se apierrors.APIStatus
	if !errors.As(err, &se) {
		return apierrors.NewInternalError(errors.New("podsapi failed")).Status()
	}
	return se.Status()
}
