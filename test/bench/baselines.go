package bench

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/emptypb"
	corev1 "k8s.io/api/core/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podsapi/podsapi/fieldmask"
	"github.com/podsapi/podsapi/server"
)

// The baselines the benchmark measures our server against, served by the
// same child processes (serve): baseline A keeps k8s.io/api pods and
// marshals them per request and watcher, as a straightforward
// implementation of the typed API would; baseline B is the kubelet's /pods
// (a PodList encoded as JSON per request); and the floors are the cheapest
// servers of each transport: an empty connect RPC (floor-rpc) and a trivial
// protocol on a plain socket (floor-raw).

// ---- Baseline A: pods kept as k8s.io/api objects, marshalled per request.

type eventA struct {
	typ byte // 1 added, 2 modified, 3 deleted
	pod *corev1.Pod
}

type watcherA struct {
	events  chan eventA
	dropped chan struct{}
}

// storeA keeps k8s.io/api pods, as the kubelet's pod manager does, and
// marshals them for every request and every watcher.
type storeA struct {
	mu       sync.Mutex
	pods     []*corev1.Pod // sorted; replaced on write, never modified
	index    map[types.UID]int
	watchers map[*watcherA]struct{}
	queue    int
}

func newStoreA(pods []*corev1.Pod, queue int) *storeA {
	a := &storeA{index: map[types.UID]int{}, watchers: map[*watcherA]struct{}{}, queue: max(queue, 1)}
	a.pods = slices.Clone(pods)
	slices.SortFunc(a.pods, func(x, y *corev1.Pod) int {
		return strings.Compare(x.Namespace+"/"+x.Name+"/"+string(x.UID), y.Namespace+"/"+y.Name+"/"+string(y.UID))
	})
	for i, p := range a.pods {
		a.index[p.UID] = i
	}
	return a
}

func (a *storeA) update(p *corev1.Pod) {
	a.mu.Lock()
	defer a.mu.Unlock()
	i, ok := a.index[p.UID]
	if !ok {
		return
	}
	pods := slices.Clone(a.pods)
	pods[i] = p
	a.pods = pods
	for w := range a.watchers {
		select {
		case w.events <- eventA{2, p}:
		default:
			delete(a.watchers, w)
			close(w.dropped)
		}
	}
}

func (a *storeA) list() []*corev1.Pod {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.pods
}

func (a *storeA) get(uid types.UID) *corev1.Pod {
	a.mu.Lock()
	defer a.mu.Unlock()
	if i, ok := a.index[uid]; ok {
		return a.pods[i]
	}
	return nil
}

func (a *storeA) watch() ([]*corev1.Pod, *watcherA) {
	w := &watcherA{events: make(chan eventA, a.queue), dropped: make(chan struct{})}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.watchers[w] = struct{}{}
	return a.pods, w
}

func (a *storeA) stop(w *watcherA) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.watchers, w)
}

// maskOf returns the field mask of the incoming gRPC call.
func maskOf(ctx context.Context) (*fieldmask.Mask, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	h := http.Header{}
	for _, k := range []string{fieldmask.Header, fieldmask.BinaryHeader} {
		for _, v := range md.Get(k) {
			h.Add(k, v)
		}
	}
	return fieldmask.FromHeader(h)
}

// marshalA marshals p now and trims it by mask: the per-request cost model.
func marshalA(dst []byte, p *corev1.Pod, mask *fieldmask.Mask) ([]byte, error) {
	raw, err := p.Marshal()
	if err != nil {
		return dst, err
	}
	if mask != nil {
		if raw, err = mask.AppendProjection(nil, raw); err != nil {
			return dst, err
		}
	}
	dst = protowire.AppendTag(dst, 1, protowire.BytesType)
	return protowire.AppendBytes(dst, raw), nil
}

func (a *storeA) grpcServer() *grpc.Server {
	gs := grpc.NewServer(grpc.ForceServerCodec(rawCodec{}), grpc.MaxConcurrentStreams(1000))
	gs.RegisterService(&grpc.ServiceDesc{
		ServiceName: "kubelet.pods.v1alpha1.Pods",
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{
			{MethodName: "ListPods", Handler: func(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
				var req []byte
				if err := dec(&req); err != nil {
					return nil, err
				}
				mask, err := maskOf(ctx)
				if err != nil {
					return nil, err
				}
				var out []byte
				for _, p := range a.list() {
					if out, err = marshalA(out, p, mask); err != nil {
						return nil, err
					}
				}
				return out, nil
			}},
			{MethodName: "GetPod", Handler: func(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
				var req []byte
				if err := dec(&req); err != nil {
					return nil, err
				}
				mask, err := maskOf(ctx)
				if err != nil {
					return nil, err
				}
				p := a.get(types.UID(stringField(req, 1)))
				if p == nil {
					return nil, errors.New("not found")
				}
				return marshalA(nil, p, mask)
			}},
		},
		Streams: []grpc.StreamDesc{{StreamName: "WatchPods", ServerStreams: true, Handler: func(_ any, ss grpc.ServerStream) error {
			var req []byte
			if err := ss.RecvMsg(&req); err != nil {
				return err
			}
			mask, err := maskOf(ss.Context())
			if err != nil {
				return err
			}
			if mask != nil {
				if mask, err = mask.Union("metadata.namespace", "metadata.name", "metadata.uid"); err != nil {
					return err
				}
			}
			snap, w := a.watch()
			defer a.stop(w)
			send := func(t byte, p *corev1.Pod) error {
				b, err := marshalA(nil, p, mask)
				if err != nil {
					return err
				}
				b = protowire.AppendVarint(protowire.AppendTag(b, 2, protowire.VarintType), uint64(t))
				return ss.SendMsg(b)
			}
			for _, p := range snap {
				if err := send(1, p); err != nil {
					return err
				}
			}
			if err := ss.SendMsg([]byte{2 << 3, 4}); err != nil {
				return err
			}
			for {
				select {
				case <-ss.Context().Done():
					return ss.Context().Err()
				case <-w.dropped:
					return errors.New("fell behind")
				case ev := <-w.events:
					if err := send(ev.typ, ev.pod); err != nil {
						return err
					}
				}
			}
		}}},
	}, nil)
	return gs
}

// stringField returns string field num of the message in b, or "".
func stringField(b []byte, num protowire.Number) string {
	v, _ := bytesField(b, num)
	return string(v)
}

// bytesField returns the last length-delimited field num of the message in b.
func bytesField(b []byte, num protowire.Number) ([]byte, bool) {
	var out []byte
	found := false
	for len(b) > 0 {
		n, t, l := protowire.ConsumeTag(b)
		if l < 0 {
			return out, found
		}
		b = b[l:]
		if n == num && t == protowire.BytesType {
			v, l := protowire.ConsumeBytes(b)
			if l < 0 {
				return out, found
			}
			out, found = v, true
			b = b[l:]
			continue
		}
		l = protowire.ConsumeFieldValue(n, t, b)
		if l < 0 {
			return out, found
		}
		b = b[l:]
	}
	return out, found
}

// varintField returns varint field num of the message in b, or 0.
func varintField(b []byte, num protowire.Number) uint64 {
	var out uint64
	for len(b) > 0 {
		n, t, l := protowire.ConsumeTag(b)
		if l < 0 {
			return out
		}
		b = b[l:]
		if n == num && t == protowire.VarintType {
			v, l := protowire.ConsumeVarint(b)
			if l < 0 {
				return out
			}
			out = v
			b = b[l:]
			continue
		}
		l = protowire.ConsumeFieldValue(n, t, b)
		if l < 0 {
			return out
		}
		b = b[l:]
	}
	return out
}

// ---- Baseline B: the kubelet's /pods, a PodList encoded as JSON per request.

type storeB struct {
	mu    sync.Mutex
	pods  []*corev1.Pod
	index map[types.UID]int
	codec k8sruntime.Encoder
}

func newStoreB(pods []*corev1.Pod) *storeB {
	scheme := k8sruntime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		panic(err)
	}
	b := &storeB{pods: slices.Clone(pods), index: map[types.UID]int{}}
	b.codec = serializer.NewCodecFactory(scheme).LegacyCodec(schema.GroupVersion{Version: "v1"})
	for i, p := range b.pods {
		b.index[p.UID] = i
	}
	return b
}

func (b *storeB) update(p *corev1.Pod) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if i, ok := b.index[p.UID]; ok {
		pods := slices.Clone(b.pods)
		pods[i] = p
		b.pods = pods
	}
}

// ServeHTTP is the kubelet's encodePods: copy the pods into a PodList and
// encode it with the legacy codec, for every request.
func (b *storeB) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b.mu.Lock()
	pods := b.pods
	b.mu.Unlock()
	list := new(corev1.PodList)
	for _, p := range pods {
		list.Items = append(list.Items, *p)
	}
	data, err := k8sruntime.Encode(b.codec, list)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(data)
}

// ---- Floors.

// floorRPCServer serves an empty unary connect RPC with the http.Server
// settings of our server.
func floorRPCServer() *http.Server {
	mux := http.NewServeMux()
	mux.Handle(methodEmpty, connect.NewUnaryHandler(methodEmpty, func(context.Context, *connect.Request[emptypb.Empty]) (*connect.Response[emptypb.Empty], error) {
		return connect.NewResponse(&emptypb.Empty{}), nil
	}))
	protocols := new(http.Protocols)
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	return &http.Server{
		Handler: mux, Protocols: protocols,
		ReadHeaderTimeout: 10 * time.Second, MaxHeaderBytes: 64 << 10,
		HTTP2: &http.HTTP2Config{MaxConcurrentStreams: server.DefaultMaxStreams, MaxDecoderHeaderTableSize: 16 << 10},
	}
}

// serveRaw serves the trivial floor protocol: the client sends a 4-byte
// big-endian length n, the server answers with a 4-byte n and n bytes.
func serveRaw(ctx context.Context, l net.Listener) error {
	var (
		mu  sync.Mutex
		buf []byte
	)
	payload := func(n int) []byte {
		mu.Lock()
		defer mu.Unlock()
		if len(buf) < n {
			buf = make([]byte, n)
			for i := range buf {
				buf[i] = byte(i)
			}
		}
		return buf[:n]
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c, err := l.Accept()
		if err != nil {
			return ignoreClosed(err)
		}
		wg.Go(func() {
			defer c.Close()
			go func() { <-ctx.Done(); c.Close() }()
			r := bufio.NewReader(c)
			var hdr [4]byte
			for {
				if _, err := io.ReadFull(r, hdr[:]); err != nil {
					return
				}
				n := int(binary.BigEndian.Uint32(hdr[:]))
				bufs := net.Buffers{hdr[:], payload(n)}
				if _, err := bufs.WriteTo(c); err != nil {
					return
				}
			}
		})
	}
}
