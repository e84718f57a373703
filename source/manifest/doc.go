// Package manifest is the pod source that reads static pod manifests from a
// directory, like the kubelet's staticPodPath, and follows its changes.
//
// # Files
//
// Every file directly in the directory whose name ends in .yaml, .yml or
// .json (in any case) and does not start with a dot is a manifest file;
// subdirectories, dotfiles and other names (such as the editor temporary
// files "x.yaml~" and ".x.yaml.swp") are ignored. A manifest is a regular
// file, or a symbolic link to one; anything else under a manifest name (a
// FIFO, a socket, a device, a link to one, or a file of a kernel pseudo
// file system such as /proc or /sys) is rejected with reason "not_regular"
// without being read, and a device is not even opened. Files are opened
// without blocking and checked again once open, so a FIFO swapped in never
// blocks the Source. A YAML file holds any number of Pod documents
// separated by "---" lines; empty documents are skipped. A JSON file holds
// one Pod, in JSON.
//
// # Limits
//
// What one file may cost is bounded. A file over the size cap
// (WithMaxFileBytes, 1 MiB by default) is rejected with reason "too_large"
// after reading at most the cap and one byte of it; so is a YAML document
// whose aliases would expand it beyond the cap, which is checked on the
// parsed document before it is decoded, without expanding it. A pod must
// pass the API server's validation of labels and annotations (valid keys
// and values; all annotations together at most 256 KiB) and have at most
// 1024 labels, or it is rejected with reason "invalid".
//
// Decoding is strict: unknown and duplicate fields are errors, and every
// document must have apiVersion v1 and kind Pod. A Pod needs a
// metadata.name that is a valid DNS subdomain; its namespace, when set,
// must be a valid DNS label.
//
// # Defaults
//
// The namespace defaults to "default". The UID is metadata.uid when set, and
// otherwise DerivedUID of the namespace, name and node name, so that editing
// a manifest updates its pod under the same UID instead of deleting and
// adding it. spec.nodeName is always set to the node name. The status is
// the manifest's when it sets any status field; otherwise the phase is
// Pending.
//
// # Errors
//
// A file that cannot be read, or any of whose documents does not decode or
// is invalid, is rejected as a whole: it is logged at warning level with its
// path and the reason, counted in podsapi_manifest_errors_total{reason} (see
// WithRegisterer), and skipped, while every other file is still served.
// The file keeps its last good pods (none, for a file that was never good):
// a half-written or mistyped file does not make its pods disappear. A
// later fix of the file is picked up. A file of zero bytes is taken as
// being rewritten and also keeps its last good pods, without a warning; a
// file with no documents at all (only comments, say) provides no pods.
// Delete a file, or rename it to a name that is not a manifest name, to
// remove its pods.
//
// Of several pods with the same UID, or the same namespace and name, the
// first in file name order (byte-wise), then document order, is served; the
// others are rejected with reason "duplicate". The result does not depend
// on the order of events: it is always what a fresh read of the directory
// gives.
//
// A problem is logged and counted once, when it appears, not again at each
// rescan while it lasts.
//
// # Following changes
//
// The Source watches the directory with fsnotify. On an event for a
// manifest file (create, write, remove, rename, chmod) it reads just that
// file again and sends the sink the difference: an Upsert for each new or
// changed pod (a pod that is semantically unchanged is not sent again) and
// a Delete for each pod the file no longer provides. Writing a temporary
// file and renaming it over a manifest is handled as a change of the
// manifest. On a watch error, such as an event queue overflow, and at every
// resync interval (WithResyncInterval), it rescans the whole directory and
// sends the difference.
//
// Writers should replace manifests atomically, by renaming a complete
// temporary file over them. A file written in place can be read while it
// is half written: an empty or undecodable state keeps the last good pods,
// but a prefix that happens to decode is served until the rest arrives.
// Renaming a manifest to another manifest name may be seen as a Delete and
// then an Upsert of its pods, when the two events arrive apart.
//
// A burst of events costs in proportion to the files it changes (times a
// logarithm), not to the files in the directory: only the pods that a
// change can affect are decided again.
//
// If the directory disappears after Run started, its pods are deleted, as
// for an empty directory. The Source also watches the parent directory, so
// a directory created again is watched and read at once. If the parent
// cannot be watched, the Source tries to watch the directory again at every
// resync interval, rescanning when it is back; with the periodic rescan
// disabled it then does not retry. A directory that exists but cannot be
// listed changes nothing.
//
// All calls to the Sink are made from the goroutine running Run.
package manifest
