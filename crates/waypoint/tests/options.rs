//! Options and error texts as a caller meets them: every option outside
//! its documented range is refused by `Database::open` with
//! `Error::InvalidOptions` naming the option, before anything is created;
//! and an error's text, printed whole with its chain, says each cause once.

use std::time::Duration;
use waypoint::{Database, Error, Options, PerWorkerOptions, Persistence};

/// The error and its `source()` chain joined as anyhow's `{:#}` prints it.
fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut next = e.source();
    while let Some(cause) = next {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        next = cause.source();
    }
    text
}

#[test]
fn an_io_error_says_its_os_error_once() {
    let tmp = tempfile::tempdir().unwrap();
    // A directory where the data file should be: opening it fails (EISDIR).
    std::fs::create_dir(tmp.path().join(waypoint::db::DATA_FILE)).unwrap();
    let e = Database::open(tmp.path(), Options::default()).unwrap_err();
    assert!(e.is_io(), "{e:?}");
    let os = format!("os error {}", e.raw_os_error().unwrap());
    assert!(e.to_string().contains(&os), "{e}");
    assert_eq!(chain(&e).matches(&os).count(), 1, "{}", chain(&e));
}

type Change = fn(&mut Options);

/// One bad value per option (each end of each range), and the option the
/// error must name.
const BAD: &[(&str, Change)] = &[
    ("page_size", |o| o.page_size = Some(0)),
    ("page_size", |o| o.page_size = Some(3000)),
    ("page_size", |o| o.page_size = Some(128 << 10)),
    ("page_size", |o| o.page_size = Some(usize::MAX)),
    ("buffer_pool_bytes", |o| o.buffer_pool_bytes = 0),
    ("buffer_pool_bytes", |o| o.buffer_pool_bytes = 16 * 4096 - 1),
    ("buffer_pool_bytes", |o| {
        o.page_size = Some(65536);
        o.buffer_pool_bytes = 16 * 65536 - 1;
    }),
    // `--buffer 99999TiB`: more than any machine's memory (this one's is
    // checked exactly below).
    ("buffer_pool_bytes", |o| o.buffer_pool_bytes = 99999 << 40),
    ("buffer_pool_bytes", |o| o.buffer_pool_bytes = usize::MAX),
    ("recovery_threads", |o| o.recovery_threads = 0),
    ("recovery_threads", |o| o.recovery_threads = 1025),
    ("recovery_threads", |o| o.recovery_threads = usize::MAX),
    ("wal_segment_bytes", |o| {
        o.persistence.per_worker_mut().unwrap().wal_segment_bytes = 0
    }),
    ("wal_segment_bytes", |o| {
        o.persistence.per_worker_mut().unwrap().wal_segment_bytes = 1
    }),
    ("wal_segment_bytes", |o| {
        o.persistence.per_worker_mut().unwrap().wal_segment_bytes = 4095
    }),
    ("wal_segment_bytes", |o| {
        o.persistence.per_worker_mut().unwrap().wal_segment_bytes = (1 << 30) + 1
    }),
    ("wal_segment_bytes", |o| {
        o.persistence.per_worker_mut().unwrap().wal_segment_bytes = u64::MAX
    }),
    ("checkpoint_shards", |o| {
        o.persistence.per_worker_mut().unwrap().checkpoint_shards = 0
    }),
    ("checkpoint_shards", |o| {
        o.persistence.per_worker_mut().unwrap().checkpoint_shards = 4097
    }),
    ("checkpoint_shards", |o| {
        o.persistence.per_worker_mut().unwrap().checkpoint_shards = 1_000_000
    }),
    ("checkpoint_threads", |o| {
        o.persistence.per_worker_mut().unwrap().checkpoint_threads = 0
    }),
    ("checkpoint_threads", |o| {
        o.persistence.per_worker_mut().unwrap().checkpoint_threads = 257
    }),
    ("wal_limit_bytes", |o| {
        o.persistence.per_worker_mut().unwrap().wal_limit_bytes = 0
    }),
    // `--wal-limit 1B`: a load stood still behind a checkpoint increment
    // per byte of log.
    ("wal_limit_bytes", |o| {
        o.persistence.per_worker_mut().unwrap().wal_limit_bytes = 1
    }),
    ("wal_limit_bytes", |o| {
        o.persistence.per_worker_mut().unwrap().wal_limit_bytes = 64 * 4096 - 1
    }),
    ("wal_limit_bytes", |o| {
        o.persistence.per_worker_mut().unwrap().checkpoint_shards = 4096;
        o.persistence.per_worker_mut().unwrap().wal_limit_bytes = 4096 * 4096 - 1;
    }),
    ("wal_limit_bytes", |o| {
        o.persistence.per_worker_mut().unwrap().wal_limit_bytes = (1 << 50) + 1
    }),
    ("wal_limit_bytes", |o| {
        o.persistence.per_worker_mut().unwrap().wal_limit_bytes = u64::MAX
    }),
    ("log_sync_interval", |o| {
        o.persistence.per_worker_mut().unwrap().log_sync_interval =
            Duration::from_secs(1) + Duration::from_nanos(1)
    }),
    ("log_sync_interval", |o| {
        o.persistence.per_worker_mut().unwrap().log_sync_interval = Duration::MAX
    }),
];

#[test]
fn every_option_out_of_range_is_refused_naming_it_and_nothing_is_created() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    for (i, (option, change)) in BAD.iter().enumerate() {
        let mut options = Options::default();
        change(&mut options);
        let refused = options.validate();
        match Database::open(&dir, options) {
            Err(Error::InvalidOptions(msg)) => {
                assert!(
                    msg.starts_with(&format!("{option} = ")) && msg.contains("out of range"),
                    "case {i}: {msg}"
                );
                assert_eq!(
                    refused.unwrap_err().to_string(),
                    format!("invalid options: {msg}")
                );
            }
            r => panic!("case {i} ({option}): expected InvalidOptions, got {r:?}"),
        }
        assert!(!dir.exists(), "case {i} ({option}) created the directory");
    }
}

/// Options that constrain each other name both in the error.
#[test]
fn options_out_of_range_together_name_both() {
    let msg = |change: Change| {
        let mut o = Options::default();
        change(&mut o);
        o.validate().unwrap_err().to_string()
    };
    let m = msg(|o| {
        o.persistence.per_worker_mut().unwrap().checkpoint_shards = 128;
        o.persistence.per_worker_mut().unwrap().wal_limit_bytes = 256 << 10;
    });
    assert!(
        m.contains("wal_limit_bytes = 256 KiB") && m.contains("checkpoint_shards 128"),
        "{m}"
    );
    // Each alone is in range.
    let shards = Options {
        persistence: Persistence::PerWorker(PerWorkerOptions {
            checkpoint_shards: 128,
            ..PerWorkerOptions::default()
        }),
        ..Options::default()
    };
    shards.validate().unwrap();
    let limit = Options {
        persistence: Persistence::PerWorker(PerWorkerOptions {
            wal_limit_bytes: 256 << 10,
            ..PerWorkerOptions::default()
        }),
        ..Options::default()
    };
    limit.validate().unwrap();
}

/// The defaults and both ends of every range are accepted.
#[test]
fn defaults_and_range_ends_are_valid() {
    Options::default().validate().unwrap();
    let edges: &[Change] = &[
        |o| o.page_size = Some(4096),
        |o| o.page_size = Some(65536),
        |o| o.buffer_pool_bytes = 16 * 4096,
        |o| {
            o.page_size = Some(65536);
            o.buffer_pool_bytes = 16 * 65536;
        },
        |o| o.recovery_threads = 1,
        |o| o.recovery_threads = 1024,
        |o| o.persistence.per_worker_mut().unwrap().wal_segment_bytes = 4096,
        |o| o.persistence.per_worker_mut().unwrap().wal_segment_bytes = 1 << 30,
        |o| {
            o.persistence.per_worker_mut().unwrap().checkpoint_shards = 1;
            o.persistence.per_worker_mut().unwrap().wal_limit_bytes = 4096;
        },
        |o| o.persistence.per_worker_mut().unwrap().checkpoint_shards = 4096,
        |o| o.persistence.per_worker_mut().unwrap().checkpoint_threads = 256,
        // More threads than shards: no more increments run at once than
        // there are shards.
        |o| {
            o.persistence.per_worker_mut().unwrap().checkpoint_shards = 1;
            o.persistence.per_worker_mut().unwrap().checkpoint_threads = 2;
            o.persistence.per_worker_mut().unwrap().wal_limit_bytes = 4096;
        },
        |o| o.persistence.per_worker_mut().unwrap().wal_limit_bytes = 64 * 4096,
        |o| o.persistence.per_worker_mut().unwrap().wal_limit_bytes = 1 << 50,
        |o| o.persistence.per_worker_mut().unwrap().log_sync_interval = Duration::ZERO,
        |o| o.persistence.per_worker_mut().unwrap().log_sync_interval = Duration::from_secs(1),
    ];
    for (i, change) in edges.iter().enumerate() {
        let mut o = Options::default();
        change(&mut o);
        assert!(o.validate().is_ok(), "case {i}: {:?}", o.validate());
    }
}

/// The buffer may be as large as the machine's memory and swap, no
/// larger; opening with the smallest valid options of every kind works.
#[test]
fn the_buffer_is_bounded_by_the_machines_memory_and_small_options_work() {
    let memory = waypoint::io::machine_memory_bytes().expect("Linux reports its memory");
    let memory = usize::try_from(memory).unwrap();
    let at = |bytes| Options {
        buffer_pool_bytes: bytes,
        ..Options::default()
    };
    assert!(at(memory / 4096 * 4096).validate().is_ok());
    let m = at(memory + 1).validate().unwrap_err().to_string();
    assert!(
        m.contains("buffer_pool_bytes") && m.contains("memory"),
        "{m}"
    );

    let tmp = tempfile::tempdir().unwrap();
    let small = Options {
        page_size: Some(4096),
        buffer_pool_bytes: 16 * 4096,
        recovery_threads: 1,
        persistence: Persistence::PerWorker(PerWorkerOptions {
            wal_segment_bytes: 4096,
            checkpoint_shards: 1,
            checkpoint_threads: 1,
            wal_limit_bytes: 4096,
            log_sync_interval: Duration::ZERO,
            ..PerWorkerOptions::default()
        }),
        ..Options::default()
    };
    let db = Database::open(tmp.path(), small.clone()).unwrap();
    let t = db.create_table("t").unwrap();
    let mut s = db.session();
    for i in 0..300u32 {
        let mut tx = s.begin().unwrap();
        tx.insert(&t, &i.to_be_bytes(), &[1; 200]).unwrap();
        tx.commit().unwrap();
    }
    drop(s);
    db.close().unwrap();
    let db = Database::open(tmp.path(), small).unwrap();
    let t = db.table("t").unwrap();
    let mut s = db.session();
    let mut tx = s.begin().unwrap();
    assert_eq!(tx.scan(&t, .., 1000).unwrap().len(), 300);
    drop(tx);
    drop(s);
    db.close().unwrap();
}

/// Without `page_size`, the buffer's lower bound is checked again against
/// the page size an existing database has.
#[test]
fn the_buffer_is_checked_against_an_existing_databases_page_size() {
    let tmp = tempfile::tempdir().unwrap();
    let big_pages = Options {
        page_size: Some(65536),
        ..Options::default()
    };
    Database::open(tmp.path(), big_pages)
        .unwrap()
        .close()
        .unwrap();
    let small = Options {
        buffer_pool_bytes: 16 * 4096,
        ..Options::default()
    };
    small.validate().unwrap();
    match Database::open(tmp.path(), small) {
        Err(Error::InvalidOptions(m)) => assert!(
            m.starts_with("buffer_pool_bytes = 64 KiB is out of range: at least 1 MiB"),
            "{m}"
        ),
        r => panic!("{r:?}"),
    }
}
