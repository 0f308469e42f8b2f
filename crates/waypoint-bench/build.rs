//! Names the source a benchmark binary was built from, so that a report
//! says which code produced its figures: `WAYPOINT_COMMIT` is the git
//! commit (12 hex digits), `-modified` when tracked files differed from it
//! at build time, or `unknown` outside a git checkout.

use std::path::Path;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn main() {
    let commit = git(&["rev-parse", "--short=12", "HEAD"]).filter(|c| !c.is_empty());
    let modified =
        git(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty());
    let name = match commit {
        Some(c) if modified => format!("{c}-modified"),
        Some(c) => c,
        None => "unknown".to_string(),
    };
    println!("cargo:rustc-env=WAYPOINT_COMMIT={name}");
    // Run again when the commit or the index moves, or a source file of
    // the workspace changes (a directory is scanned for any change).
    if let Some(git_dir) = git(&["rev-parse", "--absolute-git-dir"]) {
        for f in ["HEAD", "index", "refs", "packed-refs"] {
            let p = Path::new(&git_dir).join(f);
            if p.exists() {
                println!("cargo:rerun-if-changed={}", p.display());
            }
        }
    }
    println!("cargo:rerun-if-changed=../../crates");
}
