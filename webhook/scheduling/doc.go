// Package scheduling is wincompat's scheduling helper: everything that reads the cluster or a registry so
// that policy.Decide can place a Windows pod on a node that can run it. The pure decisions stay in
// policy/; the subpackages gather the facts.
//
//   - inventory: the Windows builds of ready nodes, and the RuntimeClasses that exist (informer cache).
//   - runtimeclass: keeps one RuntimeClass per catalog build (leader only).
//   - registry: reads the Windows builds of container images from their registries (manifests only),
//     cached and bounded by a deadline under the webhook's timeout.
//   - misplaced: after admission, Windows pods that fail on their node for reasons of OS or build: an
//     Event, a gauge and, opted in, their deletion for their controllers to make again (leader only).
//   - gated: pods admitted behind the scheduling gate while their registry had not answered: their
//     images read off the admission path, the build pinned, the gate removed (leader only).
//   - ungate: releases every pod behind wincompat's gate when wincompat goes (`wincompat ungate`, the
//     chart's uninstall hook).
package scheduling
