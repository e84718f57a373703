package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
)

// results are the measurements of one run of the bench, by name, lower is
// better for each.
type results map[string]float64

// benchJSON is the part of bench --json that is compared: our server's
// figures (the baselines are the same code on both sides).
type benchJSON struct {
	Rows []struct {
		Op          string  `json:"op"`
		Impl        string  `json:"impl"`
		Pods        int     `json:"pods"`
		Concurrency int     `json:"concurrency"`
		MedianUs    float64 `json:"medianUs"`
		CPUUs       float64 `json:"serverCpuUsPerRequest"`
		Allocs      float64 `json:"serverAllocsPerRequest"`
	} `json:"rows"`
	Watch []struct {
		Impl        string  `json:"impl"`
		Pods        int     `json:"pods"`
		Watchers    int     `json:"watchers"`
		Masks       int     `json:"masks"`
		DelayMedian float64 `json:"delayMedianUs"`
		CPUUs       float64 `json:"serverCpuUsPerEvent"`
		Allocs      float64 `json:"serverAllocsPerEvent"`
	} `json:"watch"`
	Storms []struct {
		Impl     string  `json:"impl"`
		Pods     int     `json:"pods"`
		Watchers int     `json:"watchers"`
		SyncP50  float64 `json:"syncP50Ms"`
		CPU      float64 `json:"serverCpuSeconds"`
	} `json:"storms"`
	Selectors []struct {
		Name    string  `json:"name"`
		NsPerOp float64 `json:"nsPerOp"`
	} `json:"selectors"`
}

// readResults reads the measurements of our server from a bench --json
// file.
func readResults(path string) (results, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var j benchJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return j.results(), nil
}

func (j benchJSON) results() results {
	r := results{}
	for _, x := range j.Rows {
		if x.Impl != "ours" {
			continue
		}
		k := fmt.Sprintf("%s %d pods ×%d", x.Op, x.Pods, x.Concurrency)
		r[k+": median µs"], r[k+": CPU µs/call"], r[k+": allocs/call"] = x.MedianUs, x.CPUUs, x.Allocs
	}
	for _, x := range j.Watch {
		if x.Impl != "ours" {
			continue
		}
		k := fmt.Sprintf("watch %d pods, %d watchers, %d masks", x.Pods, x.Watchers, x.Masks)
		r[k+": delay median µs"], r[k+": CPU µs/event"], r[k+": allocs/event"] = x.DelayMedian, x.CPUUs, x.Allocs
	}
	for _, x := range j.Storms {
		if x.Impl != "ours" {
			continue
		}
		k := fmt.Sprintf("sync storm %d pods, %d watchers", x.Pods, x.Watchers)
		r[k+": p50 ms"], r[k+": CPU s"] = x.SyncP50, x.CPU
	}
	for _, x := range j.Selectors {
		r["selectors "+x.Name+": ns/op"] = x.NsPerOp
	}
	return r
}

// ratio is one measurement's new/old over the rounds.
type ratio struct {
	name             string
	median, min, max float64
	rounds           int
}

// compare pairs the rounds of old and new (round i with round i) and
// returns, for each measurement both sides have with a positive old value,
// the median, lowest and highest ratio new/old, in the order of names.
func compare(olds, news []results) []ratio {
	byName := map[string][]float64{}
	for i := range min(len(olds), len(news)) {
		for name, o := range olds[i] {
			n, ok := news[i][name]
			if !ok || o <= 0 || math.IsNaN(n) {
				continue
			}
			byName[name] = append(byName[name], n/o)
		}
	}
	var out []ratio
	for name, rs := range byName {
		slices.Sort(rs)
		out = append(out, ratio{name: name, median: median(rs), min: rs[0], max: rs[len(rs)-1], rounds: len(rs)})
	}
	slices.SortFunc(out, func(a, b ratio) int { return strings.Compare(a.name, b.name) })
	return out
}

// median returns the median of sorted values.
func median(s []float64) float64 {
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// writeTable writes the ratios as a Markdown table, with the median of the
// medians of each kind of measurement last.
func writeTable(w io.Writer, t []ratio) {
	fmt.Fprintln(w, "| measurement | new ÷ old (median) | lowest – highest | rounds |")
	fmt.Fprintln(w, "|---|---:|---:|---:|")
	kinds := map[string][]float64{}
	for _, r := range t {
		fmt.Fprintf(w, "| %s | %.2f | %.2f – %.2f | %d |\n", r.name, r.median, r.min, r.max, r.rounds)
		if i := strings.LastIndex(r.name, ": "); i >= 0 {
			kind := r.name[i+2:]
			kinds[kind] = append(kinds[kind], r.median)
		}
	}
	var names []string
	for k := range kinds {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		s := kinds[k]
		slices.Sort(s)
		fmt.Fprintf(w, "| **all %s** (median of %d) | **%.2f** | %.2f – %.2f | |\n", k, len(s), median(s), s[0], s[len(s)-1])
	}
}
