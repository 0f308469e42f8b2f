//! Names the source a benchmark binary was built from, so that a report
//! says which code produced its figures: `WAYPOINT_COMMIT` is the git
//! commit (12 hex digits), `-modified` when the workspace's tracked
//! sources (`crates/`, `Cargo.toml`, `Cargo.lock`) differed from it at
//! build time, or `unknown` where the workspace is not the top of a git
//! checkout or git cannot tell.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The sources `-modified` looks at, relative to the workspace root.
const SOURCES: [&str; 3] = ["crates", "Cargo.toml", "Cargo.lock"];

fn git(root: &Path, args: &[&str]) -> Option<String> {
    // No optional locks: `git status` would otherwise refresh the index
    // and could hold `index.lock` while the developer commits.
    let out = Command::new("git")
        .arg("--no-optional-locks")
        .args(args)
        .current_dir(root)
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let root = manifest.join("../..");
    for s in SOURCES {
        println!("cargo:rerun-if-changed={}", root.join(s).display());
    }
    // A copy of the workspace inside some other checkout is not that
    // checkout's commit.
    let top = git(&root, &["rev-parse", "--show-toplevel"]).map(PathBuf::from);
    let ours = match (top.and_then(|t| t.canonicalize().ok()), root.canonicalize()) {
        (Some(t), Ok(r)) => t == r,
        _ => false,
    };
    let commit = ours
        .then(|| git(&root, &["rev-parse", "--short=12", "HEAD"]))
        .flatten()
        .filter(|c| !c.is_empty());
    let mut status = vec!["status", "--porcelain", "--untracked-files=no", "--"];
    status.extend(SOURCES);
    let name = match (commit, git(&root, &status)) {
        (Some(c), Some(changes)) if changes.is_empty() => c,
        (Some(c), Some(_)) => format!("{c}-modified"),
        _ => "unknown".to_string(),
    };
    println!("cargo:rustc-env=WAYPOINT_COMMIT={name}");
    // Run again when HEAD or a branch moves (a linked worktree keeps its
    // refs in the common directory) or the index changes.
    for dir in ["--absolute-git-dir", "--git-common-dir"] {
        let Some(d) = ours.then(|| git(&root, &["rev-parse", dir])).flatten() else {
            continue;
        };
        let d = root.join(d);
        for f in ["HEAD", "index", "refs", "packed-refs"] {
            let p = d.join(f);
            if p.exists() {
                println!("cargo:rerun-if-changed={}", p.display());
            }
        }
    }
}
