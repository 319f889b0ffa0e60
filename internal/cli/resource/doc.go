// Package resource is what the deletion doctor's verbs (why, plan, orphans)
// share to read a cluster: the clients, resolving a KIND/NAME argument to
// one object with cli-runtime's resource.Builder (as kubectl does), and
// gathering metadata-only inventories of many resources in parallel.
package resource
