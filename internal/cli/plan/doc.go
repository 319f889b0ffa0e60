// Package plan is `teardown plan KIND/NAME`: a dry run of a delete. It
// shows the tree of what would be removed (native ownerReferences with the
// chosen propagation, teardown owner links, a namespace's content), what
// would be kept or orphaned (deletion policies, other owners), what would
// block (liens, finalizers nobody removes, fail-closed webhooks without
// endpoints) and in which order things would go, confirmed by the server's
// dry-run where the API supports it. Gather reads; Build and the renderers
// (tree, json, dot, mermaid) are pure.
package plan
