// Package policy decides what wincompat does to a Pod or to the pod template of a workload. Decide
// takes the typed object, the facts of its namespace and, in server mode, of the cluster (Facts), and
// the Policy; it changes the object in place and returns every Change it made. Everything wincompat
// shows or stores is rendered from those values: the change record, admission warnings, audit
// annotations, metrics and `wincompat mutate --explain`.
//
// The package is pure: no client-go, no controller-runtime, no HTTP; it does no I/O, reads no clock and
// calls no cluster or registry (k8s.io/api and k8s.io/apimachinery give it its types). What a decision
// needs from outside arrives in Facts: the cluster's node builds, RuntimeClasses and taints, read in the
// server by webhook/scheduling and nil offline, and what registries say of the pod's images. So the
// server, `wincompat mutate` and the tests decide alike, and policy/admissionpolicy can render the part
// that needs no cluster state from the same tables as MutatingAdmissionPolicies.
//
// Where things are decided, by file name (each _test.go beside its file):
//   - decide.go: the entry, Decide, and the order a pod's decisions run in; annotations.go: the labels
//     and annotations wincompat reads and writes.
//   - placement_*: which objects are Windows ones and where they may go. placement_scope.go: which
//     namespaces and objects wincompat acts on (Policy.Scope), whether a pod spec is a Windows one and
//     what a taint on a Windows node means, exported so that the webhook and the audit ask the same
//     questions; placement_trigger.go: the Windows trigger (spec.os, node constraints, the namespace's
//     default-os; NodeOSLabels); placement_optin.go: the namespace labels plausibly meant to opt in that
//     do not (NamespaceOptInMistakes), which the audit, the webhook's opt-in check and offline mutate
//     name; placement_linux.go: the Linux-by-default pin; placement_taints.go: the
//     tolerations of Windows nodes' taints.
//   - strip.go: the strip table, the Linux-only fields the API server rejects on a Windows pod (it
//     drives stripping, the README's table and the tests); strip_injectors.go: the opt-outs of sidecar
//     injectors that would add Linux containers.
//   - rewrite.go: what else is changed for Windows (the non-root intent, mount propagation, stop
//     signals, Pod Security's restricted level); rewrite_narrow.go: the rewrites the policy opts into
//     (a non-admin user for runAsNonRoot, memory limits).
//   - build*: the Windows build decision. build_source.go: the ordered sources of a pod's build;
//     build.go: the catalog and the build an image tag names; build_images.go: what registries and tags
//     say of the pod's images (build_imagerequest.go: what a review asks of the registries);
//     build_compat.go: which node builds run an image (containerd's rule); build_check.go: which
//     node builds could run a pod (what `wincompat audit --builds` asks); build_revision.go: the
//     Windows patch level of images and nodes; build_hyperv.go: Hyper-V isolation where no node runs
//     the images in process isolation;
//     build_schedule.go: the nodeSelector or affinity, tolerations and RuntimeClass that carry the
//     choice.
//   - readiness*: what the API server accepts and a Windows node then cannot do. readiness.go: the
//     table (memory without limits, runAsNonRoot with no Windows user, subPath, volume modes and
//     sources), each row a warning on pods after every rewrite; readiness_template.go: what a
//     workload's pod template is warned of for the pods it will make; readiness_heuristics*.go: Linux
//     commands, host paths and partial Service names.
//   - rules.go: the rules table, the rule each Change comes from (a strip-table row, a policy key, a
//     rewrite, a build source, a readiness row), which `wincompat mutate --explain` shows.
//   - the change record (record*.go): Change (record_change.go) and its encoding in the
//     wincompat.io/changes annotations (record_codec.go writes it, record_decode.go reads it: rule codes
//     instead of prose, the strips of one object as one entry, what the tables give back left out),
//     which later passes and the audit read back; record_severity.go: what a change asks of the
//     user (info or warning) and the order warnings come in; record_news.go: what a record gained in
//     one request (the admission policies' changes, which the webhook reports as warnings);
//     record_notkept.go: the marker for an old value the admission policies could not keep;
//   - policyfile*: the Policy itself. policyfile.go: its keys, Load and Default (from default.yaml,
//     printed by `wincompat policy`); policyfile_validate.go: its checks; policyfile_mirrors.go: the
//     registry mirrors, in containerd hosts.toml's order and capabilities; policyfile_jsonschema.go and
//     policyfile_chartschema.go: the chart's JSON Schema of it, with the checks of single values. The strict YAML reader is the leaf package strictyaml.
//
// README.md in this directory describes every change wincompat makes and why.
package policy
