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
//     "wal_size": the size the write-ahead file was made with; "wal_state": "open" from a
//     writable Open until a Close that emptied the file, then "closed".
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
// Audit records are made durable in a write-ahead file, audit.wal beside state.db (wal.go),
// and moved into the audit bucket in the background. A record is bounded, its arguments
// checked and compacted and the whole encoded in the caller's goroutine as it is queued; what
// must happen in order is only to put it on the chain: its sequence number in front, the
// previous record's hash and its own (one SHA-256) at the end. One committer at a time, the
// leader, takes everything queued (up to 512 records), seals each record onto the chain,
// appends the records' stored bytes to the file as frames (length, CRC-32C, sequence number,
// the sequence number of the batch's first record, the EndsCall id, the bytes) in one write,
// and syncs the file's data once: on Linux with one O_DIRECT|O_DSYNC write of the blocks the
// frames cover (the file's earlier bytes in the first block kept from the last write), which
// returns when they are on the disk; where the filesystem does not take direct writes, with a
// write into the page cache and fdatasync. A caller of AppendSync or Flush that finds
// nobody committing leads, in its own goroutine: while other calls are in flight
// ([AuditLog.Coming]) it yields once (runtime.Gosched), so that calls ready to run and about to
// append join its batch, then commits the queue, its own record with
// it, and hands the queue to the writer goroutine if more was queued meanwhile; callers that find
// a commit under way wait for the leader to release them, so concurrent callers share syncs.
// The writer goroutine commits the records nobody waits on ([AuditLog.Append] returns at once;
// the writer waits up to Options.AuditBatch for more when nobody is waiting), what was queued
// while a caller committed, and every batch the disk refused; while the store is unavailable,
// callers leave all commits to it. AppendSync and Flush return after the sync of their batch.
// The gateway answers a call only after AppendSync of its record returned. The file is written
// full of zeros when it is created (16 MiB, less on a small filesystem, see walMaxSize), so
// that the sync rewrites blocks the file already owns and costs no journal commit of the
// filesystem.
//
// Once a batch is durable and its waiters are released, the writer passes each of its records,
// in order, to Options.OnAuditDurable, if set: the stored bytes, the sequence number and the
// hash, outside every lock of the store. The gateway uses it to export audit records as OTLP
// log records (package telemetry), which must not slow the writer: the hook only hands the
// record on. It sees each record this process made durable once; the records Open moves from
// the file were made durable (and handed on) by the process before, and a crash between a
// batch's sync and the hook loses only the hand-off, never a record.
//
// A mover goroutine puts the records of the file into the audit bucket 50 ms after the first of
// them was synced, or at once when 1,024 wait or the file is half full, many records per
// transaction (up to 4,096); while nothing waits it sleeps. The
// transaction that puts a record with [Record].EndsCall also removes that physical call's
// journal entry, so at every moment such a call has its journal entry in state.db or its record
// in the file or in state.db. Once every record in the file is in state.db, the writer starts
// the file again from its start: the frames left after the new ones are recognised because their
// sequence numbers do not follow. An acknowledged record is thus always in the file (synced) or
// in state.db (synced).
//
// [Open] reads the file before anything relies on the chain tail or the journal: the frames
// that continue state.db's chain (each checked against its CRC, its hash and its prev link) are
// put into state.db, with their journal removals, before the crash journal is turned into
// lockouts, and the file is emptied. The run of frames ends at the first that is zero, does not
// check or does not follow. A frame of a later batch after a frame that does not check (a batch
// is only written once the one before it was synced) means acknowledged records are damaged:
// Open refuses with a [*CorruptWALError] naming the file and what to do; so it does with a
// file whose records do not continue state.db's chain (another state.db's).
//
// Damage to the end of the file is found as far as it can be (walgap.go). A frame that does
// not check where the run ends is either the batch a crash cut while it was written, never
// acknowledged, or damage to the last batch, acknowledged: the two cannot be told apart, so a
// torn final frame is always reported as a possible gap, even after a real crash. A crash
// never shortens or removes the file (it is written in place), so a file shorter than
// "wal_size", or missing, while "wal_state" says the last gateway did not stop cleanly, is
// damage that may have lost the records acknowledged since the last move. In each case Open
// logs at ERROR what it found, that records after the last one found may be lost (at most how
// many bytes of them) and what to do, and, writable, appends a [RecordAuditGap] record saying
// the same, before anything else, so the gap is on the chain: `mcp-gateway audit`, the console
// and an export show it, and [Store.AuditVerifyGaps] names it (the chain itself continues
// across it; the records after it take the sequence numbers of those lost). A read-only Open
// reports it through [Store.WALGap] and writes nothing. After a clean stop the file holds
// nothing that is not in state.db: a short or missing file is then only a warning, and is made
// again. Not found: the last frames zeroed in place, or the magic number at the start of the
// first of them damaged, in a file of its full size; that looks like a batch never written.
//
// Readers see every durable record: AuditScan, AuditExport, AuditLast and AuditVerify walk the
// audit bucket and then the records still in the file (kept in memory by the writer until they
// are moved); the pruner, which deletes from the bucket, moves the file's records first. A
// read-only Open writes nothing: it reads the file's records into memory for those readers, and
// leaves out of the lockouts it shows the journal entries whose end record is in the file. A
// record larger than the whole file is put into state.db directly, after what the file holds.
// Close moves everything into state.db and empties the file, zeroing all of it that frames were
// written to (so that a record retention prunes from state.db, and compact then removes from
// its free pages, is nowhere on the disk after a clean stop); what state.db refuses then stays
// in the file, synced, for the next Open, and Close says so.
//
// # When the disk fails
//
// Every wait is bounded by Options.CommitTimeout; a caller that leads a commit waits for its
// own write and sync, which no timer can cut short, so on a disk that hangs that one caller
// waits for the disk while the others' waits end in time. A write that fails (disk full, I/O
// error, read-only filesystem), a commit that has not returned for 2 s, or less free space
// than Options.MinFreeBytes makes [Store.Available] report an [*UnavailableError]; the gateway
// then refuses calls before dispatch, and while a write failure or the free space is the
// reason, callers leave every commit to the writer goroutine. A lockout is put in force in
// memory before it is written, and one the disk refuses is kept pending and written by the
// store's watcher, which also probes the disk every 250 ms and ends the failure once a write
// succeeds. The audit writer goroutine keeps a refused batch (a caller that led hands its batch
// over) and retries it; its queue (4,096 records) bounds what is held in memory. A write or
// sync of the write-ahead file that fails is such a refused batch. A move into state.db that
// fails is retried with backoff by the mover, and meanwhile the file goes on taking records:
// the store stays available until the file is full, and then the leader's batch fails (the
// leader moves the file's records itself when it finds the file full), so the store reports
// the failure and calls are refused until a move succeeds. The file's size thus bounds
// how much is acknowledged while state.db refuses writes, and the memory its records hold.
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
