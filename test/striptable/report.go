package striptable

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// The gate settings a report is keyed by: each release's defaults, and every alpha and beta gate on.
const (
	GatesDefault = "default"
	GatesAll     = "all alpha and beta"
)

// Report is what one release's API server said of the probes, as TestStripTableProbe keeps it in
// test/e2e/releases/testdata/striptable/<version>.json and test/k8s/README.md's table and the demo read it.
type Report struct {
	Version string `json:"version"`
	// Probes counts the probes sent per gate setting.
	Probes map[string]int `json:"probes"`
	// Refused lists, per gate setting, the probes the API server refused for Windows and admitted for
	// Linux: each must be handled by wincompat.
	Refused map[string][]Refusal `json:"refused"`
	// Unprobed are the fields whose probes the API server refused for Linux and with no OS too, with the
	// first refusal: their values prove nothing about Windows. A reviewer reads them for fields the walk
	// should give a better value.
	Unprobed map[string]string `json:"unprobed"`
	// EphemeralForbidden are the fields of an ephemeral container the API server refuses whatever the
	// operating system (ports, probes, lifecycle, resources): nothing under them is probed.
	EphemeralForbidden []string `json:"forbiddenInEphemeralContainers"`
	// Upstream compares what the probe found with Kubernetes' own list of OS-specific pod fields.
	Upstream UpstreamCrossCheck `json:"upstreamTestValidateOSFields"`
}

// UpstreamCrossCheck sets the probe beside TestValidateOSFields of the same release. Where the two differ
// the report says so; the API server's answer is what wincompat acts on.
type UpstreamCrossCheck struct {
	// OSSpecific counts the fields the upstream test lists as OS-specific.
	OSSpecific int `json:"osSpecific"`
	// AdmittedForWindows are listed as OS-specific, yet no probe under them was refused on a Windows pod:
	// fields for Windows, or that only Linux pods may not carry.
	AdmittedForWindows []string `json:"osSpecificAdmittedForWindows"`
	// RefusedNotListed were refused on a Windows pod, yet the upstream test counts them OS-neutral: they
	// are validated per OS outside its list, which is why the probe asks the API server.
	RefusedNotListed []string `json:"refusedForWindowsNotListed"`
	// Skipped are listed under a part of the pod spec the walk leaves out, with the walk's reason.
	Skipped map[string]string `json:"skipped"`
}

// Refusal is a field the API server refused on a Windows pod, with the values refused.
type Refusal struct {
	Field   string `json:"field"`
	Value   string `json:"-"`
	Values  string `json:"values"` // the values refused, joined by spaces
	Handled bool   `json:"handledByWincompat"`
}

// ReadReports reads every release's report in dir, in the order of their file names.
func ReadReports(dir string) ([]Report, error) {
	files, err := filepath.Glob(filepath.Join(dir, "v*.json"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no strip-table probe reports in %s", dir)
	}
	reports := make([]Report, 0, len(files))
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var r Report
		if err := json.Unmarshal(raw, &r); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		reports = append(reports, r)
	}
	return reports, nil
}
