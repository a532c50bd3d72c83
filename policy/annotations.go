package policy

// Labels and annotations wincompat reads and writes.
const (
	LabelEnabled   = "wincompat.io/enabled"
	LabelSkip      = "wincompat.io/skip"
	LabelDefaultOS = "wincompat.io/default-os"
	// LabelMode sets the mode (ModeEnforce, ModeWarn) of one namespace over the policy's.
	LabelMode = "wincompat.io/mode"
	// LabelOS is stamped LabelOS=windows on every Windows pod either engine admits, so that the leader
	// can watch those pods alone: a label selector is the one filter the API server applies to a pod
	// watch by content, and a cache of every pod would grow with the Linux majority of the cluster.
	LabelOS = "wincompat.io/os"

	AnnotationChanges         = "wincompat.io/changes"
	AnnotationTemplateChanges = "wincompat.io/template-changes"
	AnnotationBuild           = "wincompat.io/build"
	AnnotationBuildSource     = "wincompat.io/build-source"
	AnnotationVersion         = "wincompat.io/version"
	// AnnotationAdmissionPolicy is the version of the admission policies (policy/admissionpolicy) that
	// made a Windows pod valid. wincompat.io/version is the webhook's alone: a pod with this annotation
	// and without that one was admitted while the webhook did not answer, with no build decision.
	AnnotationAdmissionPolicy = "wincompat.io/admission-policy"

	labelPodSecurityEnforce = LabelPodSecurityEnforce
)

// The gate of gated placement (build_gate.go).
const (
	// SchedulingGate is the scheduling gate wincompat adds to a Windows pod whose build admission could
	// not decide: the scheduler leaves the pod alone until the leader has read its images, pinned the
	// build and removed the gate.
	SchedulingGate = "wincompat.io/build"
	// LabelGated=true marks the pods that carry SchedulingGate: no field selector finds gated pods, so
	// the leader watches this label, and holds nothing of any other pod.
	LabelGated = "wincompat.io/gated"
)
