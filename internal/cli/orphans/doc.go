// Package orphans is `teardown orphans`: an audit for garbage that nothing
// will ever collect: dependents whose owner (a native ownerReference or a
// teardown owner link) is gone, objects Helm installed outside their
// release namespace whose release namespace or release record is gone, and
// objects held Terminating by a finalizer nothing runs to remove. Gather
// lists metadata only, in parallel; Find and Render are pure.
package orphans
