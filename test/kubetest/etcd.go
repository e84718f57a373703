package kubetest

import (
	"bytes"
	"encoding/base64"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes/scheme"
)

// etcdTxnOps is how many puts one etcd transaction carries: etcd's
// --max-txn-ops default.
const etcdTxnOps = 128

// StoredValue returns obj encoded as the API server stores it in etcd:
// Kubernetes protobuf (the "k8s\x00" envelope) of version gv, the storage
// version of its kind. obj must be of a kind of client-go's scheme, with
// every field the API server would have set on create (UID,
// creationTimestamp; not resourceVersion, which etcd's revision gives).
func StoredValue(t testing.TB, obj runtime.Object, gv schema.GroupVersion) []byte {
	t.Helper()
	enc := scheme.Codecs.EncoderForVersion(protobuf.NewSerializer(scheme.Scheme, scheme.Scheme), gv)
	var b bytes.Buffer
	if err := enc.Encode(obj, &b); err != nil {
		t.Fatalf("encode %T for etcd: %v", obj, err)
	}
	return b.Bytes()
}

// PutEtcd writes each key and value of kvs (keys under /registry/, values
// from StoredValue) straight into etcd, in transactions of etcdTxnOps
// puts through etcd's JSON gateway: the way a test seeds tens of
// thousands of objects in seconds, where creating them through the API
// server takes minutes of both cores. The API server's watch cache
// receives them from its watch of etcd, as it receives its own writes, and
// serves them as objects it created. kvs is a list of pairs, in the order
// written.
func (c *ControlPlane) PutEtcd(t testing.TB, kvs [][2][]byte) {
	t.Helper()
	for start := 0; start < len(kvs); start += etcdTxnOps {
		batch := kvs[start:min(start+etcdTxnOps, len(kvs))]
		ops := make([]map[string]any, len(batch))
		for i, kv := range batch {
			ops[i] = map[string]any{"request_put": map[string]string{
				"key":   base64.StdEncoding.EncodeToString(kv[0]),
				"value": base64.StdEncoding.EncodeToString(kv[1]),
			}}
		}
		var resp struct {
			Succeeded bool `json:"succeeded"`
		}
		c.etcdCall(t, "/v3/kv/txn", map[string]any{"success": ops}, &resp)
		if !resp.Succeeded {
			t.Fatalf("etcd transaction of %d puts from %q: not succeeded", len(batch), batch[0][0])
		}
	}
}
