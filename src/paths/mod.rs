//! The user's environment and paths, read one way everywhere.
//!
//! Several rooms need the same small facts: where airlock's state and config live (XDG base
//! directories), what `~` and `${env:NAME}` in a template mean, how a path is normalised without
//! touching the disk, and which file a command name runs. Each is written once here, as a pure
//! function over an environment snapshot taken at the edge, so every caller agrees.

mod command;
mod dirs;
mod environment;
mod launcher;
mod normal;
mod regular;
mod resolve;
mod shims;
mod template;

pub use command::{ResolveError, resolve_command};
pub use dirs::UserDirs;
pub use environment::{EnvVars, VarSource};
pub use launcher::{
    Anatomy, INTERPRETERS, Launcher, PACKAGE_RUNNERS, anatomy, option_value, uv_option,
};
pub use normal::{is_under, normalize, normalize_path, walk_components};
pub use regular::{open_regular, read_small, read_small_text, read_small_text_within};
pub use resolve::resolve_as_far_as_exists;
pub use shims::{Disk, RealDisk, Shim, resolve_shim};
pub use template::{Expanded, TemplateError, Var, after_tilde, expand, expand_path, expand_tilde};
