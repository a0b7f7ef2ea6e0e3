//! Where the control sockets are: one per traced process in a per-user, owner-only directory.

use crate::platform;
use std::io::{self};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The per-user directory of control sockets (created 0700 if missing), or why there is none.
pub fn socket_dir() -> io::Result<PathBuf> {
    let base = match std::env::var_os("XDG_RUNTIME_DIR") {
        Some(d) if !d.is_empty() => PathBuf::from(d).join("hushtrace"),
        _ => std::env::temp_dir().join(format!("hushtrace-{}", platform::geteuid())),
    };
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&base)?;
    let md = std::fs::symlink_metadata(&base)?;
    if !md.is_dir() || md.uid() != platform::geteuid() || md.permissions().mode() & 0o077 != 0 {
        return Err(io::Error::other(format!(
            "{} is not a private directory of this user (mode {:o}, uid {}): no control \
             socket",
            base.display(),
            md.permissions().mode() & 0o7777,
            md.uid()
        )));
    }
    Ok(base)
}

/// The control socket of process `pid`.
pub fn socket_path(pid: u32) -> io::Result<PathBuf> {
    Ok(socket_dir()?.join(format!("{pid}.sock")))
}

/// Removes the socket file `path` if it still is the one with (device, inode) `id`.
pub(crate) fn remove_socket_if(path: &Path, id: (u64, u64)) {
    if std::fs::symlink_metadata(path).is_ok_and(|md| (md.dev(), md.ino()) == id) {
        let _ = std::fs::remove_file(path);
    }
}
