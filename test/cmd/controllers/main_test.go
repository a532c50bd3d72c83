package main

import (
	"reflect"
	"strings"
	"testing"
)

// --controllers takes kube-controller-manager's names and aliases, and refuses what this binary does not
// host rather than run without it.
func TestParseControllers(t *testing.T) {
	for _, tc := range []struct {
		value   string
		want    map[string]bool
		wantErr string
	}{
		{"garbage-collector-controller", map[string]bool{garbageCollectorName: true}, ""},
		{"garbagecollector,serviceaccount", map[string]bool{garbageCollectorName: true, serviceAccountName: true}, ""},
		{" serviceaccount-controller , ", map[string]bool{serviceAccountName: true}, ""},
		{"", nil, "names no controller"},
		{"garbagecollector,replicaset", nil, `unknown controller "replicaset"`},
		{"*", nil, "unknown controller"},
	} {
		got, err := parseControllers(tc.value)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%q: error %v, want one saying %q", tc.value, err, tc.wantErr)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%q: %v, %v; want %v", tc.value, got, err, tc.want)
		}
	}
}
