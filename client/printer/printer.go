package printer

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podsapi/podsapi/client"
	podsv1alpha1 "github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1"
)

// Format is an output format.
type Format string

// The output formats.
const (
	// Table is kubectl's table: NAMESPACE, NAME, READY, STATUS, RESTARTS
	// and AGE.
	Table Format = "table"
	// Wide is Table with the pod's IP, node and UID.
	Wide Format = "wide"
	// JSON is the Kubernetes JSON of the pods.
	JSON Format = "json"
	// YAML is the Kubernetes YAML of the pods.
	YAML Format = "yaml"
	// Name is pod/NAME.
	Name Format = "name"
)

// Formats lists the output formats.
var Formats = []Format{Table, Wide, JSON, YAML, Name}

// ParseFormat returns the format named s; "" is Table.
func ParseFormat(s string) (Format, error) {
	if s == "" {
		return Table, nil
	}
	for _, f := range Formats {
		if string(f) == s {
			return f, nil
		}
	}
	names := make([]string, len(Formats))
	for i, f := range Formats {
		names[i] = string(f)
	}
	return "", fmt.Errorf("unknown output format %q: want one of %s", s, strings.Join(names, ", "))
}

// Option configures a Printer.
type Option func(*Printer)

// WithNow sets the clock ages are computed with. The default is time.Now.
func WithNow(now func() time.Time) Option {
	return func(p *Printer) { p.now = now }
}

// WithFields makes JSON and YAML print only the fields at paths (in the
// JSON shape of a pod, such as fieldmask.Mask.JSONPaths returns), besides
// apiVersion and kind: the fields a field mask kept, as the server sent
// them, without the zero values the Go type of a pod adds for the fields
// it left out (a restartCount of 0 for a container that restarted). By
// default, and with no paths, they print whole pods.
func WithFields(paths ...string) Option {
	return func(p *Printer) { p.keep = newPathTree(paths) }
}

// WithWorkloads adds a WORKLOAD column (WorkloadString) to the Wide
// tables, after UID, when there is a workload to print: the workloads
// PrintListWorkloads and PrintPodWorkload are given, and those of watch
// events (client.WithWorkloads), where the events of the snapshot decide
// for the whole watch. By default tables have none.
func WithWorkloads() Option {
	return func(p *Printer) { p.workloads = true }
}

// Printer prints pods to a writer in one Format. Each call writes its
// output with one Write. A Printer is not safe for concurrent use.
type Printer struct {
	w      io.Writer
	format Format
	now    func() time.Time
	keep   pathTree // nil: whole pods
	// workloads says Wide tables may have a WORKLOAD column, and column
	// that the one being printed has it.
	workloads, column bool
	table             table
	synced            bool       // whether a watch's SYNCED event was printed
	held              [][]string // table rows of a watch's snapshot, held until SYNCED
	// heldWorkload says an event of the watch's snapshot had a workload.
	heldWorkload bool
}

// New returns a Printer of format f to w.
func New(w io.Writer, f Format, opts ...Option) *Printer {
	p := &Printer{w: w, format: f, now: time.Now}
	for _, opt := range opts {
		opt(p)
	}
	return p
}

// PrintList prints pods: a table with a header (nothing for no pods), a
// Kubernetes List object for JSON and YAML, one name per line for Name.
func (p *Printer) PrintList(pods []*corev1.Pod) error {
	return p.PrintListWorkloads(pods, nil)
}

// PrintListWorkloads is PrintList whose Wide table, WithWorkloads, prints
// the workload of each pod from ws, by the pod's UID.
func (p *Printer) PrintListWorkloads(pods []*corev1.Pod, ws map[types.UID]*podsv1alpha1.PodWorkload) error {
	switch p.format {
	case JSON, YAML:
		o, err := listObject(pods, p.keep)
		if err != nil {
			return err
		}
		return p.writeObject(o)
	case Name:
		var b strings.Builder
		for _, pod := range pods {
			b.WriteString("pod/" + pod.Name + "\n")
		}
		return p.write(b.String())
	default:
		if len(pods) == 0 {
			return nil
		}
		p.column = p.workloads && p.format == Wide && slices.ContainsFunc(pods, func(pod *corev1.Pod) bool { return ws[pod.UID] != nil })
		rows := [][]string{p.headerRow(false)}
		for _, pod := range pods {
			rows = append(rows, p.row(pod, ws[pod.UID]))
		}
		return p.write(p.table.format(rows...))
	}
}

// PrintPod prints one pod: a table with a header, a Kubernetes Pod object
// for JSON and YAML, its name for Name.
func (p *Printer) PrintPod(pod *corev1.Pod) error {
	return p.PrintPodWorkload(pod, nil)
}

// PrintPodWorkload is PrintPod whose Wide table, WithWorkloads, prints the
// pod's workload w.
func (p *Printer) PrintPodWorkload(pod *corev1.Pod, w *podsv1alpha1.PodWorkload) error {
	switch p.format {
	case JSON, YAML:
		o, err := object(pod, p.keep)
		if err != nil {
			return err
		}
		return p.writeObject(o)
	default:
		return p.PrintListWorkloads([]*corev1.Pod{pod}, map[types.UID]*podsv1alpha1.PodWorkload{pod.UID: w})
	}
}

// PrintEvent prints one watch event: a table row with a leading EVENT
// column, a {type, object} document for JSON and YAML (without object for
// SYNCED), or "TYPE pod/NAME" for Name. In the table formats the rows of
// the initial snapshot are held until the SYNCED event and then printed
// together, after a header, so that they align; later rows are printed at
// once.
func (p *Printer) PrintEvent(ev client.Event) error {
	typ := ev.Type.String()
	switch p.format {
	case JSON, YAML:
		doc := map[string]any{"type": typ}
		if ev.Pod != nil {
			o, err := object(ev.Pod, p.keep)
			if err != nil {
				return err
			}
			doc["object"] = o
		}
		if p.format == YAML {
			b, err := marshalYAML(doc)
			if err != nil {
				return err
			}
			return p.write("---\n" + string(b))
		}
		b, err := marshalJSON(struct {
			Type   string         `json:"type"`
			Object map[string]any `json:"object,omitempty"`
		}{typ, asMap(doc["object"])})
		if err != nil {
			return err
		}
		return p.write(string(b))
	case Name:
		if ev.Pod == nil {
			return p.write(typ + "\n")
		}
		return p.write(typ + " pod/" + ev.Pod.Name + "\n")
	default:
		if len(p.table.widths) == 0 {
			p.table.widths = []int{len("MODIFIED")} // the widest event type
		}
		if !p.synced {
			// The snapshot's rows have the column until SYNCED tells
			// whether any has a workload.
			p.column = p.workloads && p.format == Wide
		}
		row := []string{typ}
		if ev.Pod != nil {
			row = append(row, p.row(ev.Pod, ev.Workload)...)
			p.heldWorkload = p.heldWorkload || ev.Workload != nil
		}
		if p.synced {
			return p.write(p.table.format(row))
		}
		p.held = append(p.held, row)
		if ev.Type != client.Synced {
			return nil
		}
		p.synced = true
		if p.column && !p.heldWorkload {
			p.column = false
			for i, r := range p.held {
				if len(r) > 1 {
					p.held[i] = r[:len(r)-1]
				}
			}
		}
		rows := append([][]string{p.headerRow(true)}, p.held...)
		p.held = nil
		return p.write(p.table.format(rows...))
	}
}

// asMap returns v as a map, or nil.
func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

// headerRow returns the table header, with the EVENT column for watches.
func (p *Printer) headerRow(event bool) []string {
	h := []string{"NAMESPACE", "NAME", "READY", "STATUS", "RESTARTS", "AGE"}
	if p.format == Wide {
		h = append(h, "IP", "NODE", "UID")
		if p.column {
			h = append(h, "WORKLOAD")
		}
	}
	if event {
		h = append([]string{"EVENT"}, h...)
	}
	return h
}

// row returns the table row of pod, whose workload is w.
func (p *Printer) row(pod *corev1.Pod, w *podsv1alpha1.PodWorkload) []string {
	s := Summarize(pod, p.now())
	r := []string{pod.Namespace, pod.Name, s.Ready, s.Status, s.Restarts, s.Age}
	if p.format == Wide {
		ip := "<none>"
		if len(pod.Status.PodIPs) > 0 && pod.Status.PodIPs[0].IP != "" {
			ip = pod.Status.PodIPs[0].IP
		} else if pod.Status.PodIP != "" {
			ip = pod.Status.PodIP
		}
		node := pod.Spec.NodeName
		if node == "" {
			node = "<none>"
		}
		uid := string(pod.UID)
		if uid == "" {
			uid = "<none>"
		}
		r = append(r, ip, node, uid)
		if p.column {
			r = append(r, WorkloadString(w))
		}
	}
	return r
}

// writeObject writes o as JSON or YAML.
func (p *Printer) writeObject(o map[string]any) error {
	var b []byte
	var err error
	if p.format == YAML {
		b, err = marshalYAML(o)
	} else {
		b, err = marshalJSON(o)
	}
	if err != nil {
		return err
	}
	return p.write(string(b))
}

// write writes s with one Write.
func (p *Printer) write(s string) error {
	_, err := io.WriteString(p.w, s)
	return err
}
