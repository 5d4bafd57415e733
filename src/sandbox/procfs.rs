//! Why the kernel can refuse a server its own `/proc`, in words (pure).
//!
//! Every constructed root gets a fresh procfs of the server's pid namespace. Inside a user
//! namespace the kernel allows that mount only when the procfs already mounted in the mount
//! namespace is fully visible: a file or directory of it covered by another mount (a read-only
//! bind over `/proc/sys` from systemd's `ProtectKernelTunables=`, `/dev/null` over `/proc/kmsg`
//! from `ProtectKernelLogs=`, a container runtime's masks) would be uncovered by a new procfs, so
//! the mount fails with `EPERM` and no server can start. The helper's failure message and
//! `airlock doctor` both name those mounts from here.

/// The only directory of procfs that is always empty and exists to be mounted on (the kernel's
/// `register_sysctl_mount_point`): a mount there does not make procfs less visible.
const EMPTY_MOUNT_POINTS: &[&str] = &["/sys/fs/binfmt_misc"];

/// Mount points strictly below the procfs at `proc_at` (as `/proc/...`), from the text of
/// `/proc/self/mountinfo`, each once, in the order mounted. `proc_at` is where the host's procfs
/// is in the reader's view (`/proc`, or `/oldroot/proc` inside the helper's staging root).
pub fn covering_mounts(mountinfo: &str, proc_at: &str) -> Vec<String> {
    let mut covering: Vec<String> = Vec::new();
    for line in mountinfo.lines() {
        // Field 5 is the mount point (octal escapes such as `\040` kept as they are).
        let Some(mount_point) = line.split(' ').nth(4) else {
            continue;
        };
        let Some(below) = mount_point
            .strip_prefix(proc_at)
            .filter(|rest| rest.starts_with('/'))
        else {
            continue;
        };
        if EMPTY_MOUNT_POINTS.contains(&below) {
            continue;
        }
        let shown = format!("/proc{below}");
        if !covering.contains(&shown) {
            covering.push(shown);
        }
    }
    covering
}

/// The cause and the fix when the kernel refused the server's own procfs. `covering` comes from
/// [`covering_mounts`]; with none found the cause is outside this mount namespace's view.
pub fn refusal_cause(covering: &[String]) -> String {
    if covering.is_empty() {
        return "the kernel refused a new procfs for the server's pid namespace (no mount covers \
                part of this /proc: a security module or the container runtime refuses it); fix: \
                run airlock where a user namespace may mount procfs (`airlock doctor` tries it; \
                docs/deploy.md lists what the sandbox needs)"
            .to_string();
    }
    format!(
        "the kernel allows a new procfs in a user namespace only where the /proc already mounted \
         is fully visible, and here {} covered by another mount; fix: run airlock where /proc is \
         not masked: under systemd without ProtectKernelTunables= or ProtectKernelLogs=, in a \
         container with an unmasked /proc (docs/deploy.md)",
        match covering {
            [one] => format!("{one} is"),
            many => format!("{} are", many.join(", ")),
        }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTINFO: &str = "\
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
23 22 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw
24 23 0:22 / /proc/sys/fs/binfmt_misc rw,relatime shared:13 - autofs systemd-1 rw
25 23 0:21 /sys /proc/sys ro,nosuid,nodev,noexec,relatime shared:12 - proc proc rw
26 23 0:5 /null /proc/kmsg ro,nosuid shared:2 - devtmpfs udev rw
27 22 0:23 / /processes rw - tmpfs tmpfs rw
28 23 0:21 /sys /proc/sys ro,nosuid shared:12 - proc proc rw
";

    #[test]
    fn mounts_below_proc_are_named_once_except_the_empty_mount_point() {
        assert_eq!(
            covering_mounts(MOUNTINFO, "/proc"),
            vec!["/proc/sys".to_string(), "/proc/kmsg".to_string()]
        );
    }

    #[test]
    fn the_helper_reads_the_host_proc_under_its_staging_root() {
        let staged = MOUNTINFO.replace(" /proc", " /oldroot/proc");
        assert_eq!(
            covering_mounts(&staged, "/oldroot/proc"),
            vec!["/proc/sys".to_string(), "/proc/kmsg".to_string()]
        );
        assert!(covering_mounts(&staged, "/proc").is_empty());
    }

    #[test]
    fn an_unmasked_proc_has_nothing_covering_it() {
        let plain = "22 1 8:1 / / rw - ext4 /dev/sda1 rw\n23 22 0:21 / /proc rw - proc proc rw\n";
        assert!(covering_mounts(plain, "/proc").is_empty());
        assert!(covering_mounts("garbage\n\n", "/proc").is_empty());
    }

    #[test]
    fn the_cause_names_the_covering_mounts_and_a_fix() {
        let one = refusal_cause(&["/proc/sys".to_string()]);
        assert!(one.contains("/proc/sys is covered"), "{one}");
        assert!(
            one.contains("fix: ") && one.contains("ProtectKernelTunables="),
            "{one}"
        );
        let two = refusal_cause(&["/proc/sys".to_string(), "/proc/kmsg".to_string()]);
        assert!(two.contains("/proc/sys, /proc/kmsg are covered"), "{two}");
        let none = refusal_cause(&[]);
        assert!(
            none.contains("fix: ") && none.contains("airlock doctor"),
            "{none}"
        );
    }
}
