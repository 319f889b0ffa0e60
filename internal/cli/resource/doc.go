// Package resource is what the deletion doctor's verbs (why, plan, orphans)
// share to read a cluster: parsing KIND/NAME arguments as kubectl does,
// resolving them against discovery, and gathering metadata-only inventories
// of many resources in parallel.
package resource
