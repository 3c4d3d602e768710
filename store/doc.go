// Package store owns the gateway's durable state: one bbolt file, state.db, in the configured
// state_dir (SPEC.md §5, §9, §11, §13).
//
// # One owner
//
// Only this package opens state.db, and only one [Store] at a time, in one process, may hold it
// (SPEC.md §14). [Open] takes bbolt's exclusive file lock with a short timeout and, once it has
// it, writes state.db.owner beside the file (pid, host, start time, command line). A second Open
// — another gateway, a command run while the gateway is up, or a second Open in the same process
// — fails in about half a second with a [*LockedError] that names the file and the process in
// the owner record, and says to stop that gateway or use its admin API. Commands that only read
// may use Options.ReadOnly when no gateway runs.
//
// # Buckets
//
//   - meta: the layout version ("schema"); a file from a newer layout is refused. After
//     retention has pruned, also "audit_pruned": a copy of the last applied [Checkpoint].
//   - lockouts: server name → JSON [Lockout]. Mirrored in memory behind an atomic pointer to
//     an immutable snapshot, so the per-call check never reads the disk or takes a lock.
//   - audit: 8-byte big-endian Seq → the JSON of one [Record]. Keys only grow.
//   - approvals: id → JSON [Approval].
//   - pins: one nested bucket per server, tool name → JSON [Pin].
//
// # Durability
//
// bbolt's NoSync is never set: every transaction is fsynced before it returns. Lockouts,
// approval decisions and pins are written in their own transaction, so when PutLockout returns
// the lockout survives a crash; reading, checking and changing an approval happens in one
// transaction, which is what lets exactly one of many concurrent answers win.
//
// Audit throughput comes from group commit, not from weaker syncing. One writer goroutine owns
// the chain: it takes everything queued (up to 512 records), waits up to Options.AuditBatch for
// more when nobody is waiting on the batch, seals each record onto the chain and commits them
// all in one transaction, one fsync. [AuditLog.Append] returns at once; AppendSync and Flush
// return after their transaction commits. The gateway answers a call only after AppendSync of
// its record returned, so concurrent callers share fsyncs. A record may carry the id of a
// physical call's journal entry ([Record].EndsCall), which the same transaction removes: at
// every moment such a call has its journal entry or its record on disk. Close commits
// everything appended before it.
//
// # When the disk fails
//
// Every wait is bounded by Options.CommitTimeout. A write that fails (disk full, I/O error,
// read-only filesystem), a commit that has not returned for 2 s, or less free space than
// Options.MinFreeBytes makes [Store.Available] report an [*UnavailableError]; the gateway then
// refuses calls before dispatch. A lockout is put in force in memory before it is written, and
// one the disk refuses is kept pending and written by the store's watcher, which also probes
// the disk every 250 ms and ends the failure once a write succeeds. The audit writer keeps a
// refused batch and retries it; its queue (4,096 records) bounds what is held in memory.
//
// # The hash chain
//
// Each record is stored as its encoding/json encoding, with Hash as the last field. Hash is the
// lowercase hex SHA-256 of that encoding with Hash set to "" (that is, of the stored bytes with
// the 64 hex digits removed), and Prev is the previous record's Hash ("" for record 1). Hashing
// the stored bytes, not a re-encoding of the parsed record, means a change to any byte — even one
// that still parses to the same values — breaks the chain at that record. [Store.AuditVerify]
// recomputes every hash and link and reports the first record that does not verify. After a
// restart the chain continues from the last stored record.
//
// # Retention
//
// With Options.Retention, a pruner owned by the Store removes the oldest audit records in
// short batches (retention.go). Each batch is preceded by a [RecordCheckpoint] record on the
// chain naming what it removes and the hash the first kept record links to; verification starts
// there (checkpoint.go). Texts in a record are cut to [MaxTextBytes] when it is sealed
// (bounds.go), and [Compact] shrinks the file offline.
package store
