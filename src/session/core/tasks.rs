//! Task ids through a gateway (tasks, protocol 2025-11-25).
//!
//! Each server makes up its own task ids, and many count from 1, so two servers behind one
//! gateway can hand out the same id. Keyed by the raw id, the host's `tasks/get` of one server's
//! task would reach whichever server answered last with that id, and a hostile server could take
//! over another's task (and answer for it) by returning the same id. So the host sees
//! `<server><separator><id>`, as it sees tool names: the prefix names the one server that made
//! the task (a server name never contains the separator), and a host's `tasks/*` request goes
//! back to that server with the server's own id. `Single` passes ids as they are.
//!
//! A server that starts again (after a crash, an idle stop, or a reload that replaced it) counts
//! its ids from 1 again, so the id also names which start of the server made the task: the
//! first start's as above, a later one's as `<server><separator>~<start>~<id>` (and a first
//! start's id that itself begins with `~` is written `~1~<id>`, so every host-facing id reads one
//! way only). A host asking after a task of an earlier start gets the `Unknown task` a server
//! gives for an id it never made, never another task's status or result.
//!
//! A server's other spellings of these keys (`TaskId`, `ｔａｓｋ`, `_Meta`: what a lenient host
//! reads as the key) are taken out first, so a host reads no id airlock did not name. Tasks the
//! host runs for a server's own requests are not offered to a gateway's servers (one server could
//! read another's): the host's `tasks` capability is not passed on, and a server's `tasks/*`
//! request to the host is declined.
//!
//! Pure: functions of the message and the server's name.

use serde_json::Value;

use crate::gateway::names::split;
use crate::mcp::lenient::{drop_other_spellings, reads_as_one_of};
use crate::mcp::{Field, RELATED_TASK, task_ended};

/// Who made a task: a server, which of its starts (counted over the session, 1 first), and the
/// gateway's separator.
#[derive(Debug, Clone, Copy)]
pub struct Maker<'a> {
    pub server: &'a str,
    pub start: u64,
    pub separator: &'a str,
}

/// What marks a start in a host-facing id.
const START_MARK: char = '~';

/// The host-facing id of a task `maker` made.
fn host_facing(task: &str, maker: Maker<'_>) -> String {
    let Maker {
        server,
        start,
        separator,
    } = maker;
    if start <= 1 && !task.starts_with(START_MARK) {
        format!("{server}{separator}{task}")
    } else {
        format!("{server}{separator}{START_MARK}{start}{START_MARK}{task}")
    }
}

/// A host-facing task id read back: the server's name, its start, and the server's own id.
/// `None` for an id airlock did not make (no server named, or not the one way it writes them).
pub fn read_host_facing<'a>(id: &'a str, separator: &'a str) -> Option<(&'a str, u64, &'a str)> {
    let (server, rest) = split(id, separator)?;
    let (start, task) = match rest.strip_prefix(START_MARK) {
        None => (1, rest),
        Some(marked) => {
            let (digits, task) = marked.split_once(START_MARK)?;
            (digits.parse::<u64>().ok()?, task)
        }
    };
    let maker = Maker {
        server,
        start,
        separator,
    };
    (!task.is_empty() && host_facing(task, maker) == id).then_some((server, start, task))
}

/// Names the task id at `slot` (when it is a string) for the host.
fn rename(slot: Option<&mut Value>, maker: Maker<'_>) {
    if let Some(Value::String(task)) = slot {
        *task = host_facing(task, maker);
    }
}

/// Takes out of `holder` (when an object) the other spellings of `keys`, and hands it back.
fn exact<'a>(holder: Option<&'a mut Value>, keys: &[&str]) -> Option<&'a mut Value> {
    let holder = holder?;
    if let Value::Object(object) = &mut *holder {
        let removed = drop_other_spellings(object, keys);
        if let Some(first) = removed.first() {
            tracing::warn!(
                "took {} key(s) out of a server's message that a lenient host would read as a task's, e.g. {first:?}",
                removed.len()
            );
        }
    }
    Some(holder)
}

/// The task id of `holder`'s `_meta` related-task, its other spellings taken out on the way.
fn related_task_slot(holder: Option<&mut Value>) -> Option<&mut Value> {
    let meta = exact(holder, &["_meta"])?.field_mut("_meta");
    let related = exact(meta, &[RELATED_TASK])?.field_mut(RELATED_TASK);
    exact(related, &["taskId"])?.field_mut("taskId")
}

/// A server's answer to a host request: the task a `CreateTaskResult` made (`result.task`), the
/// task a `tasks/get` or `tasks/cancel` answer describes (`result.taskId`, read only when
/// `answers_task_request`: another result may have a key of that name that is no task's), and
/// the task `tasks/result` names in its `_meta`.
pub fn name_in_answer(message: &mut Value, answers_task_request: bool, maker: Maker<'_>) {
    let keys: &[&str] = if answers_task_request {
        &["task", "taskId"]
    } else {
        &["task"]
    };
    let Some(result) = exact(message.field_mut("result"), keys) else {
        return;
    };
    let task = exact(result.field_mut("task"), &["taskId"]);
    rename(task.and_then(|t| t.field_mut("taskId")), maker);
    if answers_task_request {
        rename(result.field_mut("taskId"), maker);
    }
    rename(related_task_slot(Some(result)), maker);
}

/// The task (the server's own id) a server's answer to a host's `tasks/*` request shows ended: a
/// `tasks/get` or `tasks/cancel` answer in a final status, or a `tasks/result` answer (given
/// once the task ended), which names its task in `_meta`.
pub fn ended_in_answer(answer: &Value) -> Option<&str> {
    let result = answer.field("result")?;
    if let Some(task) = result.at(&["_meta", RELATED_TASK, "taskId"]) {
        return task.as_str();
    }
    if task_ended(result.field("status")) {
        return result.field("taskId").and_then(Value::as_str);
    }
    None
}

/// The task a server's `notifications/tasks/status` shows ended.
pub fn ended_in_status(notification: &Value) -> Option<&str> {
    let params = notification.field("params")?;
    if task_ended(params.field("status")) {
        return params.field("taskId").and_then(Value::as_str);
    }
    None
}

/// One task of a server's `tasks/list` page.
pub fn name_listed(task: &mut Value, maker: Maker<'_>) {
    rename(
        exact(Some(task), &["taskId"]).and_then(|t| t.field_mut("taskId")),
        maker,
    );
}

/// A server's request or notification: the task its `_meta` relates it to, and the task a
/// `notifications/tasks/status` describes.
pub fn name_in_server_message(message: &mut Value, method: &str, maker: Maker<'_>) {
    let params = message.field_mut("params");
    if method == STATUS {
        if let Some(params) = exact(params, &["taskId"]) {
            rename(params.field_mut("taskId"), maker);
            rename(related_task_slot(Some(params)), maker);
        }
        return;
    }
    rename(related_task_slot(params), maker);
}

/// The host's answer to a server's request: the related task its `_meta` names goes back to the
/// server as the server's own id when it is one this start of that server made; a task of
/// another server's (or of an earlier start) is not the server's to see, and is taken out.
pub fn unname_in_host_answer(message: &mut Value, maker: Maker<'_>) {
    let Some(meta) = exact(message.field_mut("result"), &["_meta"])
        .and_then(|result| exact(result.field_mut("_meta"), &[RELATED_TASK]))
    else {
        return;
    };
    exact(meta.field_mut(RELATED_TASK), &["taskId"]);
    let own = meta
        .at(&[RELATED_TASK, "taskId"])
        .and_then(Value::as_str)
        .and_then(|task| read_host_facing(task, maker.separator))
        .filter(|(named, start, _)| *named == maker.server && *start == maker.start)
        .map(|(_, _, task)| task.to_string());
    match own {
        Some(task) => meta[RELATED_TASK]["taskId"] = Value::String(task),
        None => {
            if let Some(meta) = meta.as_object_mut() {
                meta.remove(RELATED_TASK);
            }
        }
    }
}

/// Whether a server's request to the host is about the host's own tasks (`tasks/get`, ...), in
/// any spelling a lenient host reads as one.
pub fn about_host_tasks(method: &str) -> bool {
    reads_as_one_of(
        method,
        &["tasks/get", "tasks/result", "tasks/cancel", "tasks/list"],
    )
}

/// A server's notification spelled otherwise than `notifications/tasks/status` but read as it by
/// a lenient host: it would name a task airlock did not name, so it is dropped.
pub fn lookalike_status(method: &str) -> bool {
    method != STATUS && reads_as_one_of(method, &[STATUS])
}

const STATUS: &str = "notifications/tasks/status";

/// A server's request made task-augmented (`params.task`, any spelling): the host's tasks are not
/// offered to a gateway's servers, so the host runs it as a plain request, whose answer comes
/// back to the server that asked.
/// True when it took something out.
pub fn make_plain(request: &mut Value) -> bool {
    let Some(Value::Object(params)) = request.field_mut("params") else {
        return false;
    };
    let before = params.len();
    params.retain(|key, _| !reads_as_one_of(key, &["task"]));
    params.len() != before
}

/// A host's `tasks/get`, `tasks/result` or `tasks/cancel`: the server and the start the task's
/// id names, and the server's own id, put back into the request. `None` (nothing changed) when
/// the id is not one airlock made: no server made such a task.
pub fn take_maker_of(message: &mut Value, separator: &str) -> Option<(String, u64)> {
    let slot = message.field_mut("params")?.field_mut("taskId")?;
    let (server, start, task) = read_host_facing(slot.as_str()?, separator)?;
    let (server, task) = (server.to_string(), task.to_string());
    *slot = Value::String(task);
    Some((server, start))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn first(server: &'static str, separator: &'static str) -> Maker<'static> {
        Maker {
            server,
            start: 1,
            separator,
        }
    }

    #[test]
    fn every_task_id_a_server_sends_is_named_for_its_server() {
        let mut created =
            json!({"id": 1, "result": {"task": {"taskId": "1", "status": "working"}}});
        name_in_answer(&mut created, false, first("a", "__"));
        assert_eq!(created["result"]["task"]["taskId"], "a__1");

        let mut got = json!({"id": 1, "result": {"taskId": "1", "status": "completed"}});
        name_in_answer(&mut got, true, first("a", "__"));
        assert_eq!(got["result"]["taskId"], "a__1");

        // A tool's result with a key of that name is no task's.
        let mut tool = json!({"id": 1, "result": {"taskId": "x", "content": []}});
        name_in_answer(&mut tool, false, first("a", "__"));
        assert_eq!(tool["result"]["taskId"], "x");

        let mut result = json!({"id": 1, "result": {"content": [],
            "_meta": {RELATED_TASK: {"taskId": "7"}}}});
        name_in_answer(&mut result, true, first("b", "__"));
        assert_eq!(result["result"]["_meta"][RELATED_TASK]["taskId"], "b__7");

        let mut status = json!({"method": "notifications/tasks/status",
            "params": {"taskId": "1", "status": "input_required"}});
        name_in_server_message(&mut status, "notifications/tasks/status", first("a", "--"));
        assert_eq!(status["params"]["taskId"], "a--1");

        let mut question = json!({"id": 3, "method": "elicitation/create",
            "params": {"message": "?", "_meta": {RELATED_TASK: {"taskId": "1"}}}});
        name_in_server_message(&mut question, "elicitation/create", first("a", "__"));
        assert_eq!(question["params"]["_meta"][RELATED_TASK]["taskId"], "a__1");

        let mut listed = json!({"taskId": "9", "status": "working"});
        name_listed(&mut listed, first("c", "__"));
        assert_eq!(listed["taskId"], "c__9");
    }

    #[test]
    fn a_host_request_goes_back_to_the_server_its_task_id_names() {
        let mut get = json!({"id": 1, "method": "tasks/get", "params": {"taskId": "a__1__x"}});
        assert_eq!(take_maker_of(&mut get, "__"), Some(("a".into(), 1)));
        assert_eq!(get["params"]["taskId"], "1__x");

        let mut unnamed = json!({"id": 1, "method": "tasks/get", "params": {"taskId": "1"}});
        assert_eq!(take_maker_of(&mut unnamed, "__"), None);
        assert_eq!(unnamed["params"]["taskId"], "1");

        let mut number = json!({"id": 1, "method": "tasks/get", "params": {"taskId": 1}});
        assert_eq!(take_maker_of(&mut number, "__"), None);
    }

    #[test]
    fn a_later_starts_task_ids_name_the_start_and_read_back_one_way_only() {
        let third = Maker {
            server: "a",
            start: 3,
            separator: "__",
        };
        let mut created =
            json!({"id": 1, "result": {"task": {"taskId": "t-1", "status": "working"}}});
        name_in_answer(&mut created, false, third);
        assert_eq!(created["result"]["task"]["taskId"], "a__~3~t-1");
        let mut get = json!({"id": 2, "method": "tasks/get", "params": {"taskId": "a__~3~t-1"}});
        assert_eq!(take_maker_of(&mut get, "__"), Some(("a".into(), 3)));
        assert_eq!(get["params"]["taskId"], "t-1");

        // The first start's id that begins with the mark is marked, so it cannot pass for a
        // later start's.
        let mut odd = json!({"taskId": "~2~x"});
        name_listed(&mut odd, first("a", "__"));
        assert_eq!(odd["taskId"], "a__~1~~2~x");
        assert_eq!(read_host_facing("a__~1~~2~x", "__"), Some(("a", 1, "~2~x")));
        assert_eq!(read_host_facing("a__t-1", "__"), Some(("a", 1, "t-1")));

        // Spellings airlock never writes are no task's.
        for id in [
            "a__~1~t-1",
            "a__~03~t-1",
            "a__~3~",
            "a__~3",
            "a__~x~t",
            "a__",
            "a__~~t",
        ] {
            assert_eq!(read_host_facing(id, "__"), None, "{id}");
            let mut get = json!({"id": 2, "method": "tasks/get", "params": {"taskId": id}});
            assert_eq!(take_maker_of(&mut get, "__"), None, "{id}");
            assert_eq!(get["params"]["taskId"], id, "left as it was");
        }
    }

    #[test]
    fn a_host_answer_names_a_related_task_back_only_for_the_start_that_made_it() {
        let second = Maker {
            server: "a",
            start: 2,
            separator: "__",
        };
        let answer = |task: &str| {
            json!({"id": 1, "result": {"action": "accept",
                "_meta": {RELATED_TASK: {"taskId": task}}}})
        };
        let mut own = answer("a__~2~t-1");
        unname_in_host_answer(&mut own, second);
        assert_eq!(own["result"]["_meta"][RELATED_TASK]["taskId"], "t-1");
        for other in ["a__t-1", "a__~3~t-1", "b__~2~t-1"] {
            let mut earlier = answer(other);
            unname_in_host_answer(&mut earlier, second);
            assert!(
                earlier["result"]["_meta"].get(RELATED_TASK).is_none(),
                "{other}"
            );
        }
    }
}
