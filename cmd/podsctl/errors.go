package main

import (
	"errors"
	"strings"
	"syscall"

	"connectrpc.com/connect"

	"github.com/podsapi/podsapi/client"
	"github.com/podsapi/podsapi/errinfo"
)

// describe returns err with its gRPC code in the gRPC spelling, such as
// "FAILED_PRECONDITION: the pod sources have not synced yet: retry later".
func describe(err error) string {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return err.Error()
	}
	prefix := strings.TrimSuffix(err.Error(), ce.Error())
	return prefix + strings.ToUpper(ce.Code().String()) + ": " + ce.Message()
}

// hint returns what the user may do about err, or "".
func hint(err error) string {
	switch {
	case errors.Is(err, syscall.ENOENT), errors.Is(err, syscall.ECONNREFUSED):
		return "is the server running? Choose its socket with --socket or PODSAPI_SOCKET"
	case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM):
		return "the socket is readable by root only: run podsctl as root"
	case errors.Is(err, client.ErrNotSynced):
		return "the server has not synced yet: retry in a moment"
	case errors.Is(err, client.ErrRateLimited):
		return "rate limited, retry later"
	case errors.Is(err, client.ErrServerGone):
		return "the server went away (it is stopping or restarting): reconnect, watch again once it is back"
	case errors.Is(err, client.ErrFellBehind):
		return "podsctl fell behind the server's events: watch again"
	case errors.Is(err, client.ErrTooManyWatches):
		return "the server's watches are all taken: close other watches, or retry later"
	case errors.Is(err, client.ErrPermissionDenied):
		return "the server does not allow your user: run podsctl as root, or ask for your UID or group to be allowed"
	case errinfo.Reason(err) == errinfo.NoPodMatches || errinfo.Reason(err) == errinfo.ProcessNotFound:
		return "find --deleted also finds the pods deleted a moment ago; podsctl list -o wide shows the pods of this node"
	case errors.Is(err, client.ErrAmbiguous):
		return "give more digits of the container ID: crictl ps --no-trunc prints them whole"
	case errors.Is(err, client.ErrInvalidFindKey):
		return "find takes a PID, a container ID, an IP, a cgroup (a line of /proc/PID/cgroup) or --self"
	case errors.Is(err, client.ErrNotFound):
		return "podsctl list -o wide shows the pods of this node with their UIDs; get takes a UID or NAMESPACE/NAME"
	case errors.Is(err, client.ErrInvalidSelector):
		return "selectors take Kubernetes syntax (app=web,tier!=cache; status.phase=Running); --field-selector fields: " + strings.Join(client.SelectableFields, ", ")
	case connect.CodeOf(err) == connect.CodeInvalidArgument:
		return "field paths are the fields of a pod, as in kubectl get pod -o json (metadata.name,status.phase)"
	case connect.CodeOf(err) == connect.CodeUnimplemented:
		return "the socket does not serve this API: try --wire auto, or --wire kubelet for a kubelet's socket"
	case connect.CodeOf(err) == connect.CodeUnavailable:
		return "is the server running? Choose its socket with --socket or PODSAPI_SOCKET"
	}
	return ""
}
