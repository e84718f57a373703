// Package admit is the admission toolkit of podsapi's front ends: what one
// key (a client of the gRPC socket, a caller of the Kubernetes API, a
// source address) may hold at once and spend, so that no key can starve
// another. Slots bound what is held (watches, waiting calls, field masks),
// in all and per key; a KeyedLimiter is a token bucket per key, bounded in
// keys. The refusals' delay is guard.Tarpit's.
//
// Everywhere in it, a bound of 0 (or less) means no bound: 0 never refuses
// everything.
//
// It is a leaf, so that the handlers (service), which must not import the
// guards, count with the same mechanism as the guards and the door.
package admit
