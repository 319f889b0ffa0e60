// Package why is `teardown why KIND/NAME`: it explains why an object or a
// namespace is not gone (or, before a delete, what would hold it): each
// finalizer with the manager that set it and whether anything runs that
// will remove it, the namespace's remaining content grouped by kind, liens,
// unavailable APIServices, fail-closed webhooks without endpoints, and
// foreground deletion waiting on dependents. Gather reads the cluster once;
// Diagnose and Render are pure functions of what was gathered.
package why
