package service

import (
	"google.golang.org/protobuf/encoding/protowire"

	podsv1alpha1 "github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1"
	"github.com/podsapi/podsapi/store"
)

// wireID names the encoding of the watch events of one wire.
type wireID int

// The encodings of the two wires.
const (
	typedWire   wireID = iota // kubelet.pods.v1alpha1.PodWatchResponse
	kubeletWire               // v1alpha1.WatchPodsEvent
	numWires
)

// eventEncoding is how one wire encodes a watch event around an encoded pod: the
// numbers of its pod and type fields. The event type numbers are the same in
// both wires (ADDED 1, MODIFIED 2, DELETED 3, INITIAL_SYNC_COMPLETE 4),
// which TestEventTypeNumbers checks.
type eventEncoding struct {
	id        wireID
	name      string // the prefix of the keys of its shared events
	podField  protowire.Number
	typeField protowire.Number
	// synced is the encoded INITIAL_SYNC_COMPLETE event, without a pod.
	synced []byte
	// progress is the encoded PROGRESS event, without a pod (typed wire
	// only: the kubelet's wire has no such event).
	progress []byte
}

// typedEvents encodes PodWatchResponse{pod = 1, type = 2}.
var typedEvents = newEventEncoding(typedWire, "watch", 1, 2)

// kubeletEvents encodes WatchPodsEvent{type = 1, bytes pod = 2}.
var kubeletEvents = newEventEncoding(kubeletWire, "kwatch", 2, 1)

// eventTypes maps the store's event types to the numbers of both wires.
var eventTypes = map[store.EventType]protowire.Number{
	store.Added:    protowire.Number(podsv1alpha1.EventType_EVENT_TYPE_ADDED),
	store.Modified: protowire.Number(podsv1alpha1.EventType_EVENT_TYPE_MODIFIED),
	store.Deleted:  protowire.Number(podsv1alpha1.EventType_EVENT_TYPE_DELETED),
}

// syncedType is the number of INITIAL_SYNC_COMPLETE in both wires.
const syncedType = protowire.Number(podsv1alpha1.EventType_EVENT_TYPE_INITIAL_SYNC_COMPLETE)

// progressType is the number of PROGRESS in the typed wire.
const progressType = protowire.Number(podsv1alpha1.EventType_EVENT_TYPE_PROGRESS)

func newEventEncoding(id wireID, name string, podField, typeField protowire.Number) eventEncoding {
	f := eventEncoding{id: id, name: name, podField: podField, typeField: typeField}
	f.synced = f.appendType(nil, syncedType)
	f.progress = f.appendType(nil, progressType)
	return f
}

// event returns the event of type t about the encoded pod v, with its fields
// in the order of their numbers, as protobuf encoders write them.
func (f eventEncoding) event(t store.EventType, v []byte) []byte {
	size := protowire.SizeTag(f.podField) + protowire.SizeBytes(len(v)) + protowire.SizeTag(f.typeField) + 1
	b := make([]byte, 0, size)
	if f.typeField < f.podField {
		return f.appendPod(f.appendType(b, eventTypes[t]), v)
	}
	return f.appendType(f.appendPod(b, v), eventTypes[t])
}

func (f eventEncoding) appendType(b []byte, t protowire.Number) []byte {
	b = protowire.AppendTag(b, f.typeField, protowire.VarintType)
	return protowire.AppendVarint(b, uint64(t))
}

func (f eventEncoding) appendPod(b, v []byte) []byte {
	b = protowire.AppendTag(b, f.podField, protowire.BytesType)
	return protowire.AppendBytes(b, v)
}
