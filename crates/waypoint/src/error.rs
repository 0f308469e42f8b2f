//! Typed errors for every public operation.
//!
//! Invariant: no input a caller can give makes the engine panic; everything
//! that can go wrong is one of these variants. Errors that concern bytes on
//! disk carry the file and, where it is known, the byte offset.
//!
//! Each message is whole: it says its cause itself (an [`Error::Io`] ends
//! with the OS error) and `source()` returns nothing, so a caller that
//! prints `{e}` sees the cause and one that prints the chain (anyhow's
//! `{:#}`) sees it once, not twice.

use crate::ids::LogPos;
use std::path::PathBuf;

/// Result alias used throughout the engine.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The I/O operation that failed, named in [`Error::Io`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum IoOp {
    Open,
    Read,
    Write,
    SyncData,
    SetLen,
    Len,
    Remove,
    Rename,
    CreateDir,
    SyncDir,
    ListDir,
}

impl std::fmt::Display for IoOp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = match self {
            IoOp::Open => "open",
            IoOp::Read => "read",
            IoOp::Write => "write",
            IoOp::SyncData => "fdatasync",
            IoOp::SetLen => "set_len",
            IoOp::Len => "stat",
            IoOp::Remove => "remove",
            IoOp::Rename => "rename",
            IoOp::CreateDir => "create_dir",
            IoOp::SyncDir => "sync_dir",
            IoOp::ListDir => "list_dir",
        };
        f.write_str(name)
    }
}

/// Everything that can go wrong in waypoint.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The transaction conflicted with a concurrent one and was aborted.
    /// Retrying it is safe and expected.
    #[error("transaction conflict: aborted, retry it")]
    Conflict,
    #[error("key of {len} bytes exceeds the maximum of {max} bytes")]
    KeyTooLarge { len: usize, max: usize },
    #[error("value of {len} bytes exceeds the maximum of {max} bytes")]
    ValueTooLarge { len: usize, max: usize },
    #[error("key already exists")]
    KeyExists,
    #[error("key not found")]
    KeyNotFound,
    #[error("no table or index named {name:?}")]
    UnknownTable { name: String },
    #[error("a table or index named {name:?} already exists")]
    TableExists { name: String },
    #[error("invalid name {name:?}: {reason}")]
    InvalidName { name: String, reason: &'static str },
    /// Index {index:?} exists in the catalog but this process has not given its
    /// key extractor yet (`Database::open_index`), so writes to its table are refused
    /// rather than leaving the index stale.
    #[error("index {index:?} on table {table:?} is not bound: call open_index with its key extractor before writing to the table")]
    IndexNotBound { table: String, index: String },
    #[error("the table handle refers to a dropped table")]
    TableDropped,
    #[error("the transaction has already committed or aborted")]
    TransactionFinished,
    #[error("the database is closed")]
    Closed,
    /// An earlier I/O failure left the in-memory state possibly ahead of the
    /// disk. Every call fails until the database is reopened and recovered.
    #[error("database poisoned by an earlier I/O failure ({cause}); reopen it")]
    Poisoned { cause: String },
    /// The disk holding the log is full: a log write failed with `ENOSPC`.
    /// The database is read-only from then on: every write and every commit
    /// that would log is refused with this error, and a commit whose records
    /// were not yet durable fails with it (it was not acknowledged: after a
    /// reopen it is absent, or present whole if the kernel had taken its
    /// bytes before the disk filled). Reads (`get`, `scan`, read-only
    /// transactions) keep working on the committed data. Nothing is retried:
    /// free space, then reopen the database, and recovery restores every
    /// acknowledged commit from the log.
    #[error("the log's disk is full ({cause}): writes are refused, reads keep working; free space and reopen the database")]
    LogFull { path: PathBuf, cause: String },
    /// A system call failed. The message ends with the OS error; `cause`
    /// is not returned by `source()` (the message already says it).
    #[error("{op} failed on {path}{}: {cause}", fmt_offset(*.offset))]
    Io {
        op: IoOp,
        path: PathBuf,
        offset: Option<u64>,
        cause: std::io::Error,
    },
    #[error("corruption in {path} at offset {offset}: {detail}")]
    Corruption {
        path: PathBuf,
        offset: u64,
        detail: String,
    },
    #[error("{path} has format version {found}, this build reads version {supported}")]
    UnsupportedFormatVersion {
        path: PathBuf,
        found: u32,
        supported: u32,
    },
    /// A log segment written by another persistence scheme than the one
    /// reading it (the scheme tag in its header): refused, never read as
    /// this scheme's records.
    #[error("{path} is a log segment of {}, not of the {expected} scheme", scheme_of_tag(*.found))]
    LogSchemeMismatch {
        path: PathBuf,
        found: u8,
        expected: crate::persist::SchemeKind,
    },
    #[error("{path} uses {found}-byte pages but {requested} were requested")]
    PageSizeMismatch {
        path: PathBuf,
        found: u32,
        requested: u32,
    },
    #[error("{path} is not a waypoint database")]
    NotADatabase { path: PathBuf },
    /// A log partition ends before the stream position the checkpoint
    /// metadata records as synced for it: log bytes that were durable are
    /// gone (a cut or lost segment file, a bad copy). `path` is the segment
    /// the log now ends in, or the partition's directory when it holds no
    /// segment. Recovering without them would lose acknowledged commits, so
    /// the database is not opened and nothing is changed.
    #[error("log partition {partition} ({path}) ends at stream position {found_end}, but it was synced up to {expected_end}: the synced log bytes {found_end}..{expected_end} are missing")]
    LogTruncated {
        partition: u32,
        path: PathBuf,
        expected_end: LogPos,
        found_end: LogPos,
    },
    /// A file or directory of the database is missing: the log of a
    /// database that was not closed cleanly, its checkpoint metadata, or
    /// the data file of a directory that holds the rest of a database.
    /// Nothing is created in its place.
    #[error("{path} is missing: {detail}")]
    MissingFile { path: PathBuf, detail: String },
    /// The database was not closed cleanly by `scheme`, which keeps a log,
    /// and was opened with another scheme: opening it would skip recovery
    /// and lose what only the log holds. Open it with `scheme` first.
    #[error("{path} was not closed cleanly by the {scheme} scheme and its log must be recovered: open it with that scheme first")]
    RecoveryNeeded {
        path: PathBuf,
        scheme: crate::persist::SchemeKind,
    },
    /// The database was not closed cleanly by `scheme`, which keeps no
    /// log, after pages had been written to its data file: the file may
    /// hold a torn mix of states, and what it held at its last clean close
    /// is gone. Nothing can recover it; nothing was changed. Restore it
    /// from a copy or remove the directory.
    #[error("{path} was not closed cleanly by the {scheme} scheme, which keeps no log, and pages were written to it since its last clean close: its contents may be torn and cannot be recovered; restore a copy or remove the directory")]
    NotRecoverable {
        path: PathBuf,
        scheme: crate::persist::SchemeKind,
    },
    /// The files of the database do not belong together: `path` is from
    /// another time (or database) than the others, as `detail` says.
    #[error("{path} does not match the rest of the database: {detail}")]
    Mismatch { path: PathBuf, detail: String },
    /// An option outside its documented range (see [`crate::Options`]),
    /// or two options that do not go together. The message names the
    /// option, its value and the range.
    #[error("invalid options: {0}")]
    InvalidOptions(String),
    /// The system refused memory the options asked for: the buffer pool's
    /// frames (`Options::buffer_pool_bytes`). Nothing was opened.
    #[error("cannot reserve {bytes} bytes of memory for {what}")]
    OutOfMemory { what: &'static str, bytes: usize },
    #[error(
        "buffer pool exhausted: all {frames} frames are pinned or dirty and could not be written"
    )]
    BufferPoolExhausted { frames: usize },
    /// The persistence scheme keeps changed pages in memory until a clean
    /// close (it never writes them to the data file while running), and
    /// they fill the buffer pool: too few frames are left besides them for
    /// new pages. New pages and writes are refused from then on; reads
    /// keep working, and nothing is lost or damaged. Close the database
    /// and reopen it with a larger `buffer_pool_bytes`.
    #[error("the buffer pool (buffer_pool_bytes = {buffer_pool_bytes}) is full of changes kept in memory: writes are refused, reads keep working; reopen the database with a larger buffer_pool_bytes")]
    MemoryFull { buffer_pool_bytes: u64 },
    /// The data file holds the most pages a page id can name: no page can
    /// be allocated. Reads go on; writes that need a new page fail.
    #[error("{path} is full: it holds the most pages a page id can name ({pages})")]
    DataFileFull { path: PathBuf, pages: u64 },
    /// A background or helper thread of the engine panicked (a bug in the
    /// engine or in an application's index extractor run there): `what`
    /// says which. The operation it served failed; nothing was
    /// acknowledged on its behalf.
    #[error("internal error: {what}")]
    Internal { what: String },
    /// `Session::call` named a procedure the database was not opened with
    /// (`Options::procedures`); a command log naming one is refused at
    /// open the same way, before anything is written.
    #[error("no stored procedure named {name:?} is registered (Options::procedures)")]
    UnknownProcedure { name: String },
    /// The parameters of a call are not what procedure `name` takes: they
    /// do not encode, or do not decode as its parameter type (exactly,
    /// with no bytes left over).
    #[error("bad parameters for stored procedure {name:?}: {detail}")]
    ProcedureParams { name: String, detail: String },
    /// `Session::call` asked for another result type than procedure
    /// `name` returns. The call ran and committed.
    #[error("stored procedure {name:?} returns another type than {expected} (the call committed)")]
    ProcedureOutput { name: String, expected: &'static str },
    /// Under a scheme that logs only stored-procedure calls (`command`),
    /// a write outside `Session::call` cannot be replayed and is refused.
    /// Reads and read-only transactions are allowed.
    #[error("this database runs the {scheme} scheme, which logs only stored-procedure calls: write inside a procedure (Session::call)")]
    ProcedureRequired { scheme: crate::persist::SchemeKind },
    /// Under a scheme that runs calls serially per partition (`command`),
    /// a single-partition call of procedure `name`, routed to partition
    /// `home`, read or wrote a row of `table` that the table's
    /// partitioning key (`Procedures::partition_key`) puts in partition
    /// `row`. Its result could depend on the other partition's concurrent
    /// calls, so replay might not repeat it: the call is rolled back and
    /// logged nowhere. Route it to the row's partition, or register it as
    /// multi-partition.
    #[error("stored procedure {name:?} runs in partition {home} but touched a row of table {table:?} in partition {row}: a single-partition procedure must keep to its partition (register it as multi-partition, or fix its routing)")]
    ProcedurePartition {
        name: String,
        table: String,
        home: usize,
        row: usize,
    },
    /// The operation is not built for this database's persistence scheme;
    /// `what` says which and why.
    #[error("not supported: {what}")]
    Unsupported { what: String },
}

fn scheme_of_tag(tag: u8) -> String {
    match crate::persist::SchemeKind::from_tag(tag) {
        Some(kind) => format!("the {kind} scheme"),
        None => format!("an unknown scheme (tag {tag})"),
    }
}

fn fmt_offset(offset: Option<u64>) -> String {
    offset
        .map(|o| format!(" at offset {o}"))
        .unwrap_or_default()
}

impl Error {
    /// True for errors after which retrying the same transaction may succeed.
    pub fn is_retryable(&self) -> bool {
        matches!(self, Error::Conflict)
    }

    /// True when the error came from the disk: a failed system call (EIO,
    /// ENOSPC, ...), not a logical error of the caller.
    pub fn is_io(&self) -> bool {
        matches!(self, Error::Io { .. })
    }

    /// True for [`Error::LogFull`]: the database is read-only until it is
    /// reopened after space was freed.
    pub fn is_log_full(&self) -> bool {
        matches!(self, Error::LogFull { .. })
    }

    /// The raw OS error code of an I/O error, if any (e.g. `libc::ENOSPC`;
    /// also for [`Error::LogFull`]).
    pub fn raw_os_error(&self) -> Option<i32> {
        match self {
            Error::Io { cause, .. } => cause.raw_os_error(),
            Error::LogFull { .. } => Some(libc::ENOSPC),
            _ => None,
        }
    }

    /// Did a write fail because the disk is full (`ENOSPC`)? Only writes
    /// and file creation or growth count: a failed sync is a failed sync,
    /// whatever its code (the data it covered may be lost).
    pub(crate) fn is_enospc_on_write(&self) -> bool {
        match self {
            Error::Io { op, cause, .. } => {
                matches!(op, IoOp::Write | IoOp::SetLen | IoOp::Open)
                    && cause.raw_os_error() == Some(libc::ENOSPC)
            }
            _ => false,
        }
    }

    pub(crate) fn io(
        op: IoOp,
        path: impl Into<PathBuf>,
        offset: Option<u64>,
        cause: std::io::Error,
    ) -> Self {
        Error::Io {
            op,
            path: path.into(),
            offset,
            cause,
        }
    }
}
