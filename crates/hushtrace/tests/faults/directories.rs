//! Directories and files: the session's directory is resolved once and opened by descriptor
//! (chdir, symbolic links swapped in, many sessions), a root others could write is refused,
//! and the files are private.

use super::*;
use std::os::unix::fs::{MetadataExt, PermissionsExt};

/// 9.3: a relative output directory and a `chdir()` afterwards: everything still goes to the
/// directory resolved at start, and the trace stays readable.
#[test]
fn relative_output_dir_survives_chdir() {
    in_child(Duration::from_secs(60), || {
        let base = temp_dir("fault-chdir");
        let elsewhere = base.join("elsewhere");
        std::fs::create_dir_all(&elsewhere).map_err(|e| e.to_string())?;
        std::env::set_current_dir(&base).map_err(|e| e.to_string())?;
        let s = hushtrace::Session::builder()
            .output_dir("rel-trace")
            .subbuf_size(4096)
            .start()
            .map_err(|e| e.to_string())?;
        emit(500);
        std::env::set_current_dir(&elsewhere).map_err(|e| e.to_string())?;
        // A new thread (new stream) and a new callsite (metadata rewrite) after the chdir.
        std::thread::spawn(|| {
            emit(300);
            hushtrace::event!("fault", "after_chdir", x = 1u8);
        })
        .join()
        .unwrap();
        let st = s.stop().map_err(|e| e.to_string())?;
        check!(
            st.trace_dir.is_absolute() && st.trace_dir.starts_with(&base),
            "trace_dir {} is not the absolute directory resolved at start",
            st.trace_dir.display()
        );
        check!(
            !elsewhere.join("rel-trace").exists(),
            "files went to the new working directory"
        );
        check!(
            st.events_discarded == 0,
            "discarded {}",
            st.events_discarded
        );
        readable_with(&base.join("rel-trace"), 800)
    });
}

/// 9.4: a session root that another user could write is refused (as ssh refuses such
/// files).
#[test]
fn root_writable_by_others_is_refused() {
    in_child(Duration::from_secs(30), || {
        let root = temp_dir("fault-perm");
        std::fs::create_dir_all(&root).map_err(|e| e.to_string())?;
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o777))
            .map_err(|e| e.to_string())?;
        let r = hushtrace::Session::builder().output_dir(&root).start();
        let e = match r {
            Ok(_) => return Err("a world-writable root was accepted".into()),
            Err(e) => e.to_string(),
        };
        check!(
            e.contains(&root.display().to_string()) && e.contains("writable"),
            "unclear error: {e}"
        );
        // Group-writable too; a private one works.
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o770))
            .map_err(|e| e.to_string())?;
        check!(
            hushtrace::Session::builder()
                .output_dir(&root)
                .start()
                .is_err(),
            "a group-writable root was accepted"
        );
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o755))
            .map_err(|e| e.to_string())?;
        let s = hushtrace::Session::builder()
            .output_dir(&root)
            .start()
            .map_err(|e| format!("a 0755 root of ours is fine: {e}"))?;
        s.stop().map_err(|e| e.to_string())?;
        Ok(())
    });
}

/// 9.4: swapping `<root>/<pid>` for a symbolic link after the session created it does not
/// redirect new streams or the metadata rename: files are created relative to the directory
/// the session opened.
#[test]
fn swapped_trace_dir_symlink_is_not_followed() {
    in_child(Duration::from_secs(60), || {
        let root = temp_dir("fault-symlink");
        let attacker = root.with_extension("attacker");
        std::fs::create_dir_all(&attacker).map_err(|e| e.to_string())?;
        let s = hushtrace::Session::builder()
            .output_dir(&root)
            .subbuf_size(4096)
            .start()
            .map_err(|e| e.to_string())?;
        let td = s.trace_dir();
        let moved = root.join("moved");
        std::fs::rename(&td, &moved).map_err(|e| e.to_string())?;
        std::os::unix::fs::symlink(&attacker, &td).map_err(|e| e.to_string())?;
        std::thread::spawn(|| {
            emit(400);
            hushtrace::event!("fault", "new_callsite", y = 2u16);
        })
        .join()
        .unwrap();
        let _ = s.stop();
        let planted: Vec<_> = std::fs::read_dir(&attacker)
            .map_err(|e| e.to_string())?
            .flatten()
            .map(|e| e.file_name())
            .collect();
        check!(
            planted.is_empty(),
            "files created through the symlink: {planted:?}"
        );
        check!(
            moved.join("metadata").is_file(),
            "metadata not in the session's own directory"
        );
        Ok(())
    });
}

/// 9.10: the 1,001st session into one directory works.
#[test]
fn thousand_and_one_sessions_into_one_directory() {
    in_child(Duration::from_secs(180), || {
        let dir = temp_dir("fault-many");
        for i in 0..1001 {
            let s = hushtrace::Session::builder()
                .output_dir(&dir)
                .subbuf_size(4096)
                .num_subbufs(2)
                .start()
                .map_err(|e| format!("session {i}: {e}"))?;
            s.stop().map_err(|e| format!("session {i}: {e}"))?;
        }
        let n = std::fs::read_dir(&dir)
            .map_err(|e| e.to_string())?
            .flatten()
            .filter(|e| e.path().is_dir())
            .count();
        check!(n == 1001, "{n} trace directories");
        Ok(())
    });
}

/// The trace files keep their privacy whatever the umask: 0700 directories, 0600 files.
#[test]
fn files_created_through_directory_descriptors_are_private() {
    in_child(Duration::from_secs(30), || {
        // SAFETY: setting our own umask.
        unsafe { libc::umask(0) };
        let dir = temp_dir("fault-modes");
        let s = hushtrace::Session::builder()
            .output_dir(&dir)
            .subbuf_size(4096)
            .start()
            .map_err(|e| e.to_string())?;
        emit(1000);
        s.stop().map_err(|e| e.to_string())?;
        let mut stack = vec![dir.clone()];
        while let Some(p) = stack.pop() {
            let md = std::fs::symlink_metadata(&p).map_err(|e| e.to_string())?;
            let mode = md.mode() & 0o777;
            if md.is_dir() {
                check!(mode == 0o700, "{} has mode {mode:o}", p.display());
                for e in std::fs::read_dir(&p).map_err(|e| e.to_string())?.flatten() {
                    stack.push(e.path());
                }
            } else {
                check!(mode == 0o600, "{} has mode {mode:o}", p.display());
            }
        }
        Ok(())
    });
}
