package conformance_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/podsapi/podsapi/conformance"
)

func TestJSONReportCounts(t *testing.T) {
	rep := &conformance.Report{SuiteVersion: conformance.Version, Results: []conformance.Result{
		{ID: "a", Status: conformance.Passed}, {ID: "b", Status: conformance.Passed},
		{ID: "c", Status: conformance.Failed}, {ID: "d", Status: conformance.Skipped},
		{ID: "e", Status: conformance.KnownFailure},
	}}
	var b bytes.Buffer
	if err := rep.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	var got struct {
		SuiteVersion string               `json:"suiteVersion"`
		Results      []conformance.Result `json:"results"`
		Counts       conformance.Counts   `json:"counts"`
	}
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	want := conformance.Counts{Total: 5, Passed: 2, Failed: 1, Skipped: 1, KnownFailures: 1}
	if got.Counts != want || len(got.Results) != 5 || got.SuiteVersion != conformance.Version {
		t.Errorf("JSON report: counts %+v, %d results, suite %q; want %+v, 5, %q", got.Counts, len(got.Results), got.SuiteVersion, want, conformance.Version)
	}
}
