package manifest

import (
	"crypto/sha1" //nolint:gosec // SHA-1 is what RFC 9562 prescribes for name-based version 5 UUIDs; it is not used for security.
	"fmt"

	"k8s.io/apimachinery/pkg/types"
)

// uidNamespace is the name space UUID of the version 5 UUIDs that
// DerivedUID makes. It was generated at random once and must never change:
// changing it changes the UID of every static pod without an explicit
// metadata.uid.
var uidNamespace = [16]byte{
	0xb2, 0x3f, 0xc0, 0x2d, 0x66, 0xcf, 0x49, 0x45,
	0xa6, 0xdc, 0x96, 0x85, 0x7c, 0x6f, 0xeb, 0x00,
} // b23fc02d-66cf-4945-a6dc-96857c6feb00

// DerivedUID returns the UID that a manifest without metadata.uid gets: the
// name-based version 5 UUID (RFC 9562, SHA-1) of "namespace/name/nodeName"
// in the name space b23fc02d-66cf-4945-a6dc-96857c6feb00, in its canonical
// lower-case text form.
//
// The UID depends only on these three strings, so editing a manifest keeps
// its pod's UID, and the same pod on the same node always gets the same UID.
// The namespace must already be defaulted (an empty namespace is not
// replaced by "default" here).
func DerivedUID(namespace, name, nodeName string) types.UID {
	h := sha1.New() //nolint:gosec // See the import.
	h.Write(uidNamespace[:])
	h.Write([]byte(namespace + "/" + name + "/" + nodeName))
	var u [16]byte
	copy(u[:], h.Sum(nil))
	u[6] = u[6]&0x0f | 0x50 // Version 5.
	u[8] = u[8]&0x3f | 0x80 // Variant 10 (RFC 9562).
	return types.UID(fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16]))
}
