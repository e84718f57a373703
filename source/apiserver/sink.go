package apiserver

import "github.com/podsapi/podsapi/source"

// Sink receives the pods a Source reads: the contract of every source,
// source.Sink.
type Sink = source.Sink
