//! The preset policies in `policies/`, compiled into the binary so `--policy strict` works from
//! any directory and the default never depends on an installed file.

pub const DEFAULT_NAME: &str = "builtin:default.toml";
pub const DEFAULT: &str = include_str!("../../policies/default.toml");

const PRESETS: [(&str, &str); 4] = [
    ("default", DEFAULT),
    ("strict", include_str!("../../policies/strict.toml")),
    ("permissive", include_str!("../../policies/permissive.toml")),
    (
        "org-example",
        include_str!("../../policies/org-example.toml"),
    ),
];

/// The text of a preset by name (`strict`, `permissive`, ...).
pub fn named(name: &str) -> Option<&'static str> {
    PRESETS
        .iter()
        .find(|(preset, _)| *preset == name)
        .map(|(_, text)| *text)
}

pub fn names() -> impl Iterator<Item = &'static str> {
    PRESETS.iter().map(|(name, _)| *name)
}
