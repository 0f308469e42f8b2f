//! Options and error texts as a caller meets them: every option outside
//! its documented range is refused by `Database::open` with
//! `Error::InvalidOptions` naming the option, before anything is created;
//! and an error's text, printed whole with its chain, says each cause once.

use waypoint::{Database, Options};

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
