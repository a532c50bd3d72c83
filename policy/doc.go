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
// Where things are decided:
//   - scope and Windows-ness: which namespaces and objects wincompat acts on, whether a pod spec is a
//     Windows one (spec.os, its node constraints, the namespace's default-os) and which taints of
//     Windows nodes a Windows pod tolerates are each decided once here and exported, so that the webhook
//     and the audit ask the same questions;
//   - the strip table (strip.go): the Linux-only fields the API server rejects on a Windows pod; it
//     drives stripping, the README's table and the tests;
//   - the build decision: the ordered sources of a pod's Windows build (buildsource.go), which node
//     builds can run an image (compat.go, containerd's rule) and the scheduling that carries the choice
//     (schedule.go: nodeSelector or required affinity, tolerations, RuntimeClass);
//   - the rewrites that narrow a pod where the policy opts in (narrow.go): a non-admin user for
//     runAsNonRoot, memory limits from requests or a default;
//   - the readiness table (readiness.go): what the API server accepts and a Windows node then cannot
//     do (memory without limits, runAsNonRoot with no Windows user, subPath, volume modes and sources);
//     each row warns, on pods after every rewrite and on templates for the pods they will make;
//   - the rules table (rules.go): the rule each Change comes from (a strip-table row, a policy key, a
//     rewrite, a build source, a readiness row), which `wincompat mutate --explain` shows;
//   - registry mirrors (mirrors.go): where the image resolver reads a registry's images, in containerd
//     hosts.toml's order and capabilities, and the record of the mirror that answered;
//   - the change record (record*.go): Change (record_change.go) and its encoding in the
//     wincompat.io/changes annotations (record_codec.go writes it, record_decode.go reads it: rule codes
//     instead of prose, the strips of one object as one entry, what the tables give back left out),
//     which later passes and the audit read back;
//   - the Policy itself, its file and its defaults (default.yaml, printed by `wincompat policy`).
//
// README.md in this directory describes every change wincompat makes and why.
package policy
