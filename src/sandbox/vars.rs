//! Template variables for grants, profile paths and profile env values (the grammar itself is
//! `crate::paths`'s one template language).

use std::path::{Path, PathBuf};

use super::PlanRequest;
use crate::paths::{Var, VarSource, normalize_path};

/// Template variables for grants and profile env values.
pub(super) struct Vars<'a> {
    pub(super) home: Option<&'a Path>,
    pub(super) private_home: PathBuf,
    pub(super) private_tmp: PathBuf,
    pub(super) parent_env: &'a [(String, String)],
}

impl<'a> Vars<'a> {
    pub(super) fn new(request: &'a PlanRequest) -> Self {
        let base = request.dirs.servers_dir().join(&request.server);
        Vars {
            home: request.dirs.home.as_deref(),
            private_home: base.join("home"),
            private_tmp: base.join("tmp"),
            parent_env: &request.parent_env,
        }
    }

    /// Expands `~`, `${private_home}`, `${private_tmp}`, `${env:NAME}` and `${env:NAME|fallback}`.
    /// `None` when a variable without fallback is unset (or `~` with no home), or the template
    /// is malformed.
    pub(super) fn expand(&self, template: &str) -> Option<String> {
        let lookup = |var: Var<'_>| match var {
            Var::Plain("private_home") => Some(self.private_home.to_string_lossy().into_owned()),
            Var::Plain("private_tmp") => Some(self.private_tmp.to_string_lossy().into_owned()),
            Var::Plain(_) => None,
            Var::Env(name) => self.parent_env.var(name).map(str::to_string),
        };
        let expanded = crate::paths::expand_path(template, self.home, &lookup).ok()?;
        expanded.unset.is_empty().then_some(expanded.value)
    }

    pub(super) fn expand_path(&self, template: &str) -> Option<PathBuf> {
        let expanded = self.expand(template)?;
        let path = PathBuf::from(expanded);
        path.is_absolute().then(|| normalize_path(&path))
    }
}
