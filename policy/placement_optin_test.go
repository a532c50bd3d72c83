package policy

import (
	"strings"
	"testing"
)

// TestNamespaceOptInMistakes: what a person plausibly types to opt a namespace in is named with its
// fix; a deliberate no, the real labels and other tools' labels are not.
func TestNamespaceOptInMistakes(t *testing.T) {
	type m = OptInMistake
	for _, tc := range []struct {
		labels map[string]string
		want   []m
	}{
		{map[string]string{LabelEnabled: "true"}, nil},
		{map[string]string{LabelEnabled: "true", LabelDefaultOS: "windows", LabelMode: "warn"}, nil},
		{nil, nil},
		{map[string]string{"kubernetes.io/metadata.name": "web", "app": "x"}, nil},
		// a deliberate no, however it is spelt
		{map[string]string{LabelEnabled: "false"}, nil},
		{map[string]string{LabelEnabled: "False"}, nil},
		{map[string]string{LabelEnabled: "NO"}, nil},
		{map[string]string{LabelEnabled: "0"}, nil},
		{map[string]string{LabelEnabled: "off"}, nil},
		{map[string]string{LabelEnabled: "disabled", LabelDefaultOS: "windows"}, nil},
		{map[string]string{"wincompat/enabled": "false"}, nil},
		// a yes that is not "true"
		{map[string]string{LabelEnabled: "yes"}, []m{{EnabledValue, LabelEnabled, "yes", LabelEnabled, "true"}}},
		{map[string]string{LabelEnabled: "True"}, []m{{EnabledValue, LabelEnabled, "True", LabelEnabled, "true"}}},
		{map[string]string{LabelEnabled: "TRUE"}, []m{{EnabledValue, LabelEnabled, "TRUE", LabelEnabled, "true"}}},
		{map[string]string{LabelEnabled: "1"}, []m{{EnabledValue, LabelEnabled, "1", LabelEnabled, "true"}}},
		{map[string]string{LabelEnabled: "on"}, []m{{EnabledValue, LabelEnabled, "on", LabelEnabled, "true"}}},
		{map[string]string{LabelEnabled: "y"}, []m{{EnabledValue, LabelEnabled, "y", LabelEnabled, "true"}}},
		{map[string]string{LabelEnabled: "enabled"}, []m{{EnabledValue, LabelEnabled, "enabled", LabelEnabled, "true"}}},
		{map[string]string{LabelEnabled: "ture"}, []m{{EnabledValue, LabelEnabled, "ture", LabelEnabled, "true"}}},
		{map[string]string{LabelEnabled: ""}, []m{{EnabledValue, LabelEnabled, "", LabelEnabled, "true"}}},
		// a key close to wincompat's
		{map[string]string{"wincompat.io/enable": "true"}, []m{{NearKey, "wincompat.io/enable", "true", LabelEnabled, "true"}}},
		{map[string]string{"wincompat/enabled": "true"}, []m{{NearKey, "wincompat/enabled", "true", LabelEnabled, "true"}}},
		{map[string]string{"wincompat.com/enabled": "yes"}, []m{{NearKey, "wincompat.com/enabled", "yes", LabelEnabled, "true"}}},
		{map[string]string{"wincompat-enabled": "true"}, []m{{NearKey, "wincompat-enabled", "true", LabelEnabled, "true"}}},
		{map[string]string{"wincompat": "true"}, []m{{NearKey, "wincompat", "true", LabelEnabled, "true"}}},
		{map[string]string{"wincompat.io/Enabled": "true"}, []m{{NearKey, "wincompat.io/Enabled", "true", LabelEnabled, "true"}}},
		{map[string]string{"wincomapt.io/enabled": "true"}, []m{{NearKey, "wincomapt.io/enabled", "true", LabelEnabled, "true"}}},
		{map[string]string{LabelEnabled: "true", "wincompat.io/default_os": "windows"},
			[]m{{NearKey, "wincompat.io/default_os", "windows", LabelDefaultOS, "windows"}}},
		{map[string]string{LabelEnabled: "true", "wincompat.io/modes": "warn"}, []m{{NearKey, "wincompat.io/modes", "warn", LabelMode, "warn"}}},
		// the real label is there too: the near one is noise
		{map[string]string{LabelEnabled: "true", "wincompat/enabled": "true"}, nil},
		// wincompat's own keys are never near keys of each other
		{map[string]string{LabelEnabled: "true", LabelSkip: "true", LabelOS: "windows"}, nil},
		// the other labels without the enable label (mutate --namespace-labels wincompat.io/default-os=windows)
		{map[string]string{LabelDefaultOS: "windows"}, []m{{NotEnabled, LabelDefaultOS, "windows", LabelEnabled, "true"}}},
		{map[string]string{LabelDefaultOS: "windows", LabelMode: "warn"}, []m{{NotEnabled, LabelDefaultOS, "windows", LabelEnabled, "true"}}},
		// Linux by default needs no opt-in
		{map[string]string{LabelDefaultOS: "linux"}, nil},
		{map[string]string{LabelDefaultOS: "linux", LabelMode: "warn"}, nil},
		{map[string]string{LabelMode: "warn"}, nil},
		{map[string]string{LabelDefaultOS: "windows", "wincompat/enabled": "true"}, []m{{NearKey, "wincompat/enabled", "true", LabelEnabled, "true"}}},
		// both a value and a key
		{map[string]string{LabelEnabled: "yes", "wincompat.io/default_os": "windows"}, []m{
			{NearKey, "wincompat.io/default_os", "windows", LabelDefaultOS, "windows"}, {EnabledValue, LabelEnabled, "yes", LabelEnabled, "true"}}},
	} {
		got := NamespaceOptInMistakes(tc.labels)
		if len(got) != len(tc.want) {
			t.Errorf("%v: got %v, want %v", tc.labels, got, tc.want)
			continue
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("%v: got %+v, want %+v", tc.labels, got[i], tc.want[i])
			}
		}
	}
}

// TestOptInMistakeText: each kind says the label, the fix and a command that makes it.
func TestOptInMistakeText(t *testing.T) {
	for _, tc := range []struct {
		labels        map[string]string
		text, command string
	}{
		{map[string]string{LabelEnabled: "yes"},
			`label wincompat.io/enabled=yes does not opt the namespace in: only the value "true" does; set wincompat.io/enabled=true`,
			"kubectl label namespace web wincompat.io/enabled=true --overwrite"},
		{map[string]string{"wincompat/enabled": "yes"},
			"label wincompat/enabled=yes is not one wincompat reads: did you mean wincompat.io/enabled=true?",
			"kubectl label namespace web wincompat/enabled- wincompat.io/enabled=true"},
		{map[string]string{LabelDefaultOS: "windows"},
			"label wincompat.io/default-os=windows takes effect only in a namespace labelled wincompat.io/enabled=true; set it too",
			"kubectl label namespace web wincompat.io/enabled=true"},
	} {
		got := NamespaceOptInMistakes(tc.labels)
		if len(got) != 1 || got[0].String() != tc.text || got[0].Command("web") != tc.command {
			t.Errorf("%v: got %v", tc.labels, got)
			continue
		}
	}
}

// TestNamespaceOptInMistakesBounded: hostile labels give at most four mistakes of bounded length.
func TestNamespaceOptInMistakesBounded(t *testing.T) {
	labels := map[string]string{LabelEnabled: strings.Repeat("y", 10000), strings.Repeat("k", 100000): "true"}
	for i := range 50 {
		labels["wincompat"+strings.Repeat("-", i)+"/mode"] = strings.Repeat("é", 1000)
	}
	got := NamespaceOptInMistakes(labels)
	if len(got) != maxOptInMistakes {
		t.Fatalf("%d mistakes, want %d", len(got), maxOptInMistakes)
	}
	for _, m := range got {
		if len(m.Key) > maxLabelKey || len(m.Value) > maxLabelValue || len(m.FixValue) > maxLabelValue {
			t.Errorf("unbounded: %d, %d", len(m.Key), len(m.Value))
		}
	}
}
