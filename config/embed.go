// Package config holds teardown's install manifests (CRDs, RBAC, the lien
// ValidatingAdmissionPolicies) for kustomize and, embedded, for
// `teardown install`: one source for both.
package config

import "embed"

// Manifests are the YAML files `teardown install` applies, in the order of
// Files.
//
//go:embed crd/bases/*.yaml rbac/*.yaml policy/*.yaml manager/*.yaml
var Manifests embed.FS

// Files lists the manifests in apply order: CRDs and the namespace first,
// the policies last.
var Files = []string{
	"crd/bases/teardown.dev_liens.yaml",
	"crd/bases/teardown.dev_clusterliens.yaml",
	"crd/bases/teardown.dev_teardowns.yaml",
	"crd/bases/teardown.dev_trusts.yaml",
	"crd/bases/teardown.dev_ownerrules.yaml",
	"rbac/rbac.yaml",
	"policy/trust.yaml",
	"policy/lien-deny.yaml",
	"policy/lien-eviction.yaml",
	"policy/lien-tamper.yaml",
	"policy/lien-helm.yaml",
	"policy/lien-rights.yaml",
	"policy/owner-links.yaml",
	"policy/owner-rules.yaml",
	"policy/teardown-foreground.yaml",
	"policy/teardown-namespace.yaml",
	"policy/teardown-rights.yaml",
	"policy/controller-grants.yaml",
}

// ControllerFiles are the controller's Deployment, PodDisruptionBudget and
// metrics Service, applied after Files when an image is given.
var ControllerFiles = []string{"manager/manager.yaml"}
