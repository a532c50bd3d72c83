// Package e2eutil holds what the end-to-end test packages under test/e2e share: a control plane with
// wincompat serving it (Cluster), the corpus, test nodes and placement oracles, the chart through helm,
// replicas of the real binary, and review requests. Each helper serves tests of more than one package;
// a helper one package uses stays in that package.
package e2eutil
