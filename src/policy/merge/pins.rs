//! Merging a layer's `[pins]` section: `pinning` and `new_servers`. Both are scalars (the last
//! layer that sets one wins); loosening one (`enforce` → `warn` → `off`, `quarantine` → `trust`)
//! is widening, refused in the project layer and under an org lock.

use super::*;
use crate::policy::file::PinsSection;
use crate::policy::{NewServers, PinningMode, PinsPolicy};

pub(super) fn merge_pins(
    pins: &mut PinsPolicy,
    ctx: &Ctx<'_>,
    widening: &Widening,
    section: &PinsSection,
) -> Result<(), SourceError> {
    if let Some(mode) = &section.pinning {
        let value: PinningMode = *mode.get_ref();
        widening.check(
            ctx,
            &mode.span(),
            &format!("`pins.pinning = \"{value}\"`"),
            value < pins.pinning.value,
        )?;
        pins.pinning = ctx.sourced(value, &mode.span());
    }
    if let Some(policy) = &section.new_servers {
        let value: NewServers = *policy.get_ref();
        widening.check(
            ctx,
            &policy.span(),
            &format!("`pins.new_servers = \"{value}\"`"),
            value < pins.new_servers.value,
        )?;
        pins.new_servers = ctx.sourced(value, &policy.span());
    }
    Ok(())
}
