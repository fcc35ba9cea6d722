//! Where a job's files may be: checkpoint directories confined to roots the admin configures.
//!
//! Tenant `t` owns the area `<root>/<t>/` of each checkpoint root (created by the daemon, owned
//! by `t`'s unix identity, mode 0700). A submitted `checkpoint_dir` must be a normalised absolute
//! path strictly inside the submitter's own area: `..`, `.`, empty components, NUL bytes, paths
//! through a symlink and other tenants' areas are refused with a 400 naming the field. The
//! directory itself is created by the run, as the tenant's identity (never by the daemon as
//! root), so a symlink swapped in after validation leads nowhere the tenant could not already
//! write.

use crate::security::identity::UnixIdentity;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

/// The checkpoint roots.
#[derive(Clone, Debug, PartialEq)]
pub struct CheckpointRoots {
    roots: Vec<PathBuf>,
}

impl CheckpointRoots {
    /// Roots as configured (absolute paths); none: `<data_dir>/checkpoints`.
    pub fn new(configured: &[PathBuf], data_dir: &Path) -> Self {
        let roots = if configured.is_empty() {
            vec![data_dir.join("checkpoints")]
        } else {
            configured.to_vec()
        };
        CheckpointRoots { roots }
    }

    /// The configured roots.
    pub fn roots(&self) -> &[PathBuf] {
        &self.roots
    }

    /// `tenant`'s area in the first root: the default home of its checkpoints and its runs'
    /// default working directory.
    pub fn tenant_area(&self, tenant: &str) -> PathBuf {
        self.roots[0].join(tenant)
    }

    /// The default checkpoint directory of job `id`.
    pub fn default_dir(&self, tenant: &str, id: u32) -> PathBuf {
        self.tenant_area(tenant).join(format!("job-{id}"))
    }

    /// Creates the roots (owned by the daemon; 0711 when tenants must traverse them) and checks
    /// that, with isolation, other users can reach them (every ancestor searchable).
    pub fn prepare(&self, isolated: bool) -> Result<(), String> {
        for root in &self.roots {
            std::fs::create_dir_all(root)
                .map_err(|e| format!("checkpoint root {}: {e}", root.display()))?;
            // The root must be the daemon's alone: in a directory others can write (a shared
            // 1777 /scratch), a tenant could plant another tenant's area before the daemon makes it.
            let meta = std::fs::symlink_metadata(root)
                .map_err(|e| format!("checkpoint root {}: {e}", root.display()))?;
            let me = nix::unistd::Uid::effective().as_raw();
            if meta.file_type().is_symlink()
                || meta.uid() != me
                || meta.permissions().mode() & 0o022 != 0
            {
                return Err(format!(
                    "checkpoint root {} must be a directory owned by the daemon's user (uid {me}) that nobody else can write (it is uid {}, mode {:o}); use a subdirectory, e.g. {}/arbiter",
                    root.display(),
                    meta.uid(),
                    meta.permissions().mode() & 0o7777,
                    root.display()
                ));
            }
            let mode = if isolated { 0o711 } else { 0o700 };
            std::fs::set_permissions(root, std::fs::Permissions::from_mode(mode))
                .map_err(|e| format!("checkpoint root {}: {e}", root.display()))?;
            if isolated {
                for ancestor in root.ancestors().skip(1) {
                    let meta = std::fs::metadata(ancestor)
                        .map_err(|e| format!("{}: {e}", ancestor.display()))?;
                    if meta.permissions().mode() & 0o001 == 0 {
                        return Err(format!(
                            "checkpoint root {}: {} is not searchable by other users (mode {:o}), so jobs running as their tenant's uid could not reach their checkpoints; `chmod o+x {}` or choose checkpoint_roots / --data-dir elsewhere",
                            root.display(),
                            ancestor.display(),
                            meta.permissions().mode() & 0o7777,
                            ancestor.display()
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    /// Creates `tenant`'s area in every root, owned by `identity` (or the daemon) with mode
    /// 0700. The area sits in a root only the daemon can write, so nobody can race this.
    pub fn prepare_tenant(
        &self,
        tenant: &str,
        identity: Option<UnixIdentity>,
    ) -> Result<(), String> {
        for root in &self.roots {
            let area = root.join(tenant);
            match std::fs::symlink_metadata(&area) {
                Ok(meta) if !meta.file_type().is_dir() => {
                    return Err(format!("{}: exists and is not a directory", area.display()));
                }
                Ok(_) => {}
                Err(_) => {
                    std::fs::create_dir(&area).map_err(|e| format!("{}: {e}", area.display()))?
                }
            }
            if let Some(id) = identity {
                let meta = std::fs::symlink_metadata(&area)
                    .map_err(|e| format!("{}: {e}", area.display()))?;
                if meta.uid() != id.uid || meta.gid() != id.gid {
                    std::os::unix::fs::lchown(&area, Some(id.uid), Some(id.gid)).map_err(|e| {
                        format!("{}: chown to {}:{}: {e}", area.display(), id.uid, id.gid)
                    })?;
                }
            }
            std::fs::set_permissions(&area, std::fs::Permissions::from_mode(0o700))
                .map_err(|e| format!("{}: {e}", area.display()))?;
        }
        Ok(())
    }

    /// Checks that `dir` is a directory the job's user can enter: for an identity, every
    /// directory on the way must grant it search permission (mode bits; ACLs are not read).
    /// A missing directory and one it cannot reach get the same answer, so a tenant learns
    /// nothing about paths it could not see itself.
    pub fn usable_dir(dir: &str, identity: Option<UnixIdentity>) -> Result<(), String> {
        check_lengths(dir)?;
        let Some(id) = identity else {
            return match std::fs::metadata(dir) {
                Ok(meta) if meta.is_dir() => Ok(()),
                Ok(_) => Err(format!("`{dir}` is not a directory")),
                Err(e) => Err(format!("`{dir}`: {e}")),
            };
        };
        let refused = || {
            format!(
                "`{dir}` is not a directory that the job's user (uid {}) can enter",
                id.uid
            )
        };
        // Walk the path as the kernel would for that user: each directory passed through must
        // grant it search permission *before* anything below it is looked at, and symlinks are
        // followed the same way. (Resolving the path as root first would answer, for `a/x/..`,
        // whether `x` exists inside a directory the user cannot search.)
        let searchable = |meta: &std::fs::Metadata| {
            let bit = if meta.uid() == id.uid {
                0o100
            } else if meta.gid() == id.gid {
                0o010
            } else {
                0o001
            };
            meta.is_dir() && meta.permissions().mode() & bit != 0
        };
        let mut at = PathBuf::from("/");
        if !std::fs::metadata(&at).is_ok_and(|m| searchable(&m)) {
            return Err(refused());
        }
        let mut pending: Vec<String> = dir
            .split('/')
            .filter(|c| !c.is_empty())
            .rev()
            .map(str::to_string)
            .collect();
        let mut links = 0;
        while let Some(component) = pending.pop() {
            match component.as_str() {
                "." => continue,
                ".." => {
                    // `at` is searchable, so its parent was passed through on the way here.
                    at.pop();
                    continue;
                }
                _ => {}
            }
            let next = at.join(&component);
            let meta = std::fs::symlink_metadata(&next).map_err(|_| refused())?;
            if meta.file_type().is_symlink() {
                links += 1;
                let target = std::fs::read_link(&next).map_err(|_| refused())?;
                if links > 40 {
                    return Err(refused());
                }
                let target = target.to_str().ok_or_else(refused)?.to_string();
                if target.starts_with('/') {
                    at = PathBuf::from("/");
                }
                pending.extend(
                    target
                        .split('/')
                        .filter(|c| !c.is_empty())
                        .rev()
                        .map(str::to_string),
                );
                continue;
            }
            if !searchable(&meta) {
                return Err(refused());
            }
            at = next;
        }
        Ok(())
    }

    /// Checks a submitted `checkpoint_dir` for `tenant`: normalised, absolute, inside the
    /// tenant's own area of a root, not through a symlink.
    pub fn check(&self, tenant: &str, requested: &str) -> Result<PathBuf, String> {
        if requested.contains('\0') {
            return Err("contains a NUL byte".into());
        }
        check_lengths(requested)?;
        let path = Path::new(requested);
        if !path.is_absolute() {
            return Err(format!("`{requested}` is not an absolute path"));
        }
        if requested
            .split('/')
            .skip(1)
            .any(|c| c.is_empty() || c == "." || c == "..")
            && requested != "/"
        {
            // `a//b`, `a/./b`, `a/../b` and a trailing `/` are refused rather than normalised:
            // what is checked is exactly what the job gets.
            return Err(format!(
                "`{requested}` is not a normalised path (no `.`, `..` or empty components)"
            ));
        }
        if path
            .components()
            .any(|c| matches!(c, Component::ParentDir | Component::CurDir))
        {
            return Err(format!("`{requested}` contains `..` or `.`"));
        }
        let area = self
            .roots
            .iter()
            .map(|r| r.join(tenant))
            .find(|area| path.starts_with(area) && path != area.as_path())
            .ok_or_else(|| {
                let allowed: Vec<String> = self
                    .roots
                    .iter()
                    .map(|r| format!("{}/", r.join(tenant).display()))
                    .collect();
                format!(
                    "`{requested}` is outside this tenant's checkpoint areas (allowed: below {})",
                    allowed.join(" or ")
                )
            })?;
        // No symlink anywhere from the area down to the deepest existing component.
        let mut at = area.clone();
        let rest = path
            .strip_prefix(&area)
            .map_err(|_| format!("`{requested}` is outside the tenant's area"))?;
        let mut components = vec![None];
        components.extend(rest.components().map(Some));
        for component in components {
            if let Some(c) = component {
                at.push(c);
            }
            match std::fs::symlink_metadata(&at) {
                Ok(meta) if meta.file_type().is_symlink() => {
                    return Err(format!("`{}` is a symlink", at.display()));
                }
                Ok(_) => {}
                Err(_) => break,
            }
        }
        Ok(path.to_path_buf())
    }
}

/// Paths the kernel would refuse anyway: at most 4,095 bytes, components at most 255.
fn check_lengths(path: &str) -> Result<(), String> {
    if path.len() > 4095 {
        return Err(format!("longer than 4095 bytes ({})", path.len()));
    }
    if let Some(long) = path.split('/').find(|c| c.len() > 255) {
        return Err(format!(
            "a component is longer than 255 bytes ({} bytes)",
            long.len()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checkpoint_dir_outside_the_tenants_area_is_refused() {
        let dir = tempfile::tempdir().expect("dir");
        let roots = CheckpointRoots::new(&[], dir.path());
        roots.prepare(false).expect("roots");
        roots.prepare_tenant("a", None).expect("area a");
        roots.prepare_tenant("b", None).expect("area b");
        let root = dir.path().join("checkpoints");
        let ok = format!("{}/a/run-1", root.display());
        assert_eq!(roots.check("a", &ok).expect("inside"), PathBuf::from(&ok));
        for (bad, why) in [
            (format!("{}/b/run-1", root.display()), "outside"),
            (format!("{}/a/../b/run-1", root.display()), "normalised"),
            (format!("{}/a/./x", root.display()), "normalised"),
            (format!("{}/a", root.display()), "outside"),
            ("/etc/arbiter".to_string(), "outside"),
            ("relative/dir".to_string(), "absolute"),
            (format!("{}/a/x\0y", root.display()), "NUL"),
            (format!("{}/a/x/", root.display()), "normalised"),
            (
                format!("{}/a/{}", root.display(), "x".repeat(300)),
                "255 bytes",
            ),
        ] {
            let e = roots.check("a", &bad).expect_err(&bad);
            assert!(e.contains(why), "{bad}: {e}");
        }
        // A symlink planted inside the tenant's own area, pointing at another tenant's.
        std::os::unix::fs::symlink(root.join("b"), root.join("a/link")).expect("symlink");
        let e = roots
            .check("a", &format!("{}/a/link/stolen", root.display()))
            .expect_err("symlink");
        assert!(e.contains("symlink"), "{e}");
    }

    #[test]
    fn a_working_dir_the_job_cannot_enter_is_refused_without_saying_whether_it_exists() {
        let dir = tempfile::tempdir().expect("dir");
        let private = dir.path().join("private");
        std::fs::create_dir(&private).expect("mkdir");
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))
            .expect("chmod");
        std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o700)).expect("chmod");
        let stranger = Some(UnixIdentity {
            uid: 1_999_999_999,
            gid: 1_999_999_999,
        });
        let open = dir.path().to_str().expect("utf-8");
        CheckpointRoots::usable_dir(open, stranger).expect("a 0755 directory is usable");
        let inside = format!("{}/sub", private.display());
        std::fs::create_dir(&inside).expect("mkdir");
        let denied =
            CheckpointRoots::usable_dir(&inside, stranger).expect_err("behind a 0700 directory");
        let missing = CheckpointRoots::usable_dir(&format!("{}/none", private.display()), stranger)
            .expect_err("missing");
        assert_eq!(
            denied.replace("/sub", ""),
            missing.replace("/none", ""),
            "same answer for both"
        );
        // `..` does not reveal what exists behind a directory the user cannot search.
        std::fs::create_dir(private.join("hidden")).expect("mkdir");
        let through_hidden =
            CheckpointRoots::usable_dir(&format!("{}/hidden/../..", private.display()), stranger)
                .expect_err("through the private dir");
        let through_missing =
            CheckpointRoots::usable_dir(&format!("{}/nothere/../..", private.display()), stranger)
                .expect_err("through a missing one");
        assert_eq!(
            through_hidden.replace("hidden", "X"),
            through_missing.replace("nothere", "X")
        );
        // A symlink into the private directory does not help either.
        std::os::unix::fs::symlink(private.join("hidden"), dir.path().join("link"))
            .expect("symlink");
        CheckpointRoots::usable_dir(&format!("{}/link", dir.path().display()), stranger)
            .expect_err("through a symlink");
        // The owner may enter.
        let me = UnixIdentity {
            uid: nix::unistd::Uid::effective().as_raw(),
            gid: nix::unistd::Gid::effective().as_raw(),
        };
        CheckpointRoots::usable_dir(&inside, Some(me)).expect("its owner enters");
    }

    #[test]
    fn a_checkpoint_root_others_can_write_is_refused() {
        let dir = tempfile::tempdir().expect("dir");
        let shared = dir.path().join("scratch");
        std::fs::create_dir(&shared).expect("mkdir");
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).expect("chmod");
        let e = CheckpointRoots::new(std::slice::from_ref(&shared), dir.path())
            .prepare(false)
            .expect_err("refused");
        assert!(e.contains("nobody else can write"), "{e}");
    }

    #[test]
    fn tenant_areas_are_private() {
        let dir = tempfile::tempdir().expect("dir");
        let roots = CheckpointRoots::new(&[], dir.path());
        roots.prepare(false).expect("roots");
        roots.prepare_tenant("a", None).expect("area");
        let mode = std::fs::metadata(roots.tenant_area("a"))
            .expect("stat")
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(mode, 0o700);
    }
}
