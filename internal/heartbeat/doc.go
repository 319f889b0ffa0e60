// Package heartbeat is the sign that teardown's controller runs, however it
// was started: a Lease, teardown-controller-heartbeat in the controller's
// namespace (the leader-election namespace, teardown-system by default),
// labelled teardown.dev/heartbeat, that the manager renews every 10
// seconds for 40 (the durations of a kubelet's node Lease) whether leader
// election is on or off.
//
// Leader election alone does not say it: with --leader-elect=false (a
// controller run from a workstation, as the docs and tests run it) there is
// no leader Lease, and outside the cluster there is no Deployment or Pod
// either. Conditions do not say it: an idle controller writes none, and a
// condition's lastTransitionTime moves only when its status does.
//
// The heartbeat is a runnable that needs leader election: it beats only in
// the replica that runs the controllers (the leader, or the one process
// when leader election is off), so a fresh heartbeat means finalizers are
// being removed, not merely that a standby is up. On a clean stop it expires
// the Lease at once, if it still holds it, so `teardown why` says "not
// running" right after the controller stopped instead of for 40 seconds.
//
// Who may write it matters: `teardown why` believes a heartbeat only in
// the namespace of the controller's own identity (teardown-system, or that
// of a service account the Trust names), where a tenant cannot write; a
// heartbeat elsewhere makes it say "unknown", never "running". One Lease,
// not one per replica: nothing accumulates as replicas come and go.
package heartbeat
