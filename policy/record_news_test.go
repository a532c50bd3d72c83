package policy

import (
	"slices"
	"strconv"
	"strings"
	"testing"
)

// newsPod is a chart's Windows pod: strips, a rewrite, the non-root intent, opt-outs and scheduling.
const newsPod = `{"metadata":{"annotations":{"seccomp.security.alpha.kubernetes.io/pod":"runtime/default"}},"spec":{"os":{"name":"windows"},"hostPID":true,
  "securityContext":{"runAsUser":1000,"fsGroup":2,"seccompProfile":{"type":"RuntimeDefault"}},
  "volumes":[{"name":"m","emptyDir":{"medium":"Memory"}}],
  "containers":[{"name":"app","image":"r.example/app:1","securityContext":{"privileged":true,"capabilities":{"add":["NET_ADMIN"]}},"volumeMounts":[{"name":"m","mountPath":"C:\\m"}]},
    {"name":"side","image":"r.example/side:1","securityContext":{"runAsUser":1000,"capabilities":{"drop":["ALL"]}}}]}}`

// What a pass reports is the same whether it changed the object itself or found the changes in the
// record another engine wrote in the same request: on CREATE every change of the record is news, and
// with nothing found the warnings are those of the decision that made them (warnings, which are
// findings a pass makes again, aside).
func TestRecordNewsReportsWhatTheRecordGained(t *testing.T) {
	d := decideJSON(t, Default(), newsPod, nil, nil)
	var made []Change
	for _, c := range d.Changes {
		if c.Action != Warn {
			made = append(made, AsRecordedInCEL(c))
		}
	}
	record := EncodeChanges(made)
	news := RecordNews(record, "")
	if len(news) != len(made) {
		t.Fatalf("%d changes of %d are news on CREATE: %+v", len(news), len(made), news)
	}
	want := Decision{Windows: true, Changes: made}.Warnings()
	got := Decision{Windows: true}.Reporting(news).Warnings()
	if !slices.Equal(got, want) {
		t.Errorf("the record reports\n %s\nthe decision that made it\n %s", strings.Join(got, "\n "), strings.Join(want, "\n "))
	}
	// What this pass found as well: one warning each.
	both := Decision{Windows: true, Changes: made}.Reporting(news).Warnings()
	if !slices.Equal(both, want) {
		t.Errorf("news and the same changes found report\n %s\nwant\n %s", strings.Join(both, "\n "), strings.Join(want, "\n "))
	}

	// UPDATE: nothing new in a record kept as it was, whatever it holds.
	if n := RecordNews(record, record); len(n) != 0 {
		t.Errorf("a record kept as stored gives news: %+v", n)
	}
	// The admission policies strip again what an upgrade sent again, and append its entry again: that
	// entry is news, once; the rest was there.
	again := record[:len(record)-2] + `,["s","spec.containers[side]",{"runAsUser":1000}]]}`
	n := RecordNews(again, record)
	if len(n) != 1 || n[0].Path != "spec.containers[side].securityContext.runAsUser" {
		t.Fatalf("an entry appended again gives %+v, want the strip of side's runAsUser", n)
	}
	if got := (Decision{Windows: true}).Reporting(n).Warnings(); len(got) != 1 || !strings.Contains(got[0], "removed securityContext.runAsUser from containers[side]") {
		t.Errorf("the strip sent again reports %q", got)
	}
	// A stored record that does not parse holds nothing: all of the new one is news.
	if n := RecordNews(record, "not a record"); len(n) != len(made) {
		t.Errorf("over an unreadable stored record, %d news, want %d", len(n), len(made))
	}
	// One that does not parse says nothing.
	if n := RecordNews(`{"v":3,"c":[["s"`, ""); n != nil {
		t.Errorf("an unreadable record gives news: %+v", n)
	}
}

// A record is its requester's until validation: what it gives is bounded as the webhook's own record
// is, and what it does not say was made in this request (warnings, changes no rule of ours makes) is
// not reported.
func TestRecordNewsIsBounded(t *testing.T) {
	var b strings.Builder
	b.WriteString(RecordPrefix + `"c":[`)
	for i := range 1000 {
		// A thousand reasons for one rule and field.
		b.WriteString(`["r","spec.dnsPolicy","ClusterFirstWithHostNet","ClusterFirst","dns-policy","forged ` + strconv.Itoa(i) + `"],`)
	}
	long := strings.Repeat("n", 10_000)
	b.WriteString(`["w","spec.containers[a].image",null,null,"linux-only-image","forged warning"],`)
	b.WriteString(`["r","spec.somewhere","a","b","dns-policy","a field dns-policy never changes"],`)
	b.WriteString(`["r","spec.x","a","b","no-such-rule","forged rule"],`)
	b.WriteString(`["s","spec.containers[` + long + `]",{"runAsUser":1}],`)
	b.WriteString(`["r","spec.dnsPolicy","ClusterFirstWithHostNet","ClusterFirst","dns-policy","` + strings.Repeat("r", 10_000) + `"]]}`)
	news := RecordNews(b.String(), "")
	warnings := Decision{Windows: true}.Reporting(news).Warnings()
	dns, size := 0, 0
	for _, w := range warnings {
		size += len(w)
		if strings.Contains(w, "dnsPolicy") {
			dns++
		}
		if strings.Contains(w, "forged warning") || strings.Contains(w, "forged rule") || strings.Contains(w, "never changes") {
			t.Errorf("reported: %s", w)
		}
	}
	if dns != maxFindingsPerRow {
		t.Errorf("%d kinds of dnsPolicy change reported, want the %d a rule records", dns, maxFindingsPerRow)
	}
	if size > (maxFindingsPerRow+2)*(maxNewsReasonBytes+2*maxNameBytes) {
		t.Errorf("the warnings of a forged record take %d bytes", size)
	}
	var runAsUser string
	for _, w := range warnings {
		if strings.Contains(w, "runAsUser") {
			runAsUser = w
		}
	}
	if runAsUser == "" || len(runAsUser) > 2*maxNameBytes || !strings.Contains(runAsUser, clipMark) {
		t.Errorf("the strip of a container of a 10,000-byte name reports %d bytes: %.100q", len(runAsUser), runAsUser)
	}
}

func TestClipPathNames(t *testing.T) {
	long := strings.Repeat("x", maxNameBytes+10)
	for _, c := range []struct{ in, want string }{
		{"spec.containers[app].securityContext.runAsUser", "spec.containers[app].securityContext.runAsUser"},
		{"spec.containers[" + long + "].securityContext.runAsUser", "spec.containers[" + clipName(long) + "].securityContext.runAsUser"},
		{"spec.containers[" + long + "].volumeMounts[" + long + "].mountPropagation", "spec.containers[" + clipName(long) + "].volumeMounts[" + clipName(long) + "].mountPropagation"},
		{"spec.containers[" + long, "spec.containers[" + long}, // unclosed: no name to clip
		{"]]" + long, "]]" + long},
	} {
		if got := clipPathNames(c.in); got != c.want {
			t.Errorf("clipPathNames(%.40q...) = %.60q..., want %.60q...", c.in, got, c.want)
		}
	}
}
