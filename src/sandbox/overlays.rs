//! Planning the runtime caches' copy-on-write overlays (npm, uv).

use std::path::PathBuf;

use super::grants::narrow_derived;
use super::plan::check_server_name;
use super::vars::Vars;
use super::{CacheOverlayPlan, HostFacts, PlanRequest, RuntimeProfile};

/// The profile's cache overlays, expanded. A cache that would expose a protected path, or whose
/// mount point is not inside the private home, is left out (and noted); a cache the user does not
/// have is still planned (the helper then mounts nothing and the mount point is an empty cache).
pub(super) fn plan_cache_overlays(
    request: &PlanRequest,
    host: &HostFacts,
    vars: &Vars<'_>,
    profile: &RuntimeProfile,
    protected: &[(String, PathBuf)],
    notes: &mut Vec<String>,
) -> Vec<CacheOverlayPlan> {
    let mut out: Vec<CacheOverlayPlan> = Vec::new();
    for overlay in &profile.cache_overlays {
        let (Some(lower), Some(target)) = (
            vars.expand_path(&overlay.lower),
            vars.expand_path(&overlay.at),
        ) else {
            notes.push(format!(
                "{} cache overlay skipped: a variable it names is not set",
                overlay.name
            ));
            continue;
        };
        // Over the real path only when a mount namespace exists (otherwise there is nothing to
        // mount; in the constructed root the directories leading to it are the root's own, so a
        // server running as nobody reaches it too), and never over or inside airlock's own dirs.
        let server_dir = request.dirs.servers_dir().join(&request.server);
        let at_real_path = overlay.mount_at_real_path
            && host.user_namespaces
            && !vars.private_home.starts_with(&lower)
            && !lower.starts_with(&vars.private_home)
            && !server_dir.starts_with(&lower)
            && !lower.starts_with(&server_dir);
        let target = if at_real_path { lower.clone() } else { target };
        // The name is a directory name under the state dir; the mount point must stay inside the
        // private home, which the server may write anyway (no new grant, no mount over real
        // paths), unless it is the real cache itself (checked against the protected paths below).
        let name_ok = check_server_name(&overlay.name).is_ok();
        let inside_home = target != vars.private_home && target.starts_with(&vars.private_home);
        if !name_ok || !(inside_home || at_real_path) {
            notes.push(format!(
                "{} cache overlay skipped: its name or mount point {} is not a directory inside the private home",
                overlay.name,
                target.display()
            ));
            continue;
        }
        if out
            .iter()
            .any(|o| o.name == overlay.name || o.target == target)
        {
            continue;
        }
        if narrow_derived(&lower, protected, request.dirs.home.as_deref()).is_none() {
            notes.push(format!(
                "{} cache overlay skipped: {} would expose a protected path",
                overlay.name,
                lower.display()
            ));
            continue;
        }
        let mount = host.user_namespaces;
        if !mount {
            notes.push(format!(
                "no user namespaces: the {} cache is a private empty cache at {} (no overlay of {})",
                overlay.name,
                target.display(),
                lower.display()
            ));
        }
        // The installs of this very spec, when the command is a runner airlock installs for
        // and this is its cache: never another package's (see `fetch::layers`).
        let runner = crate::fetch::detect(
            &request.program,
            request.resolved.program_canonical.as_deref(),
            &request.args,
        )
        .filter(|runner| runner.cache() == overlay.name);
        let layers = runner.filter(|_| mount).map(|runner| {
            crate::fetch::layers::Store::new(
                &request.dirs.servers_dir(),
                &request.server,
                &overlay.name,
                &runner.store_name(),
            )
            .layers_dir()
        });
        out.push(CacheOverlayPlan {
            name: overlay.name.clone(),
            lower,
            target,
            mount,
            at_real_path,
            layers,
            upper_on_disk: None,
        });
    }
    out
}
